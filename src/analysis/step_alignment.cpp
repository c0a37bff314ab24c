#include "analysis/step_alignment.hpp"

#include <algorithm>

namespace traceml::analysis {

namespace {

/// Keeps the steps of `common` that `rows[first..]` (sorted by step) also holds.
void intersect(std::vector<std::int64_t>& common, const std::vector<StepRow>& rows,
               std::size_t first) {
  std::size_t kept = 0;
  std::size_t j = first;
  for (std::size_t i = 0; i < common.size() && j < rows.size(); ++i) {
    while (j < rows.size() && rows[j].step < common[i])
      ++j;
    if (j < rows.size() && rows[j].step == common[i]) common[kept++] = common[i];
  }
  common.resize(kept);
}

}  // namespace

void sort_and_dedupe(std::vector<StepRow>& rows) {
  const auto by_step = [](const StepRow& a, const StepRow& b) { return a.step < b.step; };
  // Rows arrive mostly in step order: only the tail from the first step out of
  // order is sorted, then merged in. Both are stable, so the whole keeps
  // arrival order among equal steps, as one stable_sort would.
  const auto unsorted = std::is_sorted_until(rows.begin(), rows.end(), by_step);
  if (unsorted != rows.end()) {
    std::stable_sort(unsorted, rows.end(), by_step);
    std::inplace_merge(rows.begin(), unsorted, rows.end(), by_step);
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (kept > 0 && rows[kept - 1].step == rows[i].step) {
      rows[kept - 1] = rows[i];
    } else {
      rows[kept++] = rows[i];
    }
  }
  rows.resize(kept);
}

std::int64_t distinct_steps(const std::vector<std::vector<StepRow>>& ranks) {
  std::int64_t min_step = ranks.front().front().step;
  std::int64_t max_step = min_step;
  for (const auto& rows : ranks) {
    min_step = std::min(min_step, rows.front().step);
    max_step = std::max(max_step, rows.back().step);
  }
  // A mark per step id when the ids span a range not much larger than the
  // rows (the usual 1..N); otherwise sort them all.
  const std::uint64_t span =
      static_cast<std::uint64_t>(max_step) - static_cast<std::uint64_t>(min_step);
  std::size_t total = 0;
  for (const auto& rows : ranks)
    total += rows.size();
  if (span < 4 * static_cast<std::uint64_t>(total) + 1024) {
    std::vector<unsigned char> seen(static_cast<std::size_t>(span) + 1, 0);
    std::int64_t count = 0;
    for (const auto& rows : ranks) {
      for (const auto& r : rows) {
        auto& mark = seen[static_cast<std::size_t>(static_cast<std::uint64_t>(r.step) -
                                                   static_cast<std::uint64_t>(min_step))];
        count += mark == 0;
        mark = 1;
      }
    }
    return count;
  }
  std::vector<std::int64_t> all;
  all.reserve(total);
  for (const auto& rows : ranks) {
    for (const auto& r : rows)
      all.push_back(r.step);
  }
  std::sort(all.begin(), all.end());
  return static_cast<std::int64_t>(std::unique(all.begin(), all.end()) - all.begin());
}

std::size_t latest_start(std::size_t n, std::int64_t keep) {
  if (keep < 0 || static_cast<std::uint64_t>(n) <= static_cast<std::uint64_t>(keep)) return 0;
  return n - static_cast<std::size_t>(keep);
}

std::vector<std::int64_t> common_steps(const std::vector<std::vector<StepRow>>& ranks,
                                       const std::vector<std::size_t>& first,
                                       const std::vector<std::size_t>& order) {
  const auto& head = ranks[order.front()];
  std::vector<std::int64_t> common;
  common.reserve(head.size() - first[order.front()]);
  for (std::size_t j = first[order.front()]; j < head.size(); ++j)
    common.push_back(head[j].step);
  for (std::size_t k = 1; k < order.size() && !common.empty(); ++k)
    intersect(common, ranks[order[k]], first[order[k]]);
  return common;
}

void keep_latest(std::vector<std::int64_t>& steps, std::size_t n) {
  if (steps.size() > n) steps.erase(steps.begin(), steps.end() - static_cast<std::ptrdiff_t>(n));
}

}  // namespace traceml::analysis
