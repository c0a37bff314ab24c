#include "launcher/interrupt_signals.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>

namespace traceml::launcher {
namespace {

constexpr std::array<int, 8> kCaught = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                                        SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};

std::atomic<bool> g_installed{false};
std::atomic<int> g_write_fd{-1};
std::array<struct sigaction, kCaught.size()> g_previous{};

extern "C" void on_signal(int sig) {
  const int saved_errno = errno;
  const int fd = g_write_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const auto byte = static_cast<unsigned char>(sig);
    // A full pipe already holds enough wake-ups; dropping this byte is harmless
    // for SIGCHLD and only loses a repeated interrupt.
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

InterruptSignals::InterruptSignals() {
  if (g_installed.exchange(true)) {
    throw LaunchError("ranks are already being launched by this process; launch one set at a time");
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    g_installed.store(false);
    throw LaunchError("cannot create a pipe for signal handling (too many open files?)");
  }
  read_end_ = UniqueFd(fds[0]);
  write_end_ = UniqueFd(fds[1]);
  g_write_fd.store(write_end_.get());

  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: other threads of this process (the collector) must not see
  // their system calls fail with EINTR because a rank exited.
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (std::size_t i = 0; i < kCaught.size(); ++i) {
    ::sigaction(kCaught[i], kCaught[i] == SIGPIPE ? &ignore : &action, &g_previous[i]);
  }
}

InterruptSignals::~InterruptSignals() {
  for (std::size_t i = 0; i < kCaught.size(); ++i) {
    ::sigaction(kCaught[i], &g_previous[i], nullptr);
  }
  g_write_fd.store(-1);
  g_installed.store(false);
}

bool InterruptSignals::ends_run(int sig) {
  return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

std::vector<int> InterruptSignals::take() {
  std::vector<int> interrupts;
  std::array<unsigned char, 64> bytes{};
  for (;;) {
    const ssize_t n = ::read(read_end_.get(), bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      const int sig = bytes[static_cast<std::size_t>(i)];
      if (sig != SIGCHLD) interrupts.push_back(sig);
    }
  }
  return interrupts;
}

}  // namespace traceml::launcher
