// The step-time window (spec §4.1.1–4.1.9): which steps of which ranks are
// compared, on which clock, and what each rank averaged. Pure arithmetic on
// the step records; the rules that read it live in step_time_rules.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/order_statistics.hpp"  // median_of, for the window's users
#include "model/telemetry.hpp"

namespace traceml::analysis {

/// The step-time metrics, in the order of spec §4.1.7. The first eight are the
/// "display" metrics that keep a per-step series.
enum class StepMetric : std::uint8_t {
  InputWait,
  H2D,
  Forward,
  Backward,
  OptimizerStep,
  StepTime,
  TracedStepTime,
  Residual,
  Compute,
  StepTimeCpu,
  StepTimeGpu,
  TracedStepTimeCpu,
  TracedStepTimeGpu,
  DataloaderFetch,
};
inline constexpr std::size_t kStepMetricCount = 14;
/// Internal name of a step metric ("input_wait", "residual_proxy", ...).
const char* step_metric_name(StepMetric m);

using MetricValues = std::array<std::optional<double>, kStepMetricCount>;

enum class Clock : std::uint8_t { Cpu, Gpu };
inline const char* clock_name(Clock c) {
  return c == Clock::Gpu ? "gpu" : "cpu";
}

/// What a rank's GPU activity records (model::StepGpuActivity) say over the
/// aligned window. Averages are over the aligned steps that carry activity
/// records (`steps`): a step without them is unknown, not a step without copies.
struct ActivityFacts {
  std::int64_t steps = 0;  ///< aligned steps with activity records (> 0)
  double collective_ms = 0.0;
  double h2d_bytes = 0.0;
  double h2d_copies = 0.0;
  double h2d_pageable_copies = 0.0;
  double h2d_pageable_bytes = 0.0;
  /// Pageable bytes over all H2D bytes of those steps; absent when no byte moved.
  std::optional<double> h2d_pageable_share;
  /// Mean over steps of 1 - busy_ms / (GPU input wait + GPU traced step),
  /// each step clamped to [0, 1]; absent when no such step has a GPU step time.
  std::optional<double> gpu_idle_fraction;
};

/// One rank's averages over the aligned window (spec §4.1.6).
struct RankFacts {
  int rank = 0;
  MetricValues avg;
  std::optional<ActivityFacts> activity;  ///< absent: no aligned step had activity records
  [[nodiscard]] const std::optional<double>& operator[](StepMetric m) const {
    return avg[static_cast<std::size_t>(m)];
  }
};

/// Statistics of one metric across the ranks that measured it (spec §4.1.7).
struct MetricStat {
  double median = 0.0;          ///< arithmetic median
  double worst = 0.0;           ///< maximum
  int worst_rank = 0;           ///< lowest rank attaining the maximum
  int representative_rank = 0;  ///< nearest to the median (ties: lower value, lower rank)
  double representative = 0.0;
  std::optional<double> skew;  ///< (worst - median) / median, a fraction
  std::size_t ranks = 0;       ///< measured ranks
};

struct StepWindow {
  model::Strategy strategy = model::Strategy::Ddp;
  /// Ranks the window should hear from (spec §4.1.13): every rank with step
  /// rows and, once some rank has them, every rank the run declared (a `rank`
  /// record, or 0..world_size-1) — a declared rank that sent no step leaves
  /// the window incomplete instead of unseen.
  std::size_t expected_ranks = 0;
  std::size_t ranks_present = 0;    ///< ranks with rows
  std::vector<std::int64_t> steps;  ///< aligned step ids, ascending
  Clock clock = Clock::Cpu;
  std::vector<RankFacts> facts;  ///< ranks with facts, ascending (empty if no aligned step)
  std::array<std::optional<MetricStat>, kStepMetricCount> stats;
  std::optional<std::int64_t> latest_step;  ///< max step over every row
  std::int64_t distinct_steps = 0;          ///< distinct step ids seen over every row
  /// Aligned steps left out because a rank ran them under LibTorch's
  /// profiler (model::ProfiledSteps), before the latest `window` was taken.
  std::int64_t profiled_left_out = 0;

  /// The row used for each aligned step and rank with facts, step-major
  /// (records arrive step by step, so scans in this order read memory in order).
  std::vector<model::StepView> table;
  [[nodiscard]] const model::StepView& row(std::size_t step, std::size_t rank) const {
    return table[step * facts.size() + rank];
  }
  /// Per rank with facts, which events it reports on the selected clock (§4.1.4).
  std::vector<std::array<bool, model::kEventCount>> availability;

  [[nodiscard]] const std::optional<MetricStat>& stat(StepMetric m) const {
    return stats[static_cast<std::size_t>(m)];
  }
  [[nodiscard]] std::int64_t steps_used() const { return std::int64_t(steps.size()); }
  [[nodiscard]] bool single_rank() const { return expected_ranks <= 1 || ranks_present <= 1; }
};

/// Builds the window from step records: latest `window` distinct steps per
/// rank, later duplicates replacing earlier ones, aligned on the common steps.
StepWindow build_step_window(const model::Telemetry& t, std::int64_t window);

/// Per-step series of a display metric across ranks, on the window's clock:
/// the median (single_rank: the worst) value at each aligned step, null as 0.
std::vector<double> step_series(const StepWindow& w, StepMetric m, bool worst);

/// One rank's value of a display metric at each aligned step, on the
/// window's clock, null as 0; `rank_index` indexes `facts`.
std::vector<double> rank_step_series(const StepWindow& w, std::size_t rank_index, StepMetric m);

/// Per-step series of the step time (input wait + traced step) on each clock
/// (indexed by Clock), whatever the window's clock, in one pass over the
/// window: at each aligned step the median over the ranks whose average step
/// time on that clock exists (StepTimeCpu / StepTimeGpu); a single rank its
/// own values. Empty for a clock no rank measured. On the window's clock it is
/// step_series(w, StepTime, ...) (those ranks measured both events on every
/// aligned row).
std::array<std::vector<double>, 2> clock_step_series(const StepWindow& w);

/// Spec §4.1.7 statistics of (rank, value) pairs in ascending rank order;
/// nullopt when there are none. Used for the added per-rank metrics too.
std::optional<MetricStat> stat_of(const std::vector<std::pair<int, double>>& vals);

}  // namespace traceml::analysis
