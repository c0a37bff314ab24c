// A region at the bottom of a terminal that is redrawn in place, with other
// output scrolling above it (as cargo and pip draw their progress). Careful
// ANSI rather than ncurses: ncurses takes the whole screen (an alternate
// screen or a full repaint), while the ranks' own output must keep scrolling
// into the terminal's history as it would without traceml (docs/live.md).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace traceml::live {

/// Visible columns of a line: escape sequences take none, a UTF-8 character
/// one.
std::size_t visible_width(const std::string& s);
/// Cuts a line to `width` visible columns, keeping escape sequences whole
/// (and resetting colour after a cut).
std::string fit_line(const std::string& s, std::size_t width);

class Screen {
 public:
  /// Draws on `fd`, which must be a terminal (isatty).
  explicit Screen(int fd);
  /// end().
  ~Screen();
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  /// The terminal's columns and rows (TIOCGWINSZ); 80 x 24 when unknown.
  [[nodiscard]] std::pair<int, int> size() const;

  /// Replaces the region with `lines` (each at most the width less one,
  /// without newlines), first writing the lines queued by above().
  void draw(const std::vector<std::string>& lines);
  /// Queues a finished line (newline included) for `fd`, written above the
  /// region on the next draw() or flush(). False once the screen is broken or
  /// ended: the caller writes the line itself.
  bool above(int fd, std::string_view line);
  /// Writes the queued lines above the region and redraws it unchanged.
  void flush();
  /// Erases the region and shows the cursor again: the terminal is left as
  /// it was, with the queued lines written. Idempotent.
  void end();

  /// A write failed (the terminal went away): nothing more is drawn, and the
  /// caller should write its output itself.
  [[nodiscard]] bool broken() const { return broken_; }
  [[nodiscard]] bool ended() const { return ended_; }

  /// Queued bytes past which above() writes at once (a rank printing fast
  /// must not grow the launcher).
  static constexpr std::size_t kMaxQueuedBytes = std::size_t{256} * 1024;

 private:
  /// Moves to the region's first line and clears to the end of the screen.
  void erase(std::string& out) const;
  /// Writes all of `s` to `fd`; false (and broken_) when it cannot.
  bool write_all(int fd, std::string_view s);
  void repaint(bool redraw);

  int fd_;
  std::vector<std::string> lines_;
  std::size_t drawn_ = 0;  ///< lines of the region on the screen now
  int drawn_width_ = 0;
  std::vector<std::pair<int, std::string>> queued_;
  std::size_t queued_bytes_ = 0;
  bool broken_ = false;
  bool ended_ = false;
};

}  // namespace traceml::live
