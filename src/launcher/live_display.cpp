#include "launcher/live_display.hpp"

#include <unistd.h>

#include <iostream>

#include "live/live_view.hpp"
#include "live/screen.hpp"

namespace traceml::launcher {

LiveDisplay::LiveDisplay(collector::Collector& collector, std::string run_name, int world_size,
                         bool terminal)
    : collector_(collector),
      run_name_(std::move(run_name)),
      world_size_(world_size),
      started_(std::chrono::steady_clock::now()),
      next_(started_ + (terminal ? std::chrono::milliseconds(0) : kProgressEvery)) {
  if (terminal) screen_ = std::make_unique<live::Screen>(STDOUT_FILENO);
}

LiveDisplay::~LiveDisplay() {
  end();
}

bool LiveDisplay::line(bool to_stderr, std::string_view line) {
  if (!on_ || !screen_) return false;
  return screen_->above(to_stderr ? STDERR_FILENO : STDOUT_FILENO, line);
}

void LiveDisplay::tick() {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) {
    if (screen_) screen_->flush();  // the ranks' lines now, the view as it was
    return;
  }
  next_ = now + (screen_ ? kViewRefresh : kProgressEvery);
  // The live view must never cost the run: whatever fails turns it off.
  try {
    refresh();
  } catch (const std::exception& e) {
    turn_off(e.what());
  }
}

void LiveDisplay::refresh() {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  // The collector's latest snapshot (a served run learns its world size
  // from the ranks: the snapshot's, when world_size_ is 0).
  const live::LiveModel m = live::build_model(
      *collector_.latest_snapshot(), run_name_, world_size_, elapsed,
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  if (!screen_) {
    std::cerr << live::progress_line(m) << "\n" << std::flush;
    return;
  }
  const auto [width, height] = screen_->size();
  // A line less than the width (no terminal wraps it) and a row less than
  // the height (the region never scrolls its own first line away).
  screen_->draw(live::render_view(m, width - 1, height - 1, true));
  if (screen_->broken()) turn_off("the terminal cannot be written");
}

void LiveDisplay::turn_off(const char* why) {
  on_ = false;
  if (screen_) screen_->end();
  std::cerr << "traceml: warning: live view off (" << why << "); the run goes on\n";
}

void LiveDisplay::end() {
  if (screen_) screen_->end();
  on_ = false;
}

}  // namespace traceml::launcher
