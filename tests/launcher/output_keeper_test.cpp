// The keeper holds the ranks' pipes open for as long as the launcher might
// die, in a process of its own that keeps nothing else.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "launcher/output_keeper.hpp"

namespace traceml::launcher {
namespace {

/// SIGPIPE blocked in this thread while alive: a broken write returns EPIPE.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &previous_);
  }
  ~NoSigpipe() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    const timespec zero{0, 0};
    while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }

 private:
  sigset_t previous_;
};

int write_byte(int fd) {
  const char byte = 'x';
  return write(fd, &byte, 1) == 1 ? 0 : errno;
}

TEST(OutputKeeper, ARankCanWriteWhileTheKeeperHoldsTheReadEnd) {
  NoSigpipe guard;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    auto keeper = OutputKeeper::start({fds[0]});
    ASSERT_TRUE(keeper);
    close(fds[0]);  // the launcher's own copy is gone
    EXPECT_EQ(write_byte(fds[1]), 0) << "the keeper should still hold the pipe";
  }
  // A launcher that ends normally stops its keeper: no reader is left.
  EXPECT_EQ(write_byte(fds[1]), EPIPE);
  close(fds[1]);
}

TEST(OutputKeeper, KeepsOnlyThePipesInAGroupOfItsOwn) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const int unrelated = dup(fds[1]);  // stands for the collector's socket
  auto keeper = OutputKeeper::start({fds[0]});
  ASSERT_TRUE(keeper);
  const std::string fd_dir = "/proc/" + std::to_string(keeper->pid()) + "/fd";
  // The keeper arranges its descriptors right after it starts.
  std::size_t count = 0;
  for (int i = 0; i < 200; ++i) {
    count = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(fd_dir))
      ++count;
    if (count == 5 && getpgid(keeper->pid()) == keeper->pid()) break;
    usleep(10000);
  }
  EXPECT_EQ(count, 5u) << "0-2 on /dev/null, the alive pipe, one read end";
  EXPECT_EQ(getpgid(keeper->pid()), keeper->pid());
  close(unrelated);
  close(fds[0]);
  close(fds[1]);
}

TEST(OutputKeeper, NothingToKeepStartsNothing) {
  EXPECT_FALSE(OutputKeeper::start({}));
}

}  // namespace
}  // namespace traceml::launcher
