// The slow window (issue 15, docs/timeline.md "The slow window"): the K
// consecutive aligned steps where one rank was slowest, so that a profiler
// run, or the timeline, can look at exactly those. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/section.hpp"
#include "analysis/step_window.hpp"

namespace traceml::analysis {

/// Steps in a slow window.
inline constexpr std::size_t kSlowWindowSteps = 20;
/// A slow window this much slower than its rank's median step (a fraction)
/// is worth a look: the text report's Next line then gives the command
/// that draws it. The JSON has the window whatever its margin.
inline constexpr double kSlowWindowNotable = 0.10;

/// The slowest run of `k` consecutive values of `per_step` (one a step):
/// where it starts, and its mean. std::nullopt with fewer than 2k values
/// (a window that is a large part of the run stands out from nothing).
/// Ties go to the earliest.
struct SlowestRun {
  std::size_t first = 0;  ///< index of its first value
  double mean = 0.0;
};
std::optional<SlowestRun> slowest_run(const std::vector<double>& per_step, std::size_t k);

/// The first steps of a run are slow for reasons nobody needs told (cold
/// caches, allocator growth, lazy initialisation): the slow window is looked
/// for after this share of the window's aligned steps, and the median it is
/// compared with is of the same steps.
inline constexpr double kSlowWindowWarmup = 0.10;

/// The slow window of a step-time section: on the rank the diagnosis names
/// (its first rank; a straggler), else the median rank of the step time; on
/// the window's clock, after the warm-up (kSlowWindowWarmup). The JSON object of
/// `step_time.global.slow_window`: rank, basis ("named_rank" | "median_rank"), clock, first_step,
/// last_step, steps, mean_step_ms, median_step_ms, slower_pct. std::nullopt
/// without a step time or with fewer than 2 × kSlowWindowSteps aligned steps
/// after the warm-up.
std::optional<Json> slow_window(const StepWindow& w, const Issue& diagnosis);

}  // namespace traceml::analysis
