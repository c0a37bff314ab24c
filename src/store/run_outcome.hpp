// How the launched program ended, stored in the run database next to the
// telemetry so that the summary (and `traceml report RUN_DIR` later) can say
// which rank failed. Written by `traceml run` after the ranks ended.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/position.hpp"
#include "model/run_end_state.hpp"

namespace traceml::store {

struct RankExit {
  int global_rank = 0;
  int exit_code = 0;          ///< status, or 128 + signal
  std::optional<int> signal;  ///< the signal that killed it
  bool stopped_by_launcher = false;
  /// Where it was when it ended, from its black box (`traceml run`): the
  /// steps it completed, and the phase its training thread was in.
  std::optional<std::int64_t> steps_completed;
  std::optional<model::LoopPhase> phase;
  /// Its resident memory at its last process sample (bytes).
  std::optional<double> rss_bytes;
};

struct RunOutcome {
  /// How the run ended. Stored, and written in final_summary.json's `run`
  /// block, as its word (model/run_end_state.hpp); read back through the
  /// same table.
  model::RunStatus status = model::RunStatus::Completed;
  int exit_code = 0;  ///< what `traceml run` returned
  std::optional<int> failed_rank;
  std::vector<RankExit> ranks;  ///< this node's ranks
  /// Every time a rank was silent or stalled (collector::LiveBoard), in the
  /// order they began. Table `run_stalls`; a database without it has none.
  std::vector<model::Stall> stalls;
};

/// Stores `outcome` in the run database at `db_path` (replacing an earlier
/// one). Throws RunDbError.
void write_run_outcome(const std::string& db_path, const RunOutcome& outcome);
/// The stored outcome; std::nullopt when none was stored (a standalone run, an
/// import). Throws RunDbError when the file cannot be read, when the stored
/// status is no model::RunStatus word ("table run_outcome: ..."), or when a
/// stored stall holds a value no collector writes ("table run_stalls, row N: ...").
std::optional<RunOutcome> read_run_outcome(const std::string& db_path);

}  // namespace traceml::store
