// Merges the pieces of one job that were traced apart — the run directories
// that ranks started without a collector wrote each for themselves, or
// telemetry JSONL files — into one run directory with one run database, so
// that the job gets one diagnosis (`traceml report DIR... --out DIR`).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace traceml::collector {

/// The inputs are not pieces of one job, or cannot be read or written.
/// what() is one line that says which input and why.
class MergeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MergeResult {
  int ranks = 0;                      ///< global ranks in the merged run
  std::optional<int> world_size;      ///< the job's, when the pieces name it
  std::vector<std::string> warnings;  ///< from the JSONL readers
};

/// Reads every input (a run directory holding telemetry.db, or a telemetry
/// JSONL file), checks that they are pieces of one job, and writes
/// OUT/telemetry.db with all of them. Pieces of one job name the same world
/// size, hold different global ranks inside it, come from one program (their
/// run names without the timestamp and the _rank<N> suffix agree) and ran at
/// the same time (their time spans overlap). OUT must not hold a run
/// database; on any failure nothing is left of the new one. Throws MergeError.
MergeResult merge_runs(const std::vector<std::string>& inputs, const std::string& out_dir);

/// The name a run directory's pieces share: its name without a trailing
/// collision suffix (_2), _rank<N> and _YYYYmmdd_HHMMSS.
std::string run_name_stem(const std::string& name);

}  // namespace traceml::collector
