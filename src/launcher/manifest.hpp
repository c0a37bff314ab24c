// manifest.json of a run directory: what was run, by whom, how each rank
// ended, and how much telemetry arrived. Written by `traceml run` on node 0
// and by `traceml serve`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collector/collector.hpp"
#include "launcher/launch.hpp"
#include "model/run_end_state.hpp"
#include "report/summary_json.hpp"

namespace traceml::launcher {

struct ManifestInput {
  std::string run_name;
  std::vector<std::string> command;
  LaunchPlan plan;
  double started_at = 0.0;  ///< unix seconds
  double ended_at = 0.0;
  LaunchOutcome outcome;
  model::RunStatus status = model::RunStatus::Completed;  ///< never TimedOut
  collector::CollectionReport collection;
  /// Records the ranks dropped (their own count, from the summary's tracer
  /// block); absent when no summary could be written.
  std::optional<std::int64_t> records_dropped;
  std::vector<std::string> artifacts;  ///< file names in the run directory
};

report::Json manifest_json(const ManifestInput& in);

/// How a rank of a served run ended, as far as the collector can tell.
struct ServedRank {
  int global_rank = 0;
  model::RankEnding ended = model::RankEnding::NeverConnected;
  /// How its program ended, when its goodbye said (protocol 4): exit(3)'s
  /// status as its parent sees it. `{}`: a rank spelled with two values
  /// needs no third.
  std::optional<int> exit_status{};
};

/// manifest.json of a run hosted by `traceml serve`.
struct ServeManifestInput {
  std::string run_name;
  model::RunStatus status = model::RunStatus::Completed;
  int exit_code = 0;  ///< what `traceml serve` returned
  model::EndReason end_reason = model::EndReason::WorldEnded;
  double started_at = 0.0;  ///< unix seconds
  double ended_at = 0.0;
  std::optional<int> world_size;
  std::string listen;  ///< "host:port" the collector listened on
  std::vector<ServedRank> ranks;
  collector::CollectionReport collection;
  std::optional<std::int64_t> records_dropped;
  std::vector<std::string> artifacts;
};

report::Json serve_manifest_json(const ServeManifestInput& in);

}  // namespace traceml::launcher
