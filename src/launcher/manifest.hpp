// manifest.json of a run directory: what was run, by whom, how each rank
// ended, and how much telemetry arrived. Written by `traceml run` on node 0.
#pragma once

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
  std::vector<std::string> artifacts;  ///< file names in the run directory
};

report::Json manifest_json(const ManifestInput& in);

}  // namespace traceml::launcher
