#include "launcher/output_keeper.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "launcher/fork_child.hpp"

namespace traceml::launcher {
namespace {

/// The keeper's body. It runs in a fork of a multi-threaded launcher, so only
/// async-signal-safe calls, and `fds` (alive pipe first, then the ranks' read
/// ends) and `polls` were allocated before the fork.
[[noreturn]] void keep(std::vector<int>& fds, std::vector<pollfd>& polls, int open_max) {
  // Signals that stop a run go to the launcher, which handles them; a Ctrl-C
  // reaching the whole terminal group must not take the keeper down with it.
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    const bool ignore = sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT ||
                        sig == SIGUSR1 || sig == SIGUSR2 || sig == SIGPIPE;
    action.sa_handler = ignore ? SIG_IGN : SIG_DFL;
    ::sigaction(sig, &action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::prctl(PR_SET_NAME, "traceml-keeper", 0, 0, 0);
  // Its own process group: killing the launcher's group (a job-control or
  // scheduler kill of the launcher) leaves the keeper to protect the ranks,
  // which live in groups of their own too.
  ::setpgid(0, 0);

  // Keep exactly the descriptors we need, at 3, 4, ...: first above every
  // other one (so that moving one down never overwrites another), then down.
  // Everything else goes: a copy of the collector's listening socket would
  // keep its port open with nobody answering.
  int top = 3;
  for (const int fd : fds)
    top = fd >= top ? fd + 1 : top;
  for (int& fd : fds) {
    const int high = ::fcntl(fd, F_DUPFD, top);
    if (high >= 0) fd = high;
  }
  for (std::size_t i = 0; i < fds.size(); ++i) {
    const int target = 3 + static_cast<int>(i);
    if (::dup2(fds[i], target) >= 0) fds[i] = target;
  }
  const int null_fd = ::open("/dev/null", O_RDWR);
  for (int std_fd = 0; std_fd <= 2 && null_fd >= 0; ++std_fd)
    ::dup2(null_fd, std_fd);
  const unsigned first_unused = 3U + static_cast<unsigned>(fds.size());
  bool closed = false;
#ifdef SYS_close_range
  closed = ::syscall(SYS_close_range, first_unused, ~0U, 0U) == 0;
#endif
  if (!closed) {
    for (int fd = static_cast<int>(first_unused); fd < open_max; ++fd)
      ::close(fd);
  }

  // While the launcher lives: wait for the alive pipe to hang up.
  pollfd alive{fds[0], POLLIN, 0};
  while (::poll(&alive, 1, -1) < 0 && errno == EINTR) {
  }

  // The launcher is gone: discard what the ranks write until they close.
  static char sink[64 * 1024];
  std::size_t open = fds.size() - 1;
  for (std::size_t i = 1; i < fds.size(); ++i)
    polls[i - 1] = {fds[i], POLLIN, 0};
  while (open > 0) {
    const int rc = ::poll(polls.data(), fds.size() - 1, -1);
    if (rc < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i + 1 < fds.size(); ++i) {
      if (polls[i].fd < 0 || polls[i].revents == 0) continue;
      const ssize_t n = ::read(polls[i].fd, sink, sizeof sink);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        ::close(polls[i].fd);
        polls[i].fd = -1;  // poll ignores negative descriptors
        --open;
      }
    }
  }
  ::_exit(0);
}

}  // namespace

std::optional<OutputKeeper> OutputKeeper::start(const std::vector<int>& read_fds) {
  if (read_fds.empty()) return std::nullopt;
  int alive[2];
  if (::pipe2(alive, O_CLOEXEC) != 0) return std::nullopt;
  UniqueFd alive_read(alive[0]);
  UniqueFd alive_write(alive[1]);
  // Allocated before the fork (see keep()).
  std::vector<int> fds;
  fds.reserve(read_fds.size() + 1);
  fds.push_back(alive_read.get());
  fds.insert(fds.end(), read_fds.begin(), read_fds.end());
  std::vector<pollfd> polls(read_fds.size());
  const long max = ::sysconf(_SC_OPEN_MAX);
  const int open_max = max > 0 && max < (1 << 20) ? static_cast<int>(max) : 1024;

  const pid_t pid = fork_with_signals_blocked([&] {
    // The copy of the alive pipe's write end that fork gave us must go, or
    // the keeper would keep itself waiting.
    ::close(alive_write.get());
    keep(fds, polls, open_max);
  });
  if (pid < 0) return std::nullopt;
  return OutputKeeper(pid, std::move(alive_write));
}

OutputKeeper::OutputKeeper(pid_t pid, UniqueFd alive) : pid_(pid), alive_(std::move(alive)) {}

OutputKeeper::OutputKeeper(OutputKeeper&& other) noexcept
    : pid_(other.pid_), alive_(std::move(other.alive_)) {
  other.pid_ = -1;
}

OutputKeeper::~OutputKeeper() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace traceml::launcher
