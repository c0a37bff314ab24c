// The two ways Step Memory aligns its rows: as ranges when every rank's steps
// arrived gap-free (the usual run, one pass over the rows), else through the
// shared analysis/step_alignment engine, so that both sections agree on which
// steps the ranks have in common.
#include "analysis/step_memory_alignment.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/history.hpp"
#include "analysis/step_alignment.hpp"

namespace traceml::analysis::step_memory {

namespace {

// Each rank keeps this many windows of its latest steps before the ranks are
// intersected: enough history to still find W common steps when one rank
// lags, and bounded whatever the run length.
constexpr std::int64_t kRankHistoryWindows = 20;

/// A row without both peaks was not measured on a CUDA device.
bool usable(const model::StepMemoryRecord& r) {
  return r.peak_allocated_bytes && r.peak_reserved_bytes;
}

// Ranks in [0, this) are looked up in a table indexed by rank; others (negative,
// or too sparse for a table) in a hash map. Real ranks are dense from 0, and a
// table lookup per row is what keeps the load linear on millions of rows.
constexpr int kDenseRankLimit = 1 << 20;
constexpr auto kDenseSlots = static_cast<std::size_t>(kDenseRankLimit);

/// One rank's rows as add() sees them.
struct RankSlot {
  int rank = 0;
  std::size_t count = 0;
  std::int64_t first_step = 0;  ///< the step of its first row
  std::int64_t last_step = 0;   ///< the step of its latest row
  RowList rows;                 ///< only kept while RankRows::consecutive
};

/// The usable rows of each rank, in arrival order, gathered in one pass.
struct RankRows {
  std::vector<RankSlot> slots;  ///< in order of first arrival
  /// Every rank's steps arrived as first, first + 1, ... with no repeat or
  /// gap, the usual case: its steps are then the range [first, last] and its
  /// i-th row holds step first + i.
  bool consecutive = true;

  void add(int rank, std::int64_t step, RowIndex row) {
    RankSlot& s = slots[slot_of(rank, step)];
    if (s.count++ > 0) {
      // Unsigned difference: defined for any two steps, and 1 only for
      // last + 1 once step > last excludes the wrap-around.
      consecutive =
          consecutive && step > s.last_step &&
          static_cast<std::uint64_t>(step) - static_cast<std::uint64_t>(s.last_step) == 1u;
      s.last_step = step;
    }
    // Otherwise the rows are gathered again, with their steps (align_lists).
    if (consecutive) s.rows.push_back(row);
  }

  /// The slot of a rank seen by add().
  [[nodiscard]] std::size_t slot(int rank) const {
    if (rank >= 0 && rank < kDenseRankLimit) return dense_[static_cast<std::size_t>(rank)] - 1;
    return sparse_.at(rank);
  }

 private:
  std::size_t slot_of(int rank, std::int64_t step) {
    if (rank >= 0 && rank < kDenseRankLimit) {
      const auto r = static_cast<std::size_t>(rank);
      if (r >= dense_.size())
        dense_.resize(std::min(std::max(r + 1, 2 * dense_.size()), kDenseSlots));
      if (dense_[r] == 0) dense_[r] = new_slot(rank, step) + 1;
      return dense_[r] - 1;
    }
    const auto it = sparse_.find(rank);
    if (it != sparse_.end()) return it->second;
    const std::size_t slot = new_slot(rank, step);
    sparse_.emplace(rank, slot);
    return slot;
  }

  std::size_t new_slot(int rank, std::int64_t step) {
    RankSlot s;
    s.rank = rank;
    s.first_step = step;
    s.last_step = step;
    slots.push_back(std::move(s));
    return slots.size() - 1;
  }

  std::vector<std::size_t> dense_;  ///< rank -> slot + 1; 0: not seen yet
  std::unordered_map<int, std::size_t> sparse_;
};

/// How many of its latest steps each rank keeps before the intersection.
std::int64_t history_cap(std::int64_t window) {
  return window > std::numeric_limits<std::int64_t>::max() / kRankHistoryWindows
             ? std::numeric_limits<std::int64_t>::max()
             : std::max(kRankHistoryWindows * window, window + 1);
}

/// Alignment when every rank's steps are a gap-free range (RankRows::consecutive):
/// ranges are capped and intersected as ranges, and a rank's row of step s is
/// rows[s - first].
void align_ranges(const model::Telemetry& t, RankRows& b, const std::vector<std::size_t>& order,
                  std::int64_t window, Inputs& in) {
  const auto u = [](std::int64_t x) { return static_cast<std::uint64_t>(x); };
  // Distinct steps: the size of the union of the ranges.
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  ranges.reserve(order.size());
  for (const RankSlot& s : b.slots)
    ranges.emplace_back(s.first_step, s.last_step);
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t distinct = 0;
  std::optional<std::int64_t> covered;  // the last step counted so far
  for (const auto& [lo, hi] : ranges) {
    if (covered && hi <= *covered) continue;
    const std::int64_t from = covered && lo <= *covered ? *covered + 1 : lo;
    distinct += u(hi) - u(from) + 1u;
    covered = hi;
  }
  in.steps_seen = static_cast<std::int64_t>(distinct);
  if (t.totals) in.steps_seen = t.totals->step_memory_ids;  // rows a bounded store dropped
  in.latest_step = covered;                                 // the highest last step

  const auto keep = static_cast<std::uint64_t>(history_cap(window));
  std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  for (const RankSlot& s : b.slots) {
    const std::uint64_t n = s.count;
    const std::int64_t kept_from =
        n > keep ? static_cast<std::int64_t>(u(s.first_step) + (n - keep)) : s.first_step;
    lo = std::max(lo, kept_from);
    hi = std::min(hi, s.last_step);
  }
  if (lo > hi) return;
  const auto w = static_cast<std::uint64_t>(window);
  if (u(hi) - u(lo) >= w) lo = static_cast<std::int64_t>(u(hi) - (w - 1u));

  AlignedWindow& out = in.window;
  const std::uint64_t count = u(hi) - u(lo) + 1u;
  out.steps.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i)
    out.steps.push_back(static_cast<std::int64_t>(u(lo) + i));
  for (const std::size_t slot : order) {
    RankSlot& s = b.slots[slot];
    out.ranks.push_back(s.rank);
    out.first.push_back(static_cast<std::size_t>(u(lo) - u(s.first_step)));
    out.rows.push_back(std::move(s.rows));
  }
}

/// Alignment in general: each rank's rows sorted and deduplicated, capped,
/// and intersected step by step.
void align_lists(const model::Telemetry& t, RankRows& b, const std::vector<std::size_t>& order,
                 std::int64_t window, Inputs& in) {
  // One more pass over the rows, in order: reading them rank by rank would
  // jump through memory.
  std::vector<std::vector<StepRow>> by_slot(b.slots.size());
  for (std::size_t slot = 0; slot < by_slot.size(); ++slot)
    by_slot[slot].reserve(b.slots[slot].count);
  for (RowIndex i = 0; i < t.step_memory.size(); ++i) {
    const auto& r = t.step_memory[i];
    if (usable(r)) by_slot[b.slot(r.global_rank)].push_back({r.step, i});
  }
  for (auto& rows : by_slot)
    sort_and_dedupe(rows);
  // A bounded store has dropped old rows: the run's own count holds for them.
  in.steps_seen = t.totals ? t.totals->step_memory_ids : distinct_steps(by_slot);
  in.latest_step = by_slot.front().back().step;
  for (const auto& rows : by_slot)
    in.latest_step = std::max(*in.latest_step, rows.back().step);

  const std::int64_t keep = history_cap(window);
  // Each rank's history starts at first[slot]: only its latest `keep` steps.
  std::vector<std::size_t> first(by_slot.size(), 0);
  for (std::size_t slot = 0; slot < by_slot.size(); ++slot)
    first[slot] = latest_start(by_slot[slot].size(), keep);
  std::vector<std::int64_t> common = common_steps(by_slot, first, order);
  keep_latest(common, static_cast<std::size_t>(std::max<std::int64_t>(0, window)));
  if (common.empty()) return;

  // Every rank holds every common step by construction, so none is dropped.
  AlignedWindow& out = in.window;
  out.steps = std::move(common);
  for (const std::size_t slot : order) {
    const auto& list = by_slot[slot];
    std::vector<RowIndex> rows;
    rows.reserve(out.steps.size());
    std::size_t j = first[slot];
    for (const std::int64_t s : out.steps) {
      while (list[j].step < s)
        ++j;
      rows.push_back(list[j].row);
    }
    out.ranks.push_back(b.slots[slot].rank);
    out.first.push_back(0);
    out.rows.emplace_back().assign(std::move(rows));
  }
}

}  // namespace

/// Dedupe (later wins), per-rank history cap, then the latest W steps common
/// to every rank (spec §4.4 "Inputs").
Inputs load_inputs(const model::Telemetry& t, std::int64_t window) {
  Inputs in;
  RankRows b;
  for (RowIndex i = 0; i < t.step_memory.size(); ++i) {
    const auto& r = t.step_memory[i];
    if (usable(r)) b.add(r.global_rank, r.step, i);
  }
  in.ranks_seen = static_cast<std::int64_t>(b.slots.size());
  if (b.slots.empty()) return in;

  std::vector<std::size_t> order(b.slots.size());  // slots by ascending rank
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t x, std::size_t y) { return b.slots[x].rank < b.slots[y].rank; });
  if (b.consecutive) {
    align_ranges(t, b, order, window, in);
  } else {
    align_lists(t, b, order, window, in);
  }
  return in;
}

}  // namespace traceml::analysis::step_memory

namespace traceml::analysis {

bool is_step_memory_row(const model::StepMemoryRecord& r) {
  return step_memory::usable(r);
}

std::int64_t step_memory_history(std::int64_t window) {
  return step_memory::history_cap(window);
}

}  // namespace traceml::analysis
