#include "launcher/rank_process.hpp"

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include "launcher/fork_child.hpp"
#include "model/env_contract.hpp"

namespace traceml::launcher {
namespace {

struct Pipe {
  UniqueFd read_end;
  UniqueFd write_end;
};

// Keeps both ends above 2, so that dup2 onto 0/1/2 in the child can never
// overwrite one of them even when the launcher runs with a standard fd closed.
UniqueFd above_stdio(int fd) {
  if (fd > 2) return UniqueFd(fd);
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return UniqueFd(moved);
}

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw LaunchError(std::string("cannot create a pipe for a rank's output: ") +
                      std::strerror(errno));
  }
  Pipe p{above_stdio(fds[0]), above_stdio(fds[1])};
  if (!p.read_end.valid() || !p.write_end.valid()) {
    throw LaunchError("cannot create a pipe for a rank's output (too many open files?)");
  }
  return p;
}

/// A pseudo-terminal for one output stream: `read_end` is its master,
/// `write_end` the slave the child writes to. Output processing is off
/// (OPOST): the program's bytes arrive as written, "\n" not turned into
/// "\r\n", so the relay and the rank logs see what a pipe gave them.
std::optional<Pipe> make_terminal(const RankTerminal& t, std::string& why) {
  int master = -1;
  int slave = -1;
  winsize size{};
  size.ws_row = t.rows;
  size.ws_col = t.cols;
  if (::openpty(&master, &slave, nullptr, nullptr, t.rows > 0 && t.cols > 0 ? &size : nullptr) !=
      0) {
    why = std::string("cannot open a pseudo-terminal for a rank's output (") +
          std::strerror(errno) + ")";
    return std::nullopt;
  }
  for (const int fd : {master, slave})
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  termios mode{};
  if (::tcgetattr(slave, &mode) == 0) {
    mode.c_oflag &= ~static_cast<tcflag_t>(OPOST);
    mode.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON | ISIG | IEXTEN);
    ::tcsetattr(slave, TCSANOW, &mode);
  }
  Pipe p{above_stdio(master), above_stdio(slave)};
  if (!p.read_end.valid() || !p.write_end.valid()) {
    why = "cannot open a pseudo-terminal for a rank's output (too many open files?)";
    return std::nullopt;
  }
  return p;
}

/// The rank's stream: a pseudo-terminal when asked and one opens, else a pipe.
Pipe output_channel(bool terminal, const RankTerminal& t, bool& is_terminal, std::string* warning) {
  is_terminal = false;
  if (terminal) {
    std::string why;
    if (auto p = make_terminal(t, why)) {
      is_terminal = true;
      return std::move(*p);
    }
    if (warning != nullptr && warning->empty()) *warning = why + ": its output is a pipe";
  }
  return make_pipe();
}

unsigned long long inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

// Between fork and exec only async-signal-safe calls: another thread of the
// launcher may hold a malloc or stdio lock that would never be released here.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp, int out_fd,
                             int err_fd, int box_fd, long open_max,
                             const std::string& exec_failed) {
  ::setpgid(0, 0);

  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  }

  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  // The black box, if any, becomes descriptor 3 (kept across exec); every
  // other descriptor above 2 is closed.
  unsigned first_closed = 3;
  if (box_fd >= 0) {
    if (box_fd == kBlackBoxChildFd)
      ::fcntl(box_fd, F_SETFD, 0);
    else
      ::dup2(box_fd, kBlackBoxChildFd);
    first_closed = kBlackBoxChildFd + 1;
  }
  bool closed = false;
#ifdef SYS_close_range
  closed = ::syscall(SYS_close_range, first_closed, ~0U, 0U) == 0;
#endif
  if (!closed) {
    for (long fd = first_closed; fd < open_max; ++fd)
      ::close(static_cast<int>(fd));
  }

  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  ::execve(path, argv, envp);
  [[maybe_unused]] const ssize_t n = ::write(2, exec_failed.data(), exec_failed.size());
  ::_exit(127);
}

}  // namespace

RankTerminal terminal_like_launcher() {
  RankTerminal t;
  t.out = ::isatty(STDOUT_FILENO) == 1;
  t.err = ::isatty(STDERR_FILENO) == 1;
  winsize size{};
  for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    if (::isatty(fd) == 1 && ::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_row > 0 &&
        size.ws_col > 0) {
      t.rows = size.ws_row;
      t.cols = size.ws_col;
      break;
    }
  }
  return t;
}

RankProcess spawn_rank(const std::string& path, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env, int black_box_fd,
                       const RankTerminal& terminal, std::string* warning) {
  if (warning != nullptr) warning->clear();
  bool out_terminal = false;
  bool err_terminal = false;
  Pipe out = output_channel(terminal.out, terminal, out_terminal, warning);
  Pipe err = output_channel(terminal.err, terminal, err_terminal, warning);

  // Everything the child needs is built before fork (see exec_child).
  std::vector<std::string> argv_copy = argv;
  std::vector<std::string> env_copy = env;
  // Set here whatever the inherited environment held; empty: unset.
  const auto set = [&env_copy](const char* name, const std::string& value) {
    const std::string key = std::string(name) + "=";
    env_copy.erase(std::remove_if(env_copy.begin(), env_copy.end(),
                                  [&](const std::string& e) { return e.rfind(key, 0) == 0; }),
                   env_copy.end());
    if (!value.empty()) env_copy.push_back(key + value);
  };
  // The rank's runtime guards exactly these pipes: if the launcher dies, it
  // points them at /dev/null before the program's next write raises SIGPIPE
  // (runtime/pipe_safety.hpp). A terminal needs no guard (a write to one
  // whose master is gone fails with EIO, no signal): 0 names no pipe.
  set(model::env::kLauncherPipes,
      std::to_string(out_terminal ? 0 : inode_of(out.write_end.get())) + "," +
          std::to_string(err_terminal ? 0 : inode_of(err.write_end.get())));
  set(model::env::kBlackBoxFd, black_box_fd >= 0 ? std::to_string(kBlackBoxChildFd) : "");
  std::vector<char*> argv_ptrs;
  argv_ptrs.reserve(argv_copy.size() + 1);
  for (auto& a : argv_copy)
    argv_ptrs.push_back(a.data());
  argv_ptrs.push_back(nullptr);
  std::vector<char*> env_ptrs;
  env_ptrs.reserve(env_copy.size() + 1);
  for (auto& e : env_copy)
    env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);
  const std::string exec_failed = "[TraceML] ERROR: cannot execute " + path + "\n";
  const long open_max = ::sysconf(_SC_OPEN_MAX) > 0 ? ::sysconf(_SC_OPEN_MAX) : 1024;

  // The child resets the launcher's handlers to the defaults before it execs.
  const pid_t pid = fork_with_signals_blocked([&] {
    exec_child(path.c_str(), argv_ptrs.data(), env_ptrs.data(), out.write_end.get(),
               err.write_end.get(), black_box_fd, open_max, exec_failed);
  });
  const int fork_errno = errno;
  if (pid < 0) {
    throw LaunchError(std::string("cannot start a rank (fork failed: ") +
                      std::strerror(fork_errno) + ")");
  }
  // Also set here: the launcher may signal the group before the child ran.
  // EACCES (the child already exec'd, having set it itself) is fine.
  ::setpgid(pid, pid);

  RankProcess rank;
  rank.pid = pid;
  rank.stdout_read = std::move(out.read_end);
  rank.stderr_read = std::move(err.read_end);
  rank.stdout_terminal = out_terminal;
  rank.stderr_terminal = err_terminal;
  for (const UniqueFd* fd : {&rank.stdout_read, &rank.stderr_read}) {
    ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
  }
  return rank;
}

}  // namespace traceml::launcher
