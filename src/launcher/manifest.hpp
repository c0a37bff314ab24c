// manifest.json of a run directory: what was run, by whom, how each rank
// ended, and how much telemetry arrived. Written by `traceml run` on node 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collector/collector.hpp"
#include "launcher/launch.hpp"
#include "report/summary_json.hpp"

namespace traceml::launcher {

struct ManifestInput {
  std::string run_name;
  std::vector<std::string> command;
  LaunchPlan plan;
  double started_at = 0.0;  ///< unix seconds
  double ended_at = 0.0;
  LaunchOutcome outcome;
  std::string status;  ///< completed | failed | interrupted
  collector::CollectionReport collection;
  /// Records the ranks dropped (their own count, from the summary's tracer
  /// block); absent when no summary could be written.
  std::optional<std::int64_t> records_dropped;
  std::vector<std::string> artifacts;  ///< file names in the run directory
};

report::Json manifest_json(const ManifestInput& in);

}  // namespace traceml::launcher
