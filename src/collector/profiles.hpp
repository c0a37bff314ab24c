// The ranks' profiles (model::ProfileChunk, protocol 6) into the run
// directory: each rank's chunks are written as they come, in order, to
// profiles/rank<R>_steps<A>-<B>.json (report/profile_trace), which gets its
// name at the profile's last chunk. A capture that failed gets its file too,
// without ops and with the reason: the run directory says what happened. Bounded: a rank has at
// most kMaxProfilesPerRank profiles of at most kMaxProfileFileBytes each; past those its ops are
// counted cut, its further profiles refused.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/telemetry.hpp"
#include "report/profile_trace.hpp"

namespace traceml::collector {

inline constexpr std::int64_t kMaxProfilesPerRank = 8;
inline constexpr std::int64_t kMaxProfileFileBytes = std::int64_t{256} << 20;

/// A profile as the run ends: written (with the capture's error, if it
/// failed), not written (a write error), or cut short (its rank's
/// connection ended before its last chunk).
struct ProfileOutcome {
  report::ProfileFileInfo file;
  bool written = false;  ///< the file is there (file.path)
};

class ProfileStore {
 public:
  explicit ProfileStore(std::string run_dir) : run_dir_(std::move(run_dir)) {}

  /// Takes a checked chunk of `c.global_rank`'s; returns why it cannot be
  /// taken (out of order, too many profiles), which the collector counts as
  /// an invalid record. I/O thread.
  std::optional<std::string> take(model::ProfileChunk&& c);
  /// Every profile so far, by rank then first step; one still open is
  /// given up as cut short (its partial file removed) when `close_open`.
  std::vector<ProfileOutcome> outcomes(bool close_open);

 private:
  struct Open {
    std::int64_t first = 0;
    std::int64_t last = 0;
    std::int64_t next_chunk = 0;
    std::unique_ptr<report::ProfileTraceWriter> writer;
  };
  std::string run_dir_;
  std::mutex mu_;
  std::map<int, Open> open_;             // by rank: its profile being written
  std::map<int, std::int64_t> started_;  // by rank: profiles begun
  std::vector<ProfileOutcome> done_;
};

}  // namespace traceml::collector
