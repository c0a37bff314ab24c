#include "report/html/page_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <vector>

#include "model/env_contract.hpp"
#include "model/env_values.hpp"

namespace traceml::report {

namespace {

using Clock = std::chrono::steady_clock;

/// What the child sends: one kind byte ('P' page, 'E' error), the body's
/// length (8 bytes, host order), the body. Whole or not at all: a message
/// cut short (a child killed while writing) is no page.
constexpr std::size_t kHeader = 1 + sizeof(std::uint64_t);

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void send(int fd, char kind, const char* body, std::size_t size) {
  char header[kHeader];
  header[0] = kind;
  const std::uint64_t n = size;
  std::memcpy(header + 1, &n, sizeof n);
  if (write_all(fd, header, sizeof header)) write_all(fd, body, size);
}

/// TRACEML_TEST_PAGE_FAULT: a page that cannot be drawn, on demand, so that
/// tests can show what such a page costs (docs/html-report.md).
void test_fault() {
  const char* fault = std::getenv(model::env::kTestPageFault);
  if (fault == nullptr) return;
  if (std::strcmp(fault, "hang") == 0) {
    for (;;)
      ::pause();  // every signal is blocked: only SIGKILL ends it
  }
  if (std::strcmp(fault, "abort") == 0) std::abort();
  if (std::strcmp(fault, "oom") == 0) {
    // Address space without touching it: the limit stops it, not the machine.
    std::vector<std::unique_ptr<char[]>> held;
    for (;;)
      held.emplace_back(new char[std::size_t(64) << 20]);
  }
}

[[noreturn]] void child_main(int fd, const Json& summary, const model::Telemetry* run,
                             const HtmlOptions& opts, std::uint64_t address_space) {
  // A crashing page must not leave a core file the size of a training process.
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (address_space > 0) {
    const rlimit as{address_space, address_space};
    ::setrlimit(RLIMIT_AS, &as);
  }
  try {
    test_fault();
    const std::string page = render_html(summary, run, opts);
    send(fd, 'P', page.data(), page.size());
  } catch (const std::bad_alloc&) {
    static const char kOom[] = "\x01";  // the parent words it: it knows the limit
    send(fd, 'E', kOom, 1);
  } catch (const std::exception& e) {
    send(fd, 'E', e.what(), std::strlen(e.what()));
  } catch (...) {
    static const char kUnknown[] = "an unknown exception";
    send(fd, 'E', kUnknown, sizeof kUnknown - 1);
  }
  ::_exit(0);
}

/// The address space this process holds now (VmSize), so that the child's
/// limit is what it may add: a LibTorch process with CUDA, or a sanitizer's
/// shadow memory, already holds far more than any page needs.
std::uint64_t address_space_now() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages = 0;
  if (!(statm >> pages)) return 0;
  const long page_size = ::sysconf(_SC_PAGESIZE);
  return pages * static_cast<std::uint64_t>(page_size > 0 ? page_size : 4096);
}

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(d.count()) / 1000.0);
  return buf;
}

std::string mib_text(std::uint64_t bytes) {
  return std::to_string(bytes >> 20);
}

}  // namespace

PageLimits page_limits_from(const std::optional<std::string>& timeout_s,
                            const std::optional<std::string>& memory_mb,
                            std::vector<std::string>& problems) {
  PageLimits l;
  // Digits first: strtod and strtoll would take " 5" and "+5" too.
  const auto number = [](const std::string& v) {
    return !v.empty() && (std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '.');
  };
  const auto refuse = [&](const char* name, const std::string& v, const char* why) {
    problems.push_back(std::string(name) + "='" + model::quote_value(v) + "' " + why);
  };
  if (timeout_s && !timeout_s->empty()) {
    const std::string& v = *timeout_s;
    char* end = nullptr;
    errno = 0;
    const double s = number(v) ? std::strtod(v.c_str(), &end) : 0.0;
    // At most a day: a limit is only useful if it ends.
    if (number(v) && errno == 0 && *end == '\0' && std::isfinite(s) && s > 0 &&
        s <= kMaxPageTimeoutSec) {
      l.time = std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(s * 1000)));
    } else {
      refuse(model::env::kPageTimeout, v, "is not a number of seconds in (0, 86400]");
    }
  }
  if (memory_mb && !memory_mb->empty()) {
    const std::string& v = *memory_mb;
    char* end = nullptr;
    errno = 0;
    const long long mb = number(v) ? std::strtoll(v.c_str(), &end, 10) : 0;
    if (number(v) && errno == 0 && *end == '\0' && mb >= 1 && mb <= kMaxPageMemoryMb) {
      l.memory_bytes = std::uint64_t(mb) << 20;
    } else {
      refuse(model::env::kPageMemory, v, "is not a whole number of MiB in [1, 1073741824]");
    }
  }
  return l;
}

PageChild::PageChild(const Json& summary, const model::Telemetry* run, const HtmlOptions& opts,
                     const PageLimits& limits)
    : limits_(limits), deadline_(Clock::now() + limits.time) {
  const std::uint64_t held = limits.memory_bytes > 0 ? address_space_now() : 0;
  const std::uint64_t address_space = limits.memory_bytes > 0 ? held + limits.memory_bytes : 0;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    error_ = std::string("cannot open a pipe to draw it: ") + std::strerror(errno);
    return;
  }
  // Every signal blocked across the fork, and in the child for good: the
  // child must not run the parent's handlers (a launcher's self-pipe, a
  // training program's own), and a closed pipe ends its write with EPIPE.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    child_main(fds[1], summary, run, opts, address_space);
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    error_ = std::string("cannot start a process to draw it: ") + std::strerror(fork_errno);
    return;
  }
  pid_ = pid;
  fd_ = fds[0];
}

PageChild::~PageChild() {
  // Not finished (the caller failed between start and finish): stopped and
  // reaped, never left behind.
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (fd_ >= 0) ::close(fd_);
}

DrawnPage PageChild::finish() {
  DrawnPage out;
  if (pid_ <= 0) {
    out.error = error_.empty() ? "drawing it ended without a page" : error_;
    return out;
  }
  const PageLimits& limits = limits_;
  const int fd = fd_;
  const pid_t pid = pid_;
  std::string got;
  bool timed_out = false;
  bool eof = false;
  char buf[65536];
  while (!eof) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, int(std::min<std::int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (n == 0) {
      eof = true;
      break;
    }
    got.append(buf, static_cast<std::size_t>(n));
    // No page is larger than the memory it was drawn in.
    if (limits.memory_bytes > 0 && got.size() > kHeader + limits.memory_bytes) break;
  }
  if (!eof) ::kill(pid, SIGKILL);
  ::close(fd);
  fd_ = -1;
  int status = 0;
  pid_t reaped;
  while ((reaped = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  // A program that ignores SIGCHLD has its children reaped for it (ECHILD):
  // the message alone then says whether the page came whole.

  std::uint64_t size = 0;
  if (got.size() >= kHeader) std::memcpy(&size, got.data() + 1, sizeof size);
  const bool whole = eof && got.size() >= kHeader && got.size() - kHeader == size;
  if (whole && got[0] == 'P') {
    out.page = got.substr(kHeader);
    return out;
  }
  if (whole && got[0] == 'E') {
    std::string why = got.substr(kHeader);
    // One line, whatever the exception said.
    for (char& c : why)
      if (c == '\n' || c == '\r') c = ' ';
    out.error = why == "\x01" ? "drawing it needed more than " + mib_text(limits.memory_bytes) +
                                    " MiB of memory (" + model::env::kPageMemory + ")"
                              : why;
    return out;
  }
  if (timed_out) {
    out.error = "drawing it took longer than " + seconds_text(limits.time) + " s (" +
                model::env::kPageTimeout + "); it was stopped";
  } else if (reaped == pid && WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    out.error = "drawing it ended on signal " + std::to_string(sig) + " (" +
                (name != nullptr ? name : "?") + ")";
  } else if (reaped == pid && WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    out.error = "drawing it ended with exit code " + std::to_string(WEXITSTATUS(status));
  } else {
    out.error = "drawing it ended without a page";
  }
  return out;
}

DrawnPage draw_page_in_child(const Json& summary, const model::Telemetry* run,
                             const HtmlOptions& opts, const PageLimits& limits) {
  PageChild child(summary, run, opts, limits);
  return child.finish();
}

}  // namespace traceml::report
