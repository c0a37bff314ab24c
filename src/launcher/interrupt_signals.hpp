// Catches the signals that would otherwise end the launcher (SIGINT, SIGTERM,
// SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2; and SIGCHLD, to wake up) while ranks run
// and while the run's summary is written, so the launcher forwards them to the
// ranks instead of dying, orphaning them and losing the summary and manifest.
#pragma once

#include <vector>

#include "launcher/launch_error.hpp"
#include "launcher/unique_fd.hpp"

namespace traceml::launcher {

/// While alive: the caught signals write to a self-pipe (fd()), and SIGPIPE is
/// ignored so a closed terminal cannot kill the launcher before it stopped the
/// ranks and wrote the summary. The destructor restores the previous dispositions.
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
  /// The signals received since the last call, in arrival order, SIGCHLD
  /// left out (it only wakes the caller up); drains the pipe.
  std::vector<int> take();

  /// True for the caught signals that ask the run to end (SIGINT, SIGTERM,
  /// SIGHUP, SIGQUIT); false for SIGUSR1/SIGUSR2, which are only passed on:
  /// schedulers send them as a notice (Slurm's --signal) that programs catch
  /// to checkpoint, so they must not start the SIGKILL countdown.
  static bool ends_run(int sig);

 private:
  UniqueFd read_end_;
  UniqueFd write_end_;
};

}  // namespace traceml::launcher
