#include "output_paths.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "report/atomic_file.hpp"

namespace traceml::cli {

namespace fs = std::filesystem;

namespace {

/// The directory a relative path with no parent lives in.
fs::path or_here(const fs::path& dir) {
  return dir.empty() ? fs::path(".") : dir;
}

/// Why nothing can be written into `dir` (or, with `may_create`, into the
/// directories made below its nearest existing ancestor).
std::optional<std::string> dir_problem(const fs::path& dir, bool may_create) {
  fs::path d = or_here(dir);
  for (;;) {
    std::error_code ec;
    const fs::file_status st = fs::status(d, ec);
    if (st.type() == fs::file_type::not_found) {
      if (!may_create) return "directory " + d.string() + " does not exist";
      const fs::path up = d.parent_path();
      // "a/.." and "/" have themselves as parent: stop where walking up
      // makes no progress.
      if (up == d || (up.empty() && d == ".")) return "directory " + d.string() + " does not exist";
      d = or_here(up);
      continue;
    }
    if (ec) return "cannot use " + d.string() + ": " + ec.message();
    if (!fs::is_directory(st)) return d.string() + " is not a directory";
    if (::access(d.c_str(), W_OK | X_OK) != 0)
      return "cannot write into " + d.string() + ": " + std::strerror(errno);
    return std::nullopt;
  }
}

std::string worded(const std::string& flag, const std::string& path, const std::string& why,
                   const char* what) {
  return flag + " " + path + ": " + why + " (choose a writable " + flag + " " + what + ")";
}

}  // namespace

std::optional<std::string> unwritable_file(const std::string& flag, const std::string& file,
                                           bool make_parents) {
  if (file.empty()) return std::nullopt;
  const fs::path p(file);
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (st.type() != fs::file_type::not_found) {
    if (ec) return worded(flag, file, "cannot use it: " + ec.message(), "path");
    // A rename over a directory fails late; over a device or a pipe it
    // would replace the device node.
    if (fs::is_directory(st)) return worded(flag, file, "is a directory", "path");
    if (!fs::is_regular_file(st)) return worded(flag, file, "is not a regular file", "path");
  }
  if (p.filename().empty() || p.filename() == "." || p.filename() == "..")
    return worded(flag, file, "names a directory, not a file", "path");
  if (const auto why = dir_problem(p.parent_path(), make_parents))
    return worded(flag, file, *why, "path");
  return std::nullopt;
}

std::optional<std::string> unwritable_dir(const std::string& flag, const std::string& dir) {
  if (dir.empty()) return std::nullopt;
  if (const auto why = dir_problem(fs::path(dir), true))
    return worded(flag, dir, *why, "directory");
  return std::nullopt;
}

std::optional<std::string> unwritable_run_dir(const std::string& logs_dir,
                                              const std::string& run_name) {
  if (auto why = unwritable_dir("--logs-dir", logs_dir)) return why;
  if (run_name.empty()) return std::nullopt;
  if (const auto why = dir_problem(fs::path(logs_dir) / run_name, true))
    return "--run-name " + run_name + ": " + *why + " (choose another --run-name)";
  return std::nullopt;
}

CreatedOutputs::~CreatedOutputs() {
  if (kept_) return;
  std::error_code ec;
  for (auto it = files_.rbegin(); it != files_.rend(); ++it)
    fs::remove(*it, ec);
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it)
    fs::remove_all(*it, ec);
}

void CreatedOutputs::before_making(const fs::path& dir) {
  // The topmost missing directory: removing it removes everything made
  // below it in this call.
  std::error_code ec;
  fs::path top;
  for (fs::path d = dir; !d.empty() && !fs::exists(d, ec); d = d.parent_path()) {
    top = d;
    if (d.parent_path() == d) break;
  }
  if (!top.empty()) dirs_.push_back(top);
}

void CreatedOutputs::make_dirs(const fs::path& dir) {
  if (dir.empty()) return;
  before_making(dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw report::WriteError(dir.string() + ": cannot create directory: " + ec.message());
}

void CreatedOutputs::before_writing(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec) && !ec) files_.push_back(file);
}

}  // namespace traceml::cli
