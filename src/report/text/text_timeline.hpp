// The run's timeline in the text report (report/run_timeline.hpp): where
// timeline.json is, which steps it draws, and how to draw the others.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/summary_view.hpp"

namespace traceml::report {

/// The summary's timeline: which steps timeline.json draws.
struct TimelineShown {
  std::string file;  ///< "<run_dir>/timeline.json" as the report names it
  std::int64_t latest_first = 0, latest_last = 0, latest_steps = 0;
  std::optional<std::pair<std::int64_t, std::int64_t>> slow_window;
};

/// The summary's `timeline` object read, with `run_dir` as the report names
/// it; std::nullopt when it has none (or no run directory is named).
std::optional<TimelineShown> timeline_shown(const SummaryView& run, const std::string& run_dir);

/// Whether the timeline draws steps first..last.
bool timeline_draws(const TimelineShown& t, std::int64_t first, std::int64_t last);

/// "Timeline: <file> (ui.perfetto.dev): the latest N steps, A-B, and the
/// slow window, C-D." and the command that draws others, on a line of its
/// own so that it copies whole; nothing without a timeline.
std::vector<std::string> timeline_lines(const SummaryView& run, const std::string& run_dir,
                                        std::size_t width);

}  // namespace traceml::report
