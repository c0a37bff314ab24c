// The live view's terminal layer on a real pseudo-terminal: frames replace
// each other in place, lines queued for above the region come before it, no
// drawn line is wider than the terminal is now (also when the lines were made
// for a wider one), a narrower terminal clears the screen once, and end()
// leaves the cursor shown and the region erased.
#include "live/screen.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

namespace traceml::live {
namespace {

/// A pseudo-terminal: the Screen draws on its slave side, the test reads
/// what a terminal would receive from the master side.
class Pty {
 public:
  Pty() {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY);
    if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0) return;
    slave_ = ::open(::ptsname(master_), O_RDWR | O_NOCTTY);
    // Raw: the bytes arrive as written (no "\n" to "\r\n").
    termios t{};
    if (slave_ >= 0 && ::tcgetattr(slave_, &t) == 0) {
      ::cfmakeraw(&t);
      ::tcsetattr(slave_, TCSANOW, &t);
    }
  }
  ~Pty() {
    if (slave_ >= 0) ::close(slave_);
    if (master_ >= 0) ::close(master_);
  }
  [[nodiscard]] bool ok() const { return slave_ >= 0; }
  [[nodiscard]] int slave() const { return slave_; }
  void size(int cols, int rows) const {
    winsize ws{};
    ws.ws_col = static_cast<unsigned short>(cols);
    ws.ws_row = static_cast<unsigned short>(rows);
    ::ioctl(master_, TIOCSWINSZ, &ws);
  }
  /// Everything written so far.
  std::string take() const {
    std::string out;
    char buf[4096];
    pollfd p{master_, POLLIN, 0};
    while (::poll(&p, 1, 50) > 0) {
      const ssize_t n = ::read(master_, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, std::size_t(n));
    }
    return out;
  }

 private:
  int master_ = -1;
  int slave_ = -1;
};

/// The visible lines of a write: escape sequences removed, split at CR LF.
std::vector<std::string> drawn_lines(const std::string& bytes) {
  const std::string plain = std::regex_replace(bytes, std::regex("\x1b\\[[0-9;?]*[A-Za-z]"), "");
  std::vector<std::string> out;
  std::string line;
  for (char c : plain) {
    if (c == '\n') {
      out.push_back(line);
      line.clear();
    } else if (c != '\r') {
      line += c;
    }
  }
  if (!line.empty()) out.push_back(line);
  return out;
}

TEST(Screen, FramesReplaceEachOtherAndQueuedLinesGoAbove) {
  Pty pty;
  ASSERT_TRUE(pty.ok());
  pty.size(80, 24);
  Screen s(pty.slave());
  EXPECT_EQ(s.size(), std::make_pair(80, 24));
  s.draw({"frame one a", "frame one b"});
  const std::string first = pty.take();
  EXPECT_NE(first.find("\x1b[?25l"), std::string::npos);  // cursor hidden
  EXPECT_NE(first.find("frame one a\r\nframe one b"), std::string::npos) << first;
  ASSERT_TRUE(s.above(pty.slave(), "[rank0]: hello\n"));
  s.draw({"frame two"});
  const std::string second = pty.take();
  // Back to the region's first line, cleared, the queued line, the new frame.
  const auto erase = second.find("\r\x1b[1A\x1b[J");
  const auto hello = second.find("[rank0]: hello\n");
  const auto frame = second.find("frame two");
  ASSERT_NE(erase, std::string::npos) << second;
  EXPECT_LT(erase, hello);
  EXPECT_LT(hello, frame);
  s.end();
  const std::string last = pty.take();
  EXPECT_NE(last.find("\r\x1b[J"), std::string::npos) << last;
  EXPECT_NE(last.find("\x1b[?25h"), std::string::npos) << last;  // cursor shown
  EXPECT_FALSE(s.above(pty.slave(), "late\n"));                  // the caller writes it itself now
}

TEST(Screen, LinesMadeForAWiderTerminalAreCutToTheNarrowerOne) {
  Pty pty;
  ASSERT_TRUE(pty.ok());
  pty.size(150, 30);
  Screen s(pty.slave());
  const std::string wide(140, 'x');
  s.draw({"\x1b[1mhead\x1b[0m " + wide, wide});
  pty.take();
  pty.size(100, 30);
  // Only queued lines, no new frame: the old lines are redrawn, cut.
  ASSERT_TRUE(s.above(pty.slave(), "[rank0]: between frames\n"));
  s.flush();
  const std::string bytes = pty.take();
  EXPECT_NE(bytes.find("\x1b[2J"), std::string::npos) << "a narrower terminal is cleared once";
  for (const std::string& line : drawn_lines(bytes))
    EXPECT_LE(line.size(), 99u) << line;
  // The next repaint at the same width only erases the region: 2 lines.
  ASSERT_TRUE(s.above(pty.slave(), "[rank0]: again\n"));
  s.flush();
  const std::string again = pty.take();
  EXPECT_EQ(again.find("\x1b[2J"), std::string::npos) << again;
  EXPECT_NE(again.find("\r\x1b[1A\x1b[J"), std::string::npos) << again;
}

TEST(Screen, FitLineKeepsColoursWholeAndCountsCharactersNotBytes) {
  EXPECT_EQ(fit_line("abcdef", 4), "abcd");
  EXPECT_EQ(fit_line("\x1b[31mabcdef\x1b[0m", 3), "\x1b[31mabc\x1b[0m");
  EXPECT_EQ(fit_line("ab\xc2\xb7"
                     "cd",
                     3),
            "ab\xc2\xb7");  // '·' is one column
  EXPECT_EQ(visible_width("\x1b[1;31mab\x1b[0m"), 2u);
  EXPECT_EQ(fit_line("short", 10), "short");
}

}  // namespace
}  // namespace traceml::live
