// The ranks' stdout and stderr are pipes that only the launcher reads. If
// the launcher dies without a chance to clean up (SIGKILL, the OOM killer),
// the next write by a rank would meet a pipe without a reader and raise
// SIGPIPE, killing a healthy training run. The keeper is a small process that
// holds a copy of every read end and reads nothing while the launcher lives;
// once the launcher is gone it drains and discards the ranks' output until
// they close it, so their writes always succeed.
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

#include "launcher/unique_fd.hpp"

namespace traceml::launcher {

class OutputKeeper {
 public:
  /// Forks the keeper holding `read_fds` (the launcher keeps its own copies).
  /// std::nullopt when it cannot be started: the launcher then works as
  /// before, without this protection.
  static std::optional<OutputKeeper> start(const std::vector<int>& read_fds);

  OutputKeeper(OutputKeeper&& other) noexcept;
  OutputKeeper& operator=(OutputKeeper&&) = delete;
  OutputKeeper(const OutputKeeper&) = delete;
  OutputKeeper& operator=(const OutputKeeper&) = delete;
  /// The launcher ends normally: the keeper is stopped and reaped (it never
  /// outlives a launcher that could still read the pipes itself).
  ~OutputKeeper();

  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  OutputKeeper(pid_t pid, UniqueFd alive);
  pid_t pid_ = -1;
  UniqueFd alive_;  ///< write end of the pipe whose hang-up tells the keeper the launcher is gone
};

}  // namespace traceml::launcher
