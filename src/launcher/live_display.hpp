// What `traceml run --mode live` shows while the ranks run: on a terminal,
// the live view redrawn in place below the ranks' output; without one (a
// pipe, a CI log), a progress line on stderr every 10 s. It runs on the
// launcher's thread (launcher::OutputHook), or on `traceml serve`'s loop, and
// never stops the run: anything that goes wrong turns it off with one warning.
// Part of the hosted run (hosted_run.hpp); live/ stays private to launcher.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "collector/collector.hpp"
#include "launcher/launch.hpp"

namespace traceml::live {
class Screen;
}  // namespace traceml::live

namespace traceml::launcher {

class LiveDisplay final : public OutputHook {
 public:
  /// How often each form refreshes.
  static constexpr std::chrono::milliseconds kViewRefresh{1000};
  static constexpr std::chrono::milliseconds kProgressEvery{10000};

  /// `terminal`: stdout is a terminal (the view); else progress lines.
  /// `world_size` 0: the one the collector learns from the ranks.
  LiveDisplay(collector::Collector& collector, std::string run_name, int world_size, bool terminal);
  ~LiveDisplay() override;

  bool line(bool to_stderr, std::string_view line) override;
  void tick() override;
  /// The ranks ended: the view is erased (the summary follows).
  void end();

 private:
  void refresh();
  void turn_off(const char* why);

  collector::Collector& collector_;
  std::string run_name_;
  int world_size_;
  std::unique_ptr<live::Screen> screen_;  ///< null: progress lines (or off)
  bool on_ = true;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point next_;
};

}  // namespace traceml::launcher
