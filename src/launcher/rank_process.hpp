// Starts one rank: a child process in its own process group, with its stdout
// and stderr on pipes or pseudo-terminals, default signal handling and no
// inherited descriptors.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/launch_error.hpp"
#include "launcher/unique_fd.hpp"

namespace traceml::launcher {

struct RankProcess {
  pid_t pid = -1;        ///< also the id of its process group
  UniqueFd stdout_read;  ///< non-blocking read end of the rank's stdout
  UniqueFd stderr_read;  ///< non-blocking read end of the rank's stderr
  /// Which of the two is a pseudo-terminal's master (RankTerminal asked for
  /// one and it could be opened); its reads end with EIO, not 0.
  bool stdout_terminal = false;
  bool stderr_terminal = false;
};

/// Which of a rank's output streams are a pseudo-terminal rather than a
/// pipe. A program writing to a terminal line-buffers its stdout (C stdio,
/// and std::cout through it): each line reaches the launcher as it is
/// printed, and none is left in the program's buffer when a Ctrl-C ends it.
/// On a pipe the same lines wait in a 4 KiB buffer and die with the process.
struct RankTerminal {
  bool out = false;
  bool err = false;
  /// The window size the rank's terminal reports (TIOCGWINSZ); 0: none set.
  unsigned short rows = 0;
  unsigned short cols = 0;
};

/// The terminal a rank gets when the launcher's own stdout or stderr is a
/// terminal: the same streams, the launcher's window size. As when the
/// program runs directly in that terminal (torchrun leaves the terminal to
/// its ranks), but stdin stays /dev/null and the pseudo-terminal is never
/// the rank's controlling terminal (no job control, no SIGHUP from it).
RankTerminal terminal_like_launcher();

/// Forks and executes `path` with `argv` and `env` ("NAME=value" entries).
/// The child gets /dev/null as stdin (a rank outside the terminal's foreground
/// group that read the terminal would be stopped by SIGTTIN and hang the run),
/// every signal at its default and unblocked, and only fds 0-2 open. Throws
/// LaunchError when the pipes or the fork fail. If exec fails the child
/// writes why to its stderr and exits 127, like a shell.
/// `black_box_fd` (>= 0): a descriptor the child gets as kBlackBoxChildFd,
/// named in its TRACEML_BLACK_BOX_FD (store/black_box.hpp).
/// `terminal`: the streams that get a pseudo-terminal; one that cannot be
/// opened (no /dev/pts, the system's limit) is a pipe, and `warning` says
/// why (empty otherwise).
RankProcess spawn_rank(const std::string& path, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env, int black_box_fd = -1,
                       const RankTerminal& terminal = {}, std::string* warning = nullptr);

/// The descriptor a rank finds its black box at.
inline constexpr int kBlackBoxChildFd = 3;

}  // namespace traceml::launcher
