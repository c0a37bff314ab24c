// A batch job's log shows a hang while it happens: one stderr line when a
// rank turns silent or stalled, and one when it resumes, rate-limited. For
// `traceml run` and `traceml serve` in every mode but the live view (which
// draws its stalls itself).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "model/position.hpp"

namespace traceml::launcher {

class StallLines {
 public:
  using Clock = std::chrono::steady_clock;
  /// At most this many lines every kWindow; the ones over it are counted
  /// and said with the next line that goes out.
  static constexpr std::size_t kLinesPerWindow = 4;
  static constexpr std::chrono::seconds kWindow{10};

  explicit StallLines(std::function<void(const std::string&)> say) : say_(std::move(say)) {}

  /// The run's stalls so far (collector::Collector::stalls()), in the order
  /// they began: says what changed since the last call.
  void update(const std::vector<model::Stall>& stalls, Clock::time_point now);

 private:
  void emit(const std::string& line, Clock::time_point now);

  std::function<void(const std::string&)> say_;
  std::size_t told_open_ = 0;            // stalls whose start was said
  std::vector<bool> told_resumed_;       // per stall said open: its end said
  std::vector<Clock::time_point> sent_;  // when the lines of the window went out
  std::size_t held_back_ = 0;
};

/// "R1 turned silent at step 1254 (backward)" for a stall just seen.
std::string stall_opened_line(const model::Stall& s);

}  // namespace traceml::launcher
