// The ranks' profiles (model::ProfileChunk, protocol 6) into the run
// directory: each rank's chunks are written as they come, in order, to
// profiles/rank<R>_steps<A>-<B>.json (report/profile_trace), which gets its
// name at the profile's last chunk. A capture that failed gets its file too,
// without ops and with the reason, and so does a profile cut short (a chunk
// that never came, its rank gone before its last one), with the ops that
// came: the run directory says what happened to each.
//
// Bounded, for a peer that holds the run token: a rank has at most
// kMaxProfilesPerRank profiles, the run kMaxRunProfiles, of at most
// kMaxProfileFileBytes each and kMaxRunProfileBytes together; past those
// ops are counted cut and further profiles refused (counted invalid). An
// open profile holds no file descriptor between its chunks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "model/telemetry.hpp"
#include "report/profile_trace.hpp"

namespace traceml::collector {

inline constexpr std::int64_t kMaxProfilesPerRank = 8;
inline constexpr std::int64_t kMaxRunProfiles = 256;
inline constexpr std::int64_t kMaxProfileFileBytes = std::int64_t{256} << 20;
inline constexpr std::int64_t kMaxRunProfileBytes = std::int64_t{4} << 30;

class ProfileStore {
 public:
  explicit ProfileStore(std::string run_dir) : run_dir_(std::move(run_dir)) {}

  /// What a chunk did.
  struct Taken {
    /// Why it was refused (the collector counts it invalid): too many
    /// profiles, or a chunk of no open profile.
    std::optional<std::string> refused;
    /// The profile's file was written with ops: its steps ran under the
    /// profiler (the run keeps them as model::ProfiledSteps).
    std::optional<model::ProfiledSteps> profiled;
  };
  /// Takes a checked chunk of `c.global_rank`'s; `reason`, on a first
  /// chunk, says why the collector asked for the profile (`--profile auto`).
  /// I/O thread.
  Taken take(model::ProfileChunk&& c, const std::string& reason = {});
  /// Writes every profile still open with what it has and why it is cut
  /// short (its rank's connection ended before its last chunk); returns
  /// their steps that ran under the profiler. At the end of the collection.
  std::vector<model::ProfiledSteps> close_open();

 private:
  struct Open {
    std::int64_t next_chunk = 0;
    std::unique_ptr<report::ProfileTraceWriter> writer;
  };
  /// Ends rank `rank`'s open profile; with `error` when cut short.
  std::optional<model::ProfiledSteps> end(int rank, Open& o, std::int64_t ops_cut,
                                          const std::string& error);

  std::string run_dir_;
  std::mutex mu_;
  std::map<int, Open> open_;             // by rank: its profile being written
  std::map<int, std::int64_t> started_;  // by rank: profiles begun
  std::int64_t run_started_ = 0;
  std::int64_t run_bytes_ = 0;  ///< of the profiles ended
};

}  // namespace traceml::collector
