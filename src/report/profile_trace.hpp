// A rank's profile of some steps (LibTorch's operators, --profile-steps) as
// a Chrome trace file: profiles/rank<R>_steps<A>-<B>.json in the run
// directory, written op by op as its chunks arrive, under a hidden name
// until it is whole (docs/profiling.md has the layout).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/telemetry.hpp"

namespace traceml::report {

/// "rank<R>_steps<A>-<B>.json".
std::string profile_file_name(int rank, std::int64_t first, std::int64_t last);
/// "rank<R>_steps<A>-<B>.kineto.json": the profiler's own trace of the same
/// capture, kept beside its rank (ProfilerHooks::save).
std::string native_profile_file_name(int rank, std::int64_t first, std::int64_t last);

/// What one profile file holds (its metadata, "otherData.traceml").
struct ProfileFileInfo {
  int rank = 0;
  std::int64_t first_step = 1;
  std::int64_t last_step = 1;
  std::int64_t ops = 0;      ///< ops in the file
  std::int64_t ops_cut = 0;  ///< ops left out at a size limit (the rank's or the file's)
  std::string error;         ///< why the capture failed or is partial; empty: it did not
  /// Why the collector asked for it (`--profile auto`); empty: the user chose its steps.
  std::string reason;
  std::string path;  ///< relative to the run directory: "profiles/<name>"
  /// The profiler's own trace of the capture beside it, when its rank kept
  /// one there: "profiles/<name>.kineto.json"; empty: none.
  std::string native_path;
};

/// Writes one profile. Every op is drawn as a complete event ("ph":"X") on
/// its thread's track of the rank's process, at its unix time in
/// microseconds (the steps' clock: `traceml export`'s timeline draws them
/// under their steps), one event a line. Past `max_bytes` further ops are
/// counted cut. The ops added go to the file at flush() (a chunk's worth);
/// no descriptor is held in between.
class ProfileTraceWriter {
 public:
  /// Opens <run_dir>/profiles/.<name>.partial (creating profiles/). Throws
  /// WriteError (report/atomic_file.hpp) with a one-line reason.
  ProfileTraceWriter(const std::string& run_dir, int rank, std::int64_t first, std::int64_t last,
                     std::int64_t max_bytes, std::string reason = {});
  /// Removes the partial file when finish() did not run.
  ~ProfileTraceWriter();
  ProfileTraceWriter(const ProfileTraceWriter&) = delete;
  ProfileTraceWriter& operator=(const ProfileTraceWriter&) = delete;

  void add(const model::ProfileOp& op);
  /// Appends what was added since the last flush to the partial file.
  void flush();
  /// Writes the end (metadata with `ops_cut_by_rank` and `error`) and gives
  /// the file its name; unless `replace`, only when no file has that name
  /// yet (one its rank kept). Throws WriteError (the partial file is then
  /// removed with the writer).
  ProfileFileInfo finish(std::int64_t ops_cut_by_rank, const std::string& error,
                         bool replace = true);
  /// Bytes of the file so far, what is not flushed yet included.
  [[nodiscard]] std::int64_t bytes() const { return bytes_; }
  [[nodiscard]] const ProfileFileInfo& info() const { return info_; }

 private:
  std::string partial_;
  std::string final_;
  ProfileFileInfo info_;
  std::int64_t max_bytes_;
  std::int64_t bytes_ = 0;
  std::string buffer_;    ///< added, not yet in the file
  bool created_ = false;  ///< the partial file exists (removed with the writer)
  bool failed_ = false;
};

/// The profiles of a run directory, from each profiles/rank<R>_steps<A>-<B>.json's
/// metadata (read from its end: a file may be hundreds of MiB), by rank then
/// first step; a file whose end is not traceml's metadata is left out. At
/// most kMaxListedProfiles.
std::vector<ProfileFileInfo> read_profile_infos(const std::string& run_dir);
inline constexpr std::size_t kMaxListedProfiles = 256;

/// The ops of a profile file as ProfileTraceWriter wrote it (one event a
/// line: read line by line, so a file of hundreds of MiB costs its ops, not
/// a JSON tree), at most `max_ops` of them; lines that are not one of its
/// complete events are skipped.
std::vector<model::ProfileOp> read_profile_ops(const std::string& path, std::size_t max_ops);

/// The summary's `profiles` list (an added key): one object per profile.
nlohmann::ordered_json profiles_json(const std::vector<ProfileFileInfo>& infos);

}  // namespace traceml::report
