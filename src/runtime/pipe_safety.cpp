#include "runtime/pipe_safety.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <string>

#include "model/text.hpp"

namespace traceml::runtime {
namespace {

sigset_t sigpipe_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

/// True when `fd` is a pipe whose inode is `expected`.
bool is_pipe(int fd, unsigned long long expected) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
         static_cast<unsigned long long>(st.st_ino) == expected;
}

}  // namespace

void block_sigpipe_in_this_thread() noexcept {
  const sigset_t set = sigpipe_set();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void write_stderr_line(std::string_view line) noexcept {
  try {
    std::string text = model::escape_for_terminal(line);
    text += '\n';
    const sigset_t set = sigpipe_set();
    sigset_t previous;
    ::pthread_sigmask(SIG_BLOCK, &set, &previous);
    // A SIGPIPE already pending for this thread belongs to someone else's
    // write and must stay pending; only the one our write raises is consumed.
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
    bool broken = false;
    std::string_view rest = text;
    while (!rest.empty()) {
      const ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
      if (n > 0) {
        rest.remove_prefix(static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        broken = n < 0 && errno == EPIPE;
        break;  // EPIPE, EBADF, EAGAIN on a full non-blocking pipe: the line is lost
      }
    }
    if (broken && !was_pending) {
      const timespec zero{0, 0};
      while (::sigtimedwait(&set, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  } catch (...) {
    // Out of memory while escaping: the warning is not worth the program.
  }
}

OrphanedOutputGuard::OrphanedOutputGuard(std::string_view launcher_pipes) noexcept {
  unsigned long long inodes[2] = {0, 0};
  char text[64] = {};
  launcher_pipes.copy(text, sizeof text - 1);
  if (std::sscanf(text, "%llu,%llu", &inodes[0], &inodes[1]) != 2) return;
  watch_[0] = is_pipe(STDOUT_FILENO, inodes[0]);
  watch_[1] = is_pipe(STDERR_FILENO, inodes[1]);
}

bool OrphanedOutputGuard::check() noexcept {
  if (!watch_[0] && !watch_[1]) return false;
  pollfd fds[2] = {{STDOUT_FILENO, 0, 0}, {STDERR_FILENO, 0, 0}};
  // Only POLLERR matters (always reported): ask for no event, never wait.
  if (::poll(fds, 2, 0) <= 0) return false;
  bool redirected = false;
  for (int i = 0; i < 2; ++i) {
    if (!watch_[i] || (fds[i].revents & POLLERR) == 0) continue;
    const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd < 0) continue;
    // dup2 swaps the descriptor atomically: a concurrent write by the program
    // goes either to the dead pipe (the gap the class comment admits) or here.
    if (::dup2(null_fd, fds[i].fd) >= 0) {
      watch_[i] = false;
      redirected = true;
    }
    ::close(null_fd);
  }
  return redirected;
}

void OrphanedOutputGuard::watch(int stop_fd) noexcept {
  while (watching()) {
    // POLLERR and POLLNVAL come unasked on the output pipes; stop_fd wakes us.
    // A descriptor no longer watched is left out (-1): it may stay broken.
    pollfd fds[3] = {{watch_[0] ? STDOUT_FILENO : -1, 0, 0},
                     {watch_[1] ? STDERR_FILENO : -1, 0, 0},
                     {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, 3, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[2].revents & (POLLIN | POLLERR | POLLHUP | POLLNVAL)) != 0) return;
    check();
    // Whatever still reports (closed by the program, or /dev/null would not
    // open) is given up rather than polled again at once.
    for (int i = 0; i < 2; ++i)
      if (watch_[i] && fds[i].revents != 0) watch_[i] = false;
  }
}

}  // namespace traceml::runtime
