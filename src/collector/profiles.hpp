// The ranks' profiles (model::ProfileChunk, protocol 6) into the run
// directory: each rank's chunks are written as they come, in order, to
// profiles/rank<R>_steps<A>-<B>.json (report/profile_trace), which gets its
// name at the profile's last chunk. A capture that failed gets its file too,
// without ops and with the reason, and so does a profile cut short (a chunk
// that never came, its rank gone before its last one), with the ops that
// came, and so does a capture its rank said began (protocol 8) whose
// profile never came (the rank killed in the middle), without ops: the run
// directory says what happened to each.
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
  /// A rank's capture began (protocol 8, checked): its steps are kept as
  /// profiled from now (`profiled`), and its profile, when it comes, takes
  /// `reason` (why the collector asked for it). Counted against the bounds
  /// as the profile's first chunk would be (refused past them). I/O thread.
  Taken began(const model::ProfiledSteps& p, std::string reason = {});
  /// Writes every profile still open with what it has and why it is cut
  /// short (its rank's connection ended before its last chunk), and every
  /// capture that began and whose profile never came, as lost (unless its
  /// rank kept it beside itself in the run directory); returns the steps
  /// that ran under the profiler not yet returned. At the end of the
  /// collection.
  std::vector<model::ProfiledSteps> close_open();
  /// Why a capture that began has no profile at the end.
  static constexpr const char* kNeverCame =
      "its operators never came: the rank ended, or lost the collector, before it sent them";

 private:
  struct Open {
    std::int64_t next_chunk = 0;
    std::unique_ptr<report::ProfileTraceWriter> writer;
    /// Its steps up to this one were kept as profiled when it began (0: it
    /// was not said begun).
    std::int64_t announced_last = 0;
  };
  struct Began {
    model::ProfiledSteps steps;
    std::string reason;
  };
  /// Counts a new profile of `rank` against the bounds; why not, if it may not.
  std::optional<std::string> start(int rank);
  /// The room left for one more profile file.
  [[nodiscard]] std::int64_t room() const;
  /// Ends rank `rank`'s open profile; with `error` when cut short.
  std::optional<model::ProfiledSteps> end(int rank, Open& o, std::int64_t ops_cut,
                                          const std::string& error);

  std::string run_dir_;
  std::mutex mu_;
  std::map<int, Open> open_;             // by rank: its profile being written
  std::map<int, std::int64_t> started_;  // by rank: profiles begun
  /// By rank: the captures said begun (at most kMaxProfilesPerRank), oldest
  /// first, whose first chunk has not come.
  std::map<int, std::vector<Began>> began_;
  std::int64_t run_started_ = 0;
  std::int64_t run_bytes_ = 0;  ///< of the profiles ended
};

}  // namespace traceml::collector
