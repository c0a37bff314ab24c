// Our writes never raise SIGPIPE in the training process, and a dead
// launcher's pipes are swapped for /dev/null. SIGPIPE keeps its default
// disposition (terminate) in this test binary: a raised one fails the run.
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <ctime>
#include <string>
#include <thread>

#include "runtime/pipe_safety.hpp"

namespace traceml::runtime {
namespace {

bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

unsigned long long inode_of(int fd) {
  struct stat st {};
  fstat(fd, &st);
  return static_cast<unsigned long long>(st.st_ino);
}

/// Puts a fresh pipe's write end on `target` (1 or 2) for the test's life.
class PipeOn {
 public:
  explicit PipeOn(int target) : target_(target), saved_(dup(target)) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    read_end_ = fds[0];
    dup2(fds[1], target_);
    close(fds[1]);
  }
  ~PipeOn() {
    dup2(saved_, target_);
    close(saved_);
    close_reader();
  }
  void close_reader() {
    if (read_end_ >= 0) close(read_end_);
    read_end_ = -1;
  }
  std::string read_available() {
    std::string out;
    char buf[256];
    pollfd p{read_end_, POLLIN, 0};
    while (poll(&p, 1, 0) > 0) {
      const ssize_t n = read(read_end_, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int target_;
  int saved_;
  int read_end_ = -1;
};

TEST(PipeSafety, StderrLineIsOneEscapedLine) {
  PipeOn err(2);
  write_stderr_line("traceml: host \x1b[2Jevil");
  EXPECT_EQ(err.read_available(), "traceml: host \\x1b[2Jevil\n");
}

TEST(PipeSafety, StderrLineToABrokenPipeRaisesNoSigpipe) {
  PipeOn err(2);
  err.close_reader();
  write_stderr_line("traceml: warning: nobody reads this");  // would kill the test binary
  EXPECT_FALSE(sigpipe_pending());
}

TEST(PipeSafety, ASigpipeAlreadyPendingIsLeftForItsOwner) {
  sigset_t set, previous;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, &previous);
  pthread_kill(pthread_self(), SIGPIPE);  // someone else's broken write
  {
    PipeOn err(2);
    err.close_reader();
    write_stderr_line("traceml: warning: x");
  }
  EXPECT_TRUE(sigpipe_pending());
  const timespec zero{0, 0};
  EXPECT_EQ(sigtimedwait(&set, nullptr, &zero), SIGPIPE);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

TEST(PipeSafety, OurThreadsGetEpipeNotSigpipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  int error = 0;
  std::thread t([&] {
    block_sigpipe_in_this_thread();
    const char byte = 'x';
    if (write(fds[1], &byte, 1) < 0) error = errno;
  });
  t.join();
  close(fds[1]);
  EXPECT_EQ(error, EPIPE);
}

TEST(PipeSafety, GuardSwapsADeadLaunchersPipeForDevNull) {
  PipeOn out(1);
  OrphanedOutputGuard guard(std::to_string(inode_of(1)) + ",0");
  EXPECT_FALSE(guard.check()) << "the launcher still reads";
  out.close_reader();
  EXPECT_TRUE(guard.check());
  struct stat st {};
  ASSERT_EQ(fstat(1, &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "stdout is not /dev/null";
  // The program's next print is discarded instead of killing it.
  EXPECT_EQ(write(1, "step 100\n", 9), 9);
  EXPECT_FALSE(guard.check()) << "done once";
}

TEST(PipeSafety, WatcherAsleepInPollSwapsThePipeTheMomentTheLauncherDies) {
  PipeOn out(1);
  OrphanedOutputGuard guard(std::to_string(inode_of(1)) + ",0");
  ASSERT_TRUE(guard.watching());
  int stop[2];
  ASSERT_EQ(pipe(stop), 0);
  std::thread watcher([&] { guard.watch(stop[0]); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  struct stat st {};
  ASSERT_EQ(fstat(1, &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the launcher still reads";
  const auto died = std::chrono::steady_clock::now();
  out.close_reader();
  watcher.join();  // returns: nothing left to watch
  EXPECT_LT(std::chrono::steady_clock::now() - died, std::chrono::seconds(1));
  ASSERT_EQ(fstat(1, &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "stdout is not /dev/null";
  EXPECT_EQ(write(1, "step 100\n", 9), 9);
  EXPECT_FALSE(guard.watching());
  close(stop[0]);
  close(stop[1]);
}

TEST(PipeSafety, WatcherStopsWhenAsked) {
  PipeOn out(1);
  OrphanedOutputGuard guard(std::to_string(inode_of(1)) + ",0");
  int stop[2];
  ASSERT_EQ(pipe(stop), 0);
  std::thread watcher([&] { guard.watch(stop[0]); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(write(stop[1], "x", 1), 1);
  watcher.join();
  EXPECT_TRUE(guard.watching()) << "stopped, not triggered";
  close(stop[0]);
  close(stop[1]);
}

TEST(PipeSafety, GuardLeavesTheProgramsOwnPipesAlone) {
  // `./train | head`: head exiting must end the program as it would untraced.
  PipeOn out(1);
  OrphanedOutputGuard other(std::to_string(inode_of(1) + 1) + ",0");
  OrphanedOutputGuard unset("");
  out.close_reader();
  EXPECT_FALSE(other.check());
  EXPECT_FALSE(unset.check());
  struct stat st {};
  ASSERT_EQ(fstat(1, &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

}  // namespace
}  // namespace traceml::runtime
