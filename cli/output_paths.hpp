// A command that exits 2 leaves no file behind (issue 30). Every output
// path is checked in the command's check, before anything starts, and what
// a call did create is taken back when a later write fails.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace traceml::cli {

/// Why `file` cannot be written (created or atomically replaced) by this
/// process, as "FLAG FILE: why (choose a writable FLAG path)"; std::nullopt
/// when it can, or when `file` is empty (not given). With `make_parents` the
/// command creates missing directories, so the nearest existing one must be
/// writable; without, the file's own directory must exist. Looks only: it
/// creates nothing (fuzz_cli runs every check).
std::optional<std::string> unwritable_file(const std::string& flag, const std::string& file,
                                           bool make_parents);

/// Why `dir` cannot be used as a directory the command writes into (made
/// with its parents when missing); the same form and promises.
std::optional<std::string> unwritable_dir(const std::string& flag, const std::string& dir);

/// Why run and serve cannot write their run directory LOGS_DIR/RUN_NAME (run
/// name empty: a new one in LOGS_DIR); the same form and promises.
std::optional<std::string> unwritable_run_dir(const std::string& logs_dir,
                                              const std::string& run_name);

/// What one call of a command created: files that were not there and the
/// topmost directory it made. Unless kept, it is all removed when this goes
/// out of scope, so that a failure on a later file takes back the earlier
/// ones. A file that was there before is never removed (write it atomically:
/// a failed write leaves it as it was).
class CreatedOutputs {
 public:
  CreatedOutputs() = default;
  CreatedOutputs(const CreatedOutputs&) = delete;
  CreatedOutputs& operator=(const CreatedOutputs&) = delete;
  ~CreatedOutputs();

  /// Creates `dir` and its missing parents; throws report::WriteError.
  void make_dirs(const std::filesystem::path& dir);
  /// Notes `dir`, about to be made by someone else, if it is missing.
  void before_making(const std::filesystem::path& dir);
  /// Notes `file`, about to be written, if it is missing.
  void before_writing(const std::filesystem::path& file);
  /// The command succeeded: keep everything.
  void keep() { kept_ = true; }

 private:
  std::vector<std::filesystem::path> files_;
  std::vector<std::filesystem::path> dirs_;
  bool kept_ = false;
};

}  // namespace traceml::cli
