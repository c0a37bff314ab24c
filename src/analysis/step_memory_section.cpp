// Step Memory (spec §4.4, §5.3, §5.4, §5.6): per-step allocator peaks of every
// rank, aligned on the steps all ranks reported, diagnosed for device
// pressure, cross-rank imbalance and creep.
#include "analysis/step_memory_section.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/neutral_issue.hpp"
#include "analysis/number_format.hpp"
#include "analysis/order_statistics.hpp"
#include "analysis/rank_identity.hpp"
#include "analysis/step_alignment.hpp"
#include "analysis/thresholds.hpp"
#include "analysis/trend.hpp"

namespace traceml::analysis {

namespace {

namespace th = thresholds;
using K = DiagnosisKind;

// Each rank keeps this many windows of its latest steps before the ranks are
// intersected: enough history to still find W common steps when one rank
// lags, and bounded whatever the run length.
constexpr std::int64_t kRankHistoryWindows = 20;

// TraceML's confidence in each verdict. Not thresholds: nothing compares
// against them; a neutral state serializes its value as evidence.
constexpr double kConfidencePressureCrit = 0.90;
constexpr double kConfidencePressureWarn = 0.80;
constexpr double kConfidenceImbalanceCrit = 0.85;
constexpr double kConfidenceImbalanceWarn = 0.75;
constexpr double kConfidenceCreepConfirmed = 0.88;
constexpr double kConfidenceCreepEarly = 0.60;
constexpr double kConfidenceNoGpu = 1.0;
constexpr double kConfidenceNoData = 0.0;
constexpr double kConfidenceBalanced = 0.75;

const char* const kAllocated = "peak_allocated";
const char* const kReserved = "peak_reserved";

/// Index of a row in Telemetry::step_memory.
using RowIndex = std::size_t;

/// The rows of one rank, ascending. Rows usually arrive step-major (every
/// rank once per step), so a rank's rows are evenly spaced: such a list is
/// kept as its first row and stride and only stored once the spacing breaks.
/// On millions of rows this saves the memory and its page faults, which cost
/// more than the analysis itself.
class RowList {
 public:
  void push_back(RowIndex row) {
    if (stored_) {
      rows_.push_back(row);
      return;
    }
    if (size_ == 1) {
      stride_ = row - first_;
    } else if (size_ == 0) {
      first_ = row;
    } else if (row != first_ + size_ * stride_) {
      store();
      rows_.push_back(row);
      return;
    }
    ++size_;
  }

  /// Replaces the list with `rows`.
  void assign(std::vector<RowIndex> rows) {
    rows_ = std::move(rows);
    stored_ = true;
  }

  [[nodiscard]] bool stored() const { return stored_; }
  /// The spacing of the rows while not stored.
  [[nodiscard]] RowIndex stride() const { return stride_; }
  [[nodiscard]] std::size_t size() const { return stored_ ? rows_.size() : size_; }
  [[nodiscard]] RowIndex operator[](std::size_t i) const {
    return stored_ ? rows_[i] : first_ + i * stride_;
  }

 private:
  void store() {
    rows_.reserve(2 * size_);
    for (std::size_t i = 0; i < size_; ++i)
      rows_.push_back(first_ + i * stride_);
    stored_ = true;
  }

  bool stored_ = false;
  RowIndex first_ = 0;
  RowIndex stride_ = 0;
  std::size_t size_ = 0;  ///< while not stored
  std::vector<RowIndex> rows_;
};

/// The steps every rank reported, and where each rank's peaks on them are.
struct AlignedWindow {
  std::vector<int> ranks;           ///< ascending
  std::vector<std::int64_t> steps;  ///< ascending
  /// Per rank (parallel to `ranks`): rows[r][first[r] + i] is the row holding
  /// steps[i]. Rows are referenced rather than copied: on millions of rows the
  /// copies (and the fresh pages they need) would cost more than the analysis.
  std::vector<RowList> rows;
  std::vector<std::size_t> first;

  [[nodiscard]] RowIndex row(std::size_t rank_index, std::size_t step_index) const {
    return rows[rank_index][first[rank_index] + step_index];
  }
};

struct Inputs {
  std::int64_t ranks_seen = 0;
  std::int64_t steps_seen = 0;  ///< distinct step ids (DECISIONS.md quirk 4)
  std::optional<std::int64_t> latest_step;
  AlignedWindow window;
};

/// Creep evidence of one metric (only when both series have a trend).
struct Creep {
  TrendEvidence worst;
  TrendEvidence median;
  double delta = 0.0;  ///< recent - baseline of the worst series, bytes
  bool early = false;
  bool confirmed = false;
  double score = 0.0;
};

/// One metric over the aligned window.
struct MetricSeries {
  std::vector<double> rank_peaks;  ///< max over the window, parallel to window.ranks
  std::vector<double> worst;       ///< per step: the maximum over the ranks
  std::vector<double> median;      ///< per step: the median over the ranks
};

/// Everything the rules read about one metric.
struct MetricSignals {
  std::string name;  ///< "peak_allocated" | "peak_reserved"
  std::int64_t steps_used = 0;
  std::vector<double> rank_peaks;  ///< max over the window, parallel to window.ranks
  int worst_rank = 0;
  double worst_peak = 0.0;
  double median_peak = 0.0;
  double skew = 0.0;               ///< (worst - median) / median, a fraction
  std::optional<double> pressure;  ///< worst_peak / device total
  std::optional<Creep> creep;
};

/// The per-step medians of one metric over every rank. Consecutive steps have
/// nearly the same spread of values, so the values ranked just below and above
/// the last median bracket the next one: a single pass counts the values below
/// the bracket and keeps those inside it, and only those few are selected
/// from. When the median falls outside the bracket the step is selected from
/// in full. Either way the result is exactly the median of all the values
/// (peaks are never NaN: the reader rejects non-finite amounts).
class StepMedians {
 public:
  /// The median of v (reordered).
  double operator()(std::vector<double>& v) {
    const std::size_t n = v.size();
    const std::size_t upper = n / 2;  // sorted position of the upper middle
    const std::size_t lower = n % 2 ? upper : upper - 1;
    if (n < kMinBracketed) return select_median(v.begin(), n, 0, n);
    if (bracket_) {
      inside_.resize(n);
      std::size_t below = 0;
      std::size_t kept = 0;
      for (const double x : v) {
        below += x < lo_;
        inside_[kept] = x;
        // `&`, not `&&`: a branch here mispredicts on every other value.
        kept += static_cast<std::size_t>((lo_ <= x) & (x <= hi_));
      }
      // Sorted, the values below the bracket come first, then those inside it:
      // positions [below, below + kept) of the whole are the bracket's.
      if (below <= lower && upper < below + kept) return select(inside_.begin(), kept, below, n);
    }
    return select(v.begin(), n, 0, n);
  }

 private:
  // Below this many ranks a plain selection costs next to nothing.
  static constexpr std::size_t kMinBracketed = 64;

  /// select_median, then the bracket for the next step: the values about
  /// n / 8 ranks either side of the median (or the extremes of `v`).
  double select(std::vector<double>::iterator v, std::size_t count, std::size_t first,
                std::size_t total) {
    const double median = select_median(v, count, first, total);
    const std::size_t mid = total / 2 - first;  // the upper middle, now in place
    const auto at = v + static_cast<std::ptrdiff_t>(mid);
    const auto end = v + static_cast<std::ptrdiff_t>(count);
    const std::size_t reach = total / 8 + 4;
    if (mid >= reach) {
      std::nth_element(v, at - static_cast<std::ptrdiff_t>(reach), at);
      lo_ = *(at - static_cast<std::ptrdiff_t>(reach));
    } else {
      lo_ = mid > 0 ? *std::min_element(v, at) : *at;
    }
    if (count - 1 - mid >= reach) {
      std::nth_element(at + 1, at + static_cast<std::ptrdiff_t>(reach), end);
      hi_ = *(at + static_cast<std::ptrdiff_t>(reach));
    } else {
      hi_ = mid + 1 < count ? *std::max_element(at + 1, end) : *at;
    }
    bracket_ = true;
    return median;
  }

  bool bracket_ = false;
  double lo_ = 0.0;
  double hi_ = 0.0;
  std::vector<double> inside_;
};

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
void align_ranges(RankRows& b, const std::vector<std::size_t>& order, std::int64_t window,
                  Inputs& in) {
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
  in.latest_step = covered;  // the highest last step

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
  in.steps_seen = distinct_steps(by_slot);
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
    align_ranges(b, order, window, in);
  } else {
    align_lists(t, b, order, window, in);
  }
  return in;
}

/// Per-rank maxima and the per-step worst and median of both peaks over the
/// aligned window, in one walk over the steps; row_at(r, i) is the row of
/// rank index r at step index i.
template <typename RowAt>
void walk_window(const model::Telemetry& t, const AlignedWindow& w, const RowAt& row_at,
                 MetricSeries& allocated, MetricSeries& reserved) {
  const std::size_t n_ranks = w.ranks.size();
  const std::size_t n_steps = w.steps.size();
  std::vector<double> col_allocated(n_ranks), col_reserved(n_ranks);
  for (MetricSeries* m : {&allocated, &reserved}) {
    m->rank_peaks.assign(n_ranks, -std::numeric_limits<double>::infinity());
    m->worst.reserve(n_steps);
    m->median.reserve(n_steps);
  }
  StepMedians allocated_median, reserved_median;
  for (std::size_t i = 0; i < n_steps; ++i) {
    // The step's worst, folded in rank order like max_element (the first of
    // equal values stays), while the rows are read.
    const auto& head = t.step_memory[row_at(0, i)];
    double worst_allocated = *head.peak_allocated_bytes;
    double worst_reserved = *head.peak_reserved_bytes;
    for (std::size_t r = 0; r < n_ranks; ++r) {
      const auto& row = t.step_memory[row_at(r, i)];
      const double a = *row.peak_allocated_bytes;
      const double v = *row.peak_reserved_bytes;
      col_allocated[r] = a;
      col_reserved[r] = v;
      worst_allocated = std::max(worst_allocated, a);
      worst_reserved = std::max(worst_reserved, v);
      allocated.rank_peaks[r] = std::max(allocated.rank_peaks[r], a);
      reserved.rank_peaks[r] = std::max(reserved.rank_peaks[r], v);
    }
    allocated.worst.push_back(worst_allocated);
    reserved.worst.push_back(worst_reserved);
    allocated.median.push_back(allocated_median(col_allocated));
    reserved.median.push_back(reserved_median(col_reserved));
  }
}

void aligned_series(const model::Telemetry& t, const AlignedWindow& w, MetricSeries& allocated,
                    MetricSeries& reserved) {
  const bool even =
      std::none_of(w.rows.begin(), w.rows.end(), [](const RowList& rows) { return rows.stored(); });
  if (!even) {
    const auto row_at = [&](std::size_t r, std::size_t i) { return w.row(r, i); };
    walk_window(t, w, row_at, allocated, reserved);
    return;
  }
  // Every rank's rows evenly spaced (the usual case): plain arithmetic, which
  // keeps the walk as fast as reading the rows in order.
  std::vector<RowIndex> base, stride;
  for (std::size_t r = 0; r < w.ranks.size(); ++r) {
    base.push_back(w.row(r, 0));
    stride.push_back(w.rows[r].stride());
  }
  const auto row_at = [&](std::size_t r, std::size_t i) { return base[r] + i * stride[r]; };
  walk_window(t, w, row_at, allocated, reserved);
}

std::optional<Creep> assess_creep(const std::vector<double>& worst,
                                  const std::vector<double>& median) {
  TrendComputationConfig cfg;
  cfg.min_points = th::kCreepMinPoints;
  cfg.warmup_frac = th::kCreepWarmupFrac;
  const auto w = compute_trend(worst, cfg);
  const auto m = compute_trend(median, cfg);
  if (!w || !m) return std::nullopt;
  Creep c;
  c.worst = *w;
  c.median = *m;
  c.delta = w->recent_avg - w->baseline_avg;
  // Both the worst rank and the typical rank must rise band over band: a
  // one-off spike in the recent band, or a dip after a high start, is not creep.
  const bool direction_ok = w->recent_avg > w->mid_avg && m->recent_avg > m->mid_avg &&
                            w->mid_avg > w->baseline_avg && m->mid_avg > m->baseline_avg;
  c.early = direction_ok && c.delta > 0.0;
  c.confirmed = direction_ok && c.delta >= th::kCreepConfirmedDelta;
  c.score = std::max(0.0, c.delta) / th::kCreepScoreDeltaScale +
            std::max(0.0, w->pct.value_or(0.0)) * th::kCreepWorstGrowthWeight +
            std::max(0.0, m->pct.value_or(0.0)) * th::kCreepMedianGrowthWeight;
  return c;
}

MetricSignals assess_metric(const char* name, const AlignedWindow& w, MetricSeries series,
                            const std::optional<double>& gpu_total) {
  MetricSignals s;
  s.name = name;
  s.steps_used = static_cast<std::int64_t>(w.steps.size());
  s.rank_peaks = std::move(series.rank_peaks);
  // Strictly greater: the lowest rank keeps a tie (DECISIONS.md quirk 7).
  std::size_t worst = 0;
  for (std::size_t r = 1; r < s.rank_peaks.size(); ++r) {
    if (s.rank_peaks[r] > s.rank_peaks[worst]) worst = r;
  }
  s.worst_rank = w.ranks[worst];
  s.worst_peak = s.rank_peaks[worst];
  s.median_peak = median_of(s.rank_peaks);
  s.skew = s.median_peak > 0.0 ? (s.worst_peak - s.median_peak) / s.median_peak : 0.0;
  if (gpu_total) s.pressure = s.worst_peak / *gpu_total;
  if (s.steps_used >= th::kStepMemoryMinSteps) s.creep = assess_creep(series.worst, series.median);
  return s;
}

std::string label_of(const std::string& metric) {
  std::string label = metric;
  std::replace(label.begin(), label.end(), '_', ' ');
  return label;
}

std::string percent0(double fraction) {
  return fixed(fraction * 100.0, 0);
}

std::string creep_note(const Creep& c) {
  std::string note = "baseline " + fixed(c.worst.baseline_avg, 0) + " B -> recent " +
                     fixed(c.worst.recent_avg, 0) + " B";
  note += std::string(", ") + (c.delta >= 0.0 ? "+" : "-") + fixed(std::fabs(c.delta), 0) + " B";
  if (c.worst.pct) note += ", (~" + percent0(*c.worst.pct) + "%)";
  return note;
}

Issue metric_issue(const MetricSignals& s, K kind, Severity sev, std::string summary,
                   const char* action, double score, Json evidence) {
  Issue i;
  i.set_kind(kind);
  i.severity = sev;
  i.summary = std::move(summary);
  i.action = action;
  i.metric = s.name;
  i.phase = "memory";
  i.score = score;
  i.skew_pct = s.skew;
  i.ranks = {s.worst_rank};
  i.evidence = std::move(evidence);
  return i;
}

Json creep_evidence(const Creep& c) {
  Json e = Json::object();
  e["overall_abs_delta_bytes"] = c.delta;
  e["overall_worst_growth_pct"] = c.worst.pct ? Json(*c.worst.pct) : Json();
  e["overall_median_growth_pct"] = c.median.pct ? Json(*c.median.pct) : Json();
  e["note"] = creep_note(c);
  return e;
}

/// The rules of spec §4.4 for one metric, in table order.
std::vector<Issue> run_rules(const MetricSignals& s) {
  std::vector<Issue> out;
  if (s.steps_used < th::kStepMemoryMinSteps) return out;
  const std::string label = label_of(s.name);

  if (s.pressure && *s.pressure >= th::kMemoryPressureWarn) {
    const double p = *s.pressure;
    out.push_back(metric_issue(s, K::HighPressure,
                               p >= th::kMemoryPressureCrit ? Severity::Crit : Severity::Warn,
                               label + " is near device capacity (~" + percent0(p) + "%).",
                               "Reduce memory load.", p, Json{{"pressure_frac", p}}));
  }

  // Skew only matters once the worst rank is a real share of the device: a
  // large relative gap between two small footprints cannot cause an OOM.
  if (s.pressure) {
    const double p = *s.pressure;
    std::optional<Severity> sev;
    if (s.skew >= th::kMemoryImbalanceSkewCrit && p >= th::kMemoryImbalancePressureCrit) {
      sev = Severity::Crit;
    } else if (s.skew >= th::kMemoryImbalanceSkewWarn && p >= th::kMemoryImbalancePressureWarn) {
      sev = Severity::Warn;
    }
    if (sev) {
      out.push_back(metric_issue(
          s, K::Imbalance, *sev,
          label + " shows +" + fixed(s.skew * 100.0, 1) + "% cross-rank skew at ~" + percent0(p) +
              "% of device capacity.",
          "Inspect per-rank workload.", s.skew, Json{{"skew_pct", s.skew}, {"pressure_frac", p}}));
    }
  }

  if (s.creep && s.creep->confirmed) {
    out.push_back(metric_issue(
        s, K::CreepConfirmed, Severity::Warn, label + " is rising across the window.",
        "Check retained tensors or caches.", s.creep->score, creep_evidence(*s.creep)));
  } else if (s.creep && s.creep->early) {
    out.push_back(metric_issue(s, K::CreepEarly, Severity::Info,
                               label + " is rising from early to recent steps.",
                               "Watch the next window.", s.creep->score, creep_evidence(*s.creep)));
  }
  return out;
}

int rule_priority(const Issue& issue) {
  if (issue.is(K::HighPressure)) return 0;
  if (issue.is(K::Imbalance)) return 1;
  if (issue.is(K::CreepConfirmed)) return 2;
  return 3;  // CREEP_EARLY
}

/// (priority, -severity, -score, metric name), stable.
void sort_issues(std::vector<Issue>& issues) {
  std::stable_sort(issues.begin(), issues.end(), [](const Issue& a, const Issue& b) {
    const int pa = rule_priority(a), pb = rule_priority(b);
    if (pa != pb) return pa < pb;
    if (a.severity != b.severity) return severity_rank(a.severity) > severity_rank(b.severity);
    const double sa = a.score.value_or(0.0), sb = b.score.value_or(0.0);
    if (sa != sb) return sa > sb;
    return a.metric.value_or("") < b.metric.value_or("");
  });
}

const MetricSignals* find_metric(const std::vector<MetricSignals>& metrics,
                                 const std::string& name) {
  for (const auto& m : metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

StepMemoryPrimary primary_from_issue(const Issue& issue, const MetricSignals& m) {
  StepMemoryPrimary p;
  p.kind = kind_from_name(issue.kind).value_or(K::NoData);  // the rules' kinds are all known
  p.severity = issue.severity;
  p.reason = issue.summary;
  p.action = issue.action;
  p.metric = m.name;
  p.steps_used = m.steps_used;
  p.worst_rank = m.worst_rank;
  const bool crit = issue.severity == Severity::Crit;
  if (p.kind == K::HighPressure) {
    p.confidence = crit ? kConfidencePressureCrit : kConfidencePressureWarn;
  } else if (p.kind == K::Imbalance) {
    p.confidence = crit ? kConfidenceImbalanceCrit : kConfidenceImbalanceWarn;
  } else if (p.kind == K::CreepConfirmed) {
    p.confidence = kConfidenceCreepConfirmed;
  } else {
    p.confidence = kConfidenceCreepEarly;
  }
  const auto note = issue.evidence.find("note");
  if (note != issue.evidence.end() && note->is_string()) p.note = note->get<std::string>();
  return p;
}

StepMemoryPrimary neutral(K kind, std::string reason, const char* action, std::string metric,
                          double confidence) {
  StepMemoryPrimary p;
  p.kind = kind;
  p.reason = std::move(reason);
  p.action = action;
  p.metric = std::move(metric);
  p.confidence = confidence;
  return p;
}

/// Spec §4.4: the first issue, else the neutral state the data allow.
StepMemoryPrimary choose_primary(bool no_gpu, const std::vector<MetricSignals>& metrics,
                                 const std::vector<Issue>& issues) {
  if (no_gpu) {
    return neutral(K::NoGpu, "No GPU detected. Step memory uses torch-based GPU memory telemetry.",
                   "Step memory is not applicable for this run.", kReserved, kConfidenceNoGpu);
  }
  if (metrics.empty()) {
    return neutral(K::NoData, "No step-memory data yet.", "Wait for more completed steps.",
                   kReserved, kConfidenceNoData);
  }
  if (!issues.empty()) {
    return primary_from_issue(issues.front(), *find_metric(metrics, *issues.front().metric));
  }
  const bool ready = std::any_of(metrics.begin(), metrics.end(), [](const MetricSignals& m) {
    return m.steps_used >= th::kStepMemoryMinSteps;
  });
  if (!ready) {
    // The metric with the most steps; the first (allocated) keeps a tie.
    const MetricSignals* best = &metrics.front();
    for (const auto& m : metrics) {
      if (m.steps_used > best->steps_used) best = &m;
    }
    auto p = neutral(
        K::NoData, "Need at least " + std::to_string(th::kStepMemoryMinSteps) + " completed steps.",
        "Keep monitoring.", best->name, kConfidenceNoData);
    p.steps_used = best->steps_used;
    p.worst_rank = best->worst_rank;
    return p;
  }
  const MetricSignals* m = find_metric(metrics, kReserved);
  if (!m) m = find_metric(metrics, kAllocated);
  auto p = neutral(K::Balanced, "No clear pressure, imbalance, or creep signal.",
                   "Keep monitoring.", m->name, kConfidenceBalanced);
  p.steps_used = m->steps_used;
  p.worst_rank = m->worst_rank;
  return p;
}

/// Spec §4.0: a neutral primary as issues[0].
Issue issue_from_primary(const StepMemoryPrimary& p) {
  Json fields = Json::object();
  fields["steps_used"] = p.steps_used;
  fields["worst_rank"] = p.worst_rank ? Json(*p.worst_rank) : Json();
  fields["note"] = p.note ? Json(*p.note) : Json();
  fields["confidence"] = p.confidence;
  Issue i = neutral_issue(p.kind, p.reason, p.action, fields);
  i.severity = p.severity;
  i.metric = p.metric;
  if (p.worst_rank) i.ranks = {*p.worst_rank};
  return i;
}

std::string build_card(const Inputs& in, const std::vector<MetricSignals>& metrics,
                       const Issue& diagnosis) {
  std::vector<std::string> lines;
  lines.push_back("TraceML Step Memory Summary | steps " + std::to_string(in.steps_seen) +
                  " | global ranks " + std::to_string(in.ranks_seen));
  lines.emplace_back("Step Memory");
  lines.push_back("- Diagnosis: " + diagnosis.status);
  if (metrics.empty()) {
    lines.push_back("- Scope: latest step " +
                    (in.latest_step ? std::to_string(*in.latest_step) : std::string("n/a")));
    lines.emplace_back("- Stats: n/a");
  } else {
    const MetricSignals* m = diagnosis.metric ? find_metric(metrics, *diagnosis.metric) : nullptr;
    if (!m) m = find_metric(metrics, kReserved);
    if (!m) m = find_metric(metrics, kAllocated);
    if (!m) m = &metrics.front();
    const std::string label = label_of(m->name);
    lines.push_back("- Scope: last " + std::to_string(m->steps_used) + " aligned steps");
    if (in.window.ranks.size() == 1) {
      lines.push_back("- Stats: " + label + " peak " + format_bytes_binary(m->worst_peak));
    } else {
      lines.push_back("- Stats: " + label + " worst " + format_bytes_binary(m->worst_peak) +
                      " on r" + std::to_string(m->worst_rank) + " | skew " +
                      fixed(m->skew * 100.0, 1) + "%");
    }
  }
  lines.push_back("- Why: " + diagnosis.summary);
  std::string card;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) card += '\n';
    card += lines[i];
  }
  return card;
}

struct GpuPresence {
  /// MAX(process gpu total) when positive: a zero total means "not reported".
  std::optional<double> total_bytes;
  /// True only when GPU presence was observed somewhere and never seen: a run
  /// without process or system samples is not known to lack a GPU.
  bool none = false;
};

GpuPresence gpu_presence(const model::Telemetry& t) {
  std::optional<double> total;
  bool gpu = false;
  for (const auto& p : t.process) {
    if (!p.gpu) continue;
    gpu = true;
    if (p.gpu->total_bytes && (!total || *p.gpu->total_bytes > *total)) {
      total = *p.gpu->total_bytes;
    }
  }
  for (const auto& s : t.system) {
    if (gpu) break;
    gpu = !s.gpus.empty();
  }
  GpuPresence out;
  if (total && *total > 0.0) out.total_bytes = total;
  out.none = (!t.process.empty() || !t.system.empty()) && !gpu;
  return out;
}

/// average / median / worst over the rank rows (spec §5.4): median is the row
/// nearest the statistical median (ties: lower value, then lower rank); worst
/// is the maximum (ties: lower rank). Rows are in ascending rank order, so
/// keeping the first of equals is the lower rank.
void fill_statistics(Section& s) {
  for (std::size_t m = 0; m < s.metric_names.size(); ++m) {
    std::vector<std::pair<double, const std::string*>> values;
    for (const auto& row : s.rows) {
      if (row.metrics[m]) values.emplace_back(*row.metrics[m], &row.key);
    }
    if (values.empty()) {
      s.average.emplace_back(std::nullopt);
      s.median.push_back(Point{});
      s.worst.push_back(Point{});
      continue;
    }
    double sum = 0.0;
    std::vector<double> plain;
    for (const auto& v : values) {
      sum += v.first;
      plain.push_back(v.first);
    }
    s.average.emplace_back(sum / static_cast<double>(values.size()));
    const double target = median_of(plain);
    const auto* med = &values.front();
    const auto* worst = &values.front();
    for (const auto& v : values) {
      const double d = std::fabs(v.first - target);
      const double best = std::fabs(med->first - target);
      if (d < best || (d == best && v.first < med->first)) med = &v;
      if (v.first > worst->first) worst = &v;
    }
    s.median.push_back(Point{med->first, *med->second});
    s.worst.push_back(Point{worst->first, *worst->second});
  }
}

}  // namespace

StepMemoryAnalysis step_memory_analysis(const model::Telemetry& t, const Options& o) {
  const std::int64_t window = std::max<std::int64_t>(1, o.window);
  const Inputs in = load_inputs(t, window);
  const AlignedWindow& w = in.window;
  const GpuPresence gpu = gpu_presence(t);
  const auto& gpu_total = gpu.total_bytes;
  const bool no_gpu = gpu.none;

  std::vector<MetricSignals> metrics;
  if (!w.steps.empty()) {
    MetricSeries allocated, reserved;
    aligned_series(t, w, allocated, reserved);
    metrics.push_back(assess_metric(kAllocated, w, std::move(allocated), gpu_total));
    metrics.push_back(assess_metric(kReserved, w, std::move(reserved), gpu_total));
  }

  // Without a GPU the peaks are not device memory, so no rule may read them.
  std::vector<Issue> issues;
  if (!no_gpu) {
    for (const auto& m : metrics) {
      auto fired = run_rules(m);
      issues.insert(issues.end(), fired.begin(), fired.end());
    }
    sort_issues(issues);
  }

  StepMemoryAnalysis out;
  out.primary = choose_primary(no_gpu, metrics, issues);
  if (issues.empty()) issues.push_back(issue_from_primary(out.primary));

  Section& s = out.section;
  s.name = "step_memory";
  s.index_by = "global_rank";
  s.metric_names = {"peak_allocated_bytes", "peak_reserved_bytes"};
  s.units = {{"memory", "bytes"}};

  // JSON rows carry each rank's maximum per-step peak over the window
  // (DECISIONS.md quirk 9; TraceML publishes the mean), the same number the
  // rules read, so that the JSON and the diagnosis agree.
  for (std::size_t r = 0; r < w.ranks.size(); ++r) {
    GroupRow row;
    row.key = std::to_string(w.ranks[r]);
    row.identity = identity_of(t, w.ranks[r]);
    row.metrics = {metrics[0].rank_peaks[r], metrics[1].rank_peaks[r]};
    s.rows.push_back(std::move(row));
  }
  fill_statistics(s);

  Metadata& md = s.metadata;
  std::vector<Identity> identities;
  for (const auto& row : s.rows) {
    identities.push_back(row.identity);
  }
  md.mode = metrics.empty() ? "no_data" : mode_of(identities);
  md.global_ranks_seen = in.ranks_seen;
  md.global_ranks_used = static_cast<std::int64_t>(w.ranks.size());
  md.training_total_steps = in.steps_seen;
  md.training_latest_step = in.latest_step;

  s.window.kind = "step_window";
  s.window.alignment = "common_steps";
  s.window.steps_analyzed = static_cast<std::int64_t>(w.steps.size());
  if (!w.steps.empty()) {
    s.window.end_step = w.steps.back();
    s.window.completed_step = w.steps.back();
    s.window.window_size = window;
  }

  s.issues = std::move(issues);
  s.card = build_card(in, metrics, s.issues.front());
  return out;
}

Section analyze_step_memory(const model::Telemetry& t, const Options& o) {
  return step_memory_analysis(t, o).section;
}

}  // namespace traceml::analysis
