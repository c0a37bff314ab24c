#include "launcher/rank_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

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

RankProcess spawn_rank(const std::string& path, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env, int black_box_fd) {
  Pipe out = make_pipe();
  Pipe err = make_pipe();

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
  // (runtime/pipe_safety.hpp).
  set(model::env::kLauncherPipes, std::to_string(inode_of(out.write_end.get())) + "," +
                                      std::to_string(inode_of(err.write_end.get())));
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
  for (const UniqueFd* fd : {&rank.stdout_read, &rank.stderr_read}) {
    ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
  }
  return rank;
}

}  // namespace traceml::launcher
