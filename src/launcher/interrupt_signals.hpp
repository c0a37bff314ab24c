// Catches SIGINT/SIGTERM (and SIGCHLD, to wake up) while ranks run, so the
// launcher forwards a Ctrl-C to them instead of dying and orphaning them.
#pragma once

#include <vector>

#include "launcher/unique_fd.hpp"

namespace traceml::launcher {

/// While alive: SIGINT, SIGTERM and SIGCHLD write to a self-pipe (fd()), and
/// SIGPIPE is ignored so a closed terminal cannot kill the launcher before it
/// stopped the ranks. The destructor restores the previous dispositions.
/// Only one may exist per process (the handlers are process-wide); a second
/// throws LaunchError.
class InterruptSignals {
 public:
  InterruptSignals();
  ~InterruptSignals();
  InterruptSignals(const InterruptSignals&) = delete;
  InterruptSignals& operator=(const InterruptSignals&) = delete;

  /// Readable when a signal arrived.
  [[nodiscard]] int fd() const { return read_end_.get(); }
  /// The SIGINT/SIGTERM received since the last call, in arrival order;
  /// drains the pipe (SIGCHLD only wakes the caller up).
  std::vector<int> take();

 private:
  UniqueFd read_end_;
  UniqueFd write_end_;
};

}  // namespace traceml::launcher
