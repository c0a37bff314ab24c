// Runs a real child process (the traceml CLI) and captures its exit code,
// stdout and stderr, for tests that assert on what a user sees.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace traceml::testing {

struct ProcessResult {
  int exit_code = -1;  ///< 128 + signal when killed by a signal
  std::string out;
  std::string err;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A fresh empty directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "traceml-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// A child process running in the background, its stdout and stderr going to
/// files; wait() collects them. For tests that signal or race a running child.
class ChildProcess {
 public:
  /// Starts argv[0] with arguments in `cwd` (empty: the current directory).
  explicit ChildProcess(const std::vector<std::string>& argv, const std::string& cwd = "") {
    std::vector<std::string> full;
    if (!cwd.empty()) {
      // posix_spawn has no portable chdir action: go through the shell.
      full = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", cwd};
    }
    full.insert(full.end(), argv.begin(), argv.end());
    std::vector<char*> args;
    for (auto& a : full)
      args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~ChildProcess() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  /// What the child has written to stdout so far.
  [[nodiscard]] std::string out_so_far() const { return read_file(out_path()); }
  [[nodiscard]] std::string err_so_far() const { return read_file(err_path()); }
  void signal(int sig) const {
    if (pid_ > 0 && !waited_) ::kill(pid_, sig);
  }
  /// Waits for the child to end and returns its exit code and output.
  ProcessResult wait() {
    ProcessResult r;
    if (pid_ <= 0) {
      r.err = "spawn failed";
      return r;
    }
    if (!waited_) {
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0) {
      }
      waited_ = true;
      if (WIFEXITED(status)) code_ = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) code_ = 128 + WTERMSIG(status);
    }
    r.exit_code = code_;
    r.out = out_so_far();
    r.err = err_so_far();
    return r;
  }

 private:
  [[nodiscard]] std::string out_path() const { return (io_.path() / "out").string(); }
  [[nodiscard]] std::string err_path() const { return (io_.path() / "err").string(); }
  TempDir io_;
  pid_t pid_ = -1;
  bool waited_ = false;
  int code_ = -1;
};

/// Runs argv[0] with arguments in `cwd` (empty: the current directory) and
/// waits for it. To change the child's environment, start argv with
/// "/usr/bin/env", "NAME=value" (or "-u", "NAME").
inline ProcessResult run_process(const std::vector<std::string>& argv,
                                 const std::string& cwd = "") {
  ChildProcess child(argv, cwd);
  return child.wait();
}

}  // namespace traceml::testing
