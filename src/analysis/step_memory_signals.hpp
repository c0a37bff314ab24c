// Step Memory's signals (spec §4.4): per metric over the aligned window, each
// rank's peak, the worst rank and the median, their skew, the device pressure
// and the creep evidence — everything the rules read. Private to the analysis
// module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/step_memory_alignment.hpp"
#include "analysis/trend.hpp"
#include "model/telemetry.hpp"

namespace traceml::analysis::step_memory {

inline constexpr const char* kAllocated = "peak_allocated";
inline constexpr const char* kReserved = "peak_reserved";

/// Creep evidence of one metric (only when both series have a trend).
struct Creep {
  TrendEvidence worst;
  TrendEvidence median;
  double delta = 0.0;  ///< recent - baseline of the worst series, bytes
  bool early = false;
  bool confirmed = false;
  double score = 0.0;
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

/// Both metrics (allocated, then reserved) over the aligned window `w`; none
/// when it holds no step. `gpu_total`: the device's memory, when known.
std::vector<MetricSignals> metric_signals(const model::Telemetry& t, const AlignedWindow& w,
                                          const std::optional<double>& gpu_total);

/// The metric named `name` among `metrics`, or nullptr.
const MetricSignals* find_metric(const std::vector<MetricSignals>& metrics,
                                 const std::string& name);

/// The metric's name in words ("peak allocated").
std::string label_of(const std::string& metric);

}  // namespace traceml::analysis::step_memory
