// Starts one rank: a child process in its own process group, with its stdout
// and stderr on pipes, default signal handling and no inherited descriptors.
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
};

/// Forks and executes `path` with `argv` and `env` ("NAME=value" entries).
/// The child gets /dev/null as stdin (a rank outside the terminal's foreground
/// group that read the terminal would be stopped by SIGTTIN and hang the run),
/// every signal at its default and unblocked, and only fds 0-2 open. Throws
/// LaunchError when the pipes or the fork fail. If exec fails the child
/// writes why to its stderr and exits 127, like a shell.
/// `black_box_fd` (>= 0): a descriptor the child gets as kBlackBoxChildFd,
/// named in its TRACEML_BLACK_BOX_FD (store/black_box.hpp).
RankProcess spawn_rank(const std::string& path, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env, int black_box_fd = -1);

/// The descriptor a rank finds its black box at.
inline constexpr int kBlackBoxChildFd = 3;

}  // namespace traceml::launcher
