// spawn_rank with real child processes (/bin/sh): a rank's stream is a
// pseudo-terminal when asked (the program sees a terminal of the launcher's
// size, its bytes arrive unchanged), a pipe otherwise.
#include "launcher/rank_process.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace traceml::launcher {
namespace {

/// Everything `fd` gives until its end (0 from a pipe, EIO from a terminal's
/// master once the child closed it), within 20 s.
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (int waited = 0; waited < 200;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) == 0) {
      ++waited;
      continue;
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      break;
    }
  }
  return out;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const char* const kScript =
    "if [ -t 1 ]; then echo out:terminal; else echo out:pipe; fi; "
    "if [ -t 2 ]; then echo err:terminal >&2; else echo err:pipe >&2; fi; "
    "if [ -t 0 ]; then echo in:terminal; fi; "
    "if [ -t 1 ]; then stty -F /proc/self/fd/1 size; fi; "
    "printf 'a\\tb\\nlast line without newline'";

RankProcess spawn(const RankTerminal& t, std::string* warning = nullptr) {
  return spawn_rank("/bin/sh", {"sh", "-c", kScript}, {"PATH=/usr/bin:/bin"}, -1, t, warning);
}

TEST(RankProcess, AStreamAskedAsATerminalIsOneOfTheLaunchersSizeAndPassesBytesUnchanged) {
  RankTerminal t;
  t.out = true;
  t.rows = 40;
  t.cols = 150;
  std::string warning = "stale";
  RankProcess p = spawn(t, &warning);
  EXPECT_EQ(warning, "");
  EXPECT_TRUE(p.stdout_terminal);
  EXPECT_FALSE(p.stderr_terminal);
  const std::string out = read_all(p.stdout_read.get());
  const std::string err = read_all(p.stderr_read.get());
  EXPECT_EQ(wait_for(p.pid), 0);
  // No "\r\n" for "\n" (output processing is off), stdin is not the terminal.
  EXPECT_EQ(out, "out:terminal\n40 150\na\tb\nlast line without newline");
  EXPECT_EQ(err, "err:pipe\n");
}

TEST(RankProcess, BothStreamsCanBeTerminalsOfTheirOwn) {
  RankTerminal t;
  t.out = true;
  t.err = true;
  RankProcess p = spawn(t);
  EXPECT_TRUE(p.stdout_terminal);
  EXPECT_TRUE(p.stderr_terminal);
  const std::string out = read_all(p.stdout_read.get());
  const std::string err = read_all(p.stderr_read.get());
  EXPECT_EQ(wait_for(p.pid), 0);
  EXPECT_EQ(out.rfind("out:terminal\n", 0), 0u) << out;
  EXPECT_EQ(err, "err:terminal\n");
}

TEST(RankProcess, WithoutATerminalBothStreamsArePipes) {
  RankProcess p = spawn({});
  EXPECT_FALSE(p.stdout_terminal);
  EXPECT_FALSE(p.stderr_terminal);
  const std::string out = read_all(p.stdout_read.get());
  const std::string err = read_all(p.stderr_read.get());
  EXPECT_EQ(wait_for(p.pid), 0);
  EXPECT_EQ(out, "out:pipe\na\tb\nlast line without newline");
  EXPECT_EQ(err, "err:pipe\n");
}

// A line-buffered program's last lines, written just before it exits, are
// all read from the terminal's master before its end (EIO).
TEST(RankProcess, NothingWrittenJustBeforeExitIsLostOnATerminal) {
  RankTerminal t;
  t.out = true;
  RankProcess p = spawn_rank(
      "/bin/sh", {"sh", "-c", "i=0; while [ $i -lt 1000 ]; do echo line $i; i=$((i+1)); done"},
      {"PATH=/usr/bin:/bin"}, -1, t);
  ASSERT_TRUE(p.stdout_terminal);
  EXPECT_EQ(wait_for(p.pid), 0);  // exited before anything is read
  const std::string out = read_all(p.stdout_read.get());
  EXPECT_NE(out.find("line 0\n"), std::string::npos);
  EXPECT_NE(out.find("line 999\n"), std::string::npos) << out.size() << " bytes read";
}

}  // namespace
}  // namespace traceml::launcher
