// Step Time's diagnosis (spec §4.1.12–4.1.14): the neutral states before the
// rules (NO_DATA, WARMUP), the rules, the caps and order of their issues,
// BALANCED or INCOMPLETE_DATA when none fired, and the trend note on the
// primary. Private to the analysis module.
#pragma once

#include <map>
#include <vector>

#include "analysis/section.hpp"
#include "analysis/step_window.hpp"

namespace traceml::analysis::step_time {

/// Per-step series are one pass over every (rank, step) row of the window, so
/// the trend note and the spread share them instead of computing one twice.
class SeriesCache {
 public:
  explicit SeriesCache(const StepWindow& w) : w_(w) {}
  /// A series computed elsewhere (the same values get(m) would compute).
  void put(StepMetric m, std::vector<double> series) { cache_[m] = std::move(series); }
  /// The median series across ranks (a single rank: its own values).
  const std::vector<double>& get(StepMetric m) {
    auto it = cache_.find(m);
    if (it == cache_.end()) it = cache_.emplace(m, step_series(w_, m, w_.single_rank())).first;
    return it->second;
  }

 private:
  const StepWindow& w_;
  std::map<StepMetric, std::vector<double>> cache_;
};

/// The Step Time issues, the primary first; never empty.
std::vector<Issue> diagnose(const StepWindow& w, SeriesCache& series);

}  // namespace traceml::analysis::step_time
