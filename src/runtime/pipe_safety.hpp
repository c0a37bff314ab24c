// Our own output and threads must never raise SIGPIPE in the training
// process: its disposition is the program's (default: die), and a launcher
// that died (OOM kill, SSH hang-up, kill -9) leaves the rank's stdout and
// stderr as pipes nobody reads. One warning from our sender thread would then
// kill a healthy training run with exit 141.
#pragma once

#include <string_view>

namespace traceml::runtime {

/// Blocks SIGPIPE in the calling thread only (the program's other threads and
/// its disposition are untouched). Called first thing by every thread we
/// start: a write there to a broken pipe then fails with EPIPE instead.
void block_sigpipe_in_this_thread() noexcept;

/// Writes `line` plus a newline to stderr with one write() when it fits, on
/// any thread, without ever raising SIGPIPE: SIGPIPE is blocked around the
/// write and a SIGPIPE the write itself raised is consumed. Control
/// characters are escaped (the text may carry a peer's strings). A closed,
/// full or broken stderr loses the line and nothing else.
void write_stderr_line(std::string_view line) noexcept;

/// Under `traceml run` the rank's stdout and stderr are pipes to the
/// launcher (it names their inodes in TRACEML_LAUNCHER_PIPES). When the launcher dies, the next
/// write by the *program* would raise SIGPIPE and kill it. check() notices a pipe whose reader is
/// gone (poll reports POLLERR on a write end without readers) and points that descriptor at
/// /dev/null, so training carries on with its output discarded, as it would be anyway. The runtime
/// runs watch() on a thread of its own, which sleeps in poll() until a pipe breaks: it costs no
/// CPU while the launcher lives and acts within microseconds of its death (a program write in
/// that gap can still raise SIGPIPE).
class OrphanedOutputGuard {
 public:
  /// Watches stdout and stderr when they are the launcher's pipes named in
  /// `launcher_pipes` ("<stdout inode>,<stderr inode>", as the launcher sets
  /// TRACEML_LAUNCHER_PIPES); a program's own pipes (`./train | head`) are
  /// never touched: there SIGPIPE is the behaviour its user expects.
  explicit OrphanedOutputGuard(std::string_view launcher_pipes) noexcept;
  /// Returns true when it redirected a descriptor during this call.
  bool check() noexcept;
  /// True while a descriptor is still watched.
  [[nodiscard]] bool watching() const noexcept { return watch_[0] || watch_[1]; }
  /// Blocks until a watched pipe loses its reader (then redirects it, as
  /// check() does, and goes on watching the other) or `stop_fd` becomes
  /// readable; returns when nothing is left to watch or on stop.
  void watch(int stop_fd) noexcept;

 private:
  bool watch_[2] = {false, false};
};

}  // namespace traceml::runtime
