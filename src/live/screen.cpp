#include "live/screen.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace traceml::live {

namespace {

// Terminals that know "synchronized output" (mode 2026) show the frame at
// once; the others ignore the private mode.
constexpr const char* kSyncBegin = "\x1b[?2026h";
constexpr const char* kSyncEnd = "\x1b[?2026l";
constexpr const char* kHideCursor = "\x1b[?25l";
constexpr const char* kShowCursor = "\x1b[?25h";

}  // namespace

std::size_t visible_width(const std::string& s) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {
      while (i < s.size() && s[i] != 'm')
        ++i;
      continue;
    }
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string fit_line(const std::string& s, std::size_t width) {
  if (visible_width(s) <= width) return s;
  std::string out;
  std::size_t n = 0;
  bool escaped = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {
      escaped = true;
      const std::size_t end = s.find('m', i);
      const std::size_t stop = end == std::string::npos ? s.size() : end + 1;
      out.append(s, i, stop - i);
      i = stop - 1;
      continue;
    }
    const bool starts_char = (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    if (starts_char && n == width) break;
    if (starts_char) ++n;
    out += s[i];
  }
  if (escaped) out += "\x1b[0m";
  return out;
}

Screen::Screen(int fd) : fd_(fd) {}

Screen::~Screen() {
  end();
}

std::pair<int, int> Screen::size() const {
  winsize ws{};
  if (::ioctl(fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
    return {int(ws.ws_col), int(ws.ws_row)};
  return {80, 24};
}

bool Screen::write_all(int fd, std::string_view s) {
  while (!broken_ && !s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n >= 0) {
      s.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
    } else if (errno != EINTR) {
      broken_ = true;  // EIO after a hang-up, EPIPE: the terminal is gone
    }
  }
  return !broken_;
}

void Screen::erase(std::string& out) const {
  if (drawn_ == 0) return;
  out += '\r';
  if (drawn_ > 1) out += "\x1b[" + std::to_string(drawn_ - 1) + "A";
  out += "\x1b[J";
}

void Screen::repaint(bool redraw) {
  if (broken_ || ended_) return;
  const int width = size().first;
  std::string out = kSyncBegin;
  if (drawn_ > 0 && width < drawn_width_) {
    // A narrower terminal has re-wrapped the region's lines: where it begins
    // is unknown, so the screen is cleared rather than overdrawn.
    out += "\x1b[2J\x1b[H";
  } else {
    erase(out);
  }
  if (drawn_ == 0) out += kHideCursor;
  // Queued lines go to their own descriptor (a rank's stderr to ours), so
  // the region is erased first, then they are written, then it is redrawn.
  if (!queued_.empty()) {
    if (!write_all(fd_, out)) return;
    out.clear();
    for (const auto& [fd, line] : queued_)
      if (!write_all(fd, line)) return;
    queued_.clear();
    queued_bytes_ = 0;
  }
  if (redraw) {
    // Cut to the terminal as it is now, not as it was when the lines were
    // made: a line that wrapped would take rows that erase() does not count.
    const auto room = static_cast<std::size_t>(std::max(width - 1, 1));
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      if (i > 0) out += "\r\n";
      out += fit_line(lines_[i], room);
    }
    drawn_ = lines_.size();
    drawn_width_ = width;
  } else {
    drawn_ = 0;
    out += kShowCursor;
  }
  out += kSyncEnd;
  write_all(fd_, out);
}

void Screen::draw(const std::vector<std::string>& lines) {
  lines_ = lines;
  repaint(true);
}

bool Screen::above(int fd, std::string_view line) {
  if (broken_ || ended_) return false;
  queued_.emplace_back(fd, std::string(line));
  queued_bytes_ += line.size();
  if (queued_bytes_ >= kMaxQueuedBytes) flush();
  return true;
}

void Screen::flush() {
  if (queued_.empty()) return;
  repaint(true);
}

void Screen::end() {
  if (ended_) return;
  if (!broken_) repaint(false);
  ended_ = true;
}

}  // namespace traceml::live
