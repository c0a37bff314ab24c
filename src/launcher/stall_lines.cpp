#include "launcher/stall_lines.hpp"

#include <algorithm>

#include "analysis/number_format.hpp"

namespace traceml::launcher {

namespace {

std::string where(const model::Stall& s) {
  std::string w = "step " + std::to_string(s.step);
  if (s.phase) w += ", " + std::string(model::loop_phase_name(*s.phase));
  return w;
}

}  // namespace

std::string stall_opened_line(const model::Stall& s) {
  const std::string rank = "R" + std::to_string(s.global_rank);
  std::string line = s.kind == "silent"
                         ? rank + " turned silent: nothing heard for " +
                               analysis::fixed(s.duration_s, 1) + " s (last heard at " + where(s) +
                               ")"
                         : rank + " has been stalled for " + analysis::fixed(s.duration_s, 1) +
                               " s at " + where(s);
  if (s.others_waiting && *s.others_waiting > 0)
    line += "; " + std::to_string(*s.others_waiting) +
            (*s.others_waiting == 1 ? " rank waits" : " ranks wait") + " for it";
  return line;
}

void StallLines::emit(const std::string& line, Clock::time_point now) {
  sent_.erase(std::remove_if(sent_.begin(), sent_.end(),
                             [&](Clock::time_point t) { return now - t >= kWindow; }),
              sent_.end());
  if (sent_.size() >= kLinesPerWindow) {
    ++held_back_;
    return;
  }
  sent_.push_back(now);
  std::string out = "traceml: " + line;
  if (held_back_ > 0) {
    out += " (and " + std::to_string(held_back_) + " more stall change" +
           (held_back_ == 1 ? "" : "s") + " not shown)";
    held_back_ = 0;
  }
  say_(out);
}

void StallLines::update(const std::vector<model::Stall>& stalls, Clock::time_point now) {
  for (; told_open_ < stalls.size(); ++told_open_) {
    const model::Stall& s = stalls[told_open_];
    // One that began and ended between two looks is said as it ended.
    if (!s.resumed) emit(stall_opened_line(s), now);
    told_resumed_.push_back(s.resumed);
    if (s.resumed)
      emit("R" + std::to_string(s.global_rank) + " was " + s.kind + " for " +
               analysis::fixed(s.duration_s, 1) + " s at " + where(s) + " and resumed",
           now);
  }
  for (std::size_t i = 0; i < told_open_; ++i) {
    if (told_resumed_[i] || !stalls[i].resumed) continue;
    told_resumed_[i] = true;
    emit("R" + std::to_string(stalls[i].global_rank) + " resumed after " +
             analysis::fixed(stalls[i].duration_s, 1) + " s " + stalls[i].kind,
         now);
  }
}

}  // namespace traceml::launcher
