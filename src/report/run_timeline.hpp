// The timeline every run writes beside its summary (issue 47):
// RUN_DIR/timeline.json, the run's latest steps and its slow window as a
// Chrome trace (report/chrome_trace.hpp) that opens in ui.perfetto.dev,
// bounded so that the end of a run stays quick and the file small; the
// summary's added `timeline` key says which steps it holds, and the text how
// to export the others (docs/timeline.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/step_window.hpp"
#include "model/telemetry.hpp"
#include "report/chrome_trace.hpp"

namespace traceml::report {

/// The file's name in the run directory.
inline constexpr const char* kTimelineFileName = "timeline.json";
/// Rank-steps the run's timeline draws at most (about 0.8 KB each): the
/// latest 1,000 steps of up to 8 ranks, fewer of more ranks (64 ranks: 125),
/// so that the file stays near 7 MB and is written while the page draws
/// (0.1 s for 64 ranks on 2 cores: docs/performance.md "The end of a run").
inline constexpr std::int64_t kTimelineRankSteps = 8000;
/// The latest steps it draws of any number of ranks, at least, and at most.
inline constexpr std::int64_t kTimelineMinSteps = 50;
inline constexpr std::int64_t kTimelineMaxSteps = 1000;

/// The steps a run's timeline draws.
struct TimelinePlan {
  std::vector<StepRange> ranges;  ///< ascending, not overlapping: what is drawn
  StepRange latest;               ///< the latest aligned steps
  std::int64_t latest_steps = 0;  ///< how many aligned steps `latest` holds
  /// The slow window (step_time.global.slow_window), drawn too when it lies
  /// before the latest steps; absent when the summary has none.
  std::optional<StepRange> slow_window;
  std::int64_t aligned_steps = 0;  ///< aligned steps of the analysed window
};

/// The plan for the aligned window `w` with `slow_window` (the summary's
/// step_time.global.slow_window object, or null); std::nullopt when no step
/// aligns.
std::optional<TimelinePlan> plan_run_timeline(const analysis::StepWindow& w,
                                              const nlohmann::ordered_json* slow_window);

/// The summary's `timeline` object (an added key): file, steps ("A:B" or
/// "A:B,C:D"), latest_steps, slow_window ("C:D" or null), aligned_steps.
nlohmann::ordered_json timeline_json(const TimelinePlan& plan);

/// The profiles of `run_dir` (profiles/, --profile-steps) whose steps meet
/// `ranges`, their operators read (at most 2^21 of them in all), to draw
/// under their ranks' steps.
std::vector<RankProfile> profiles_meeting(const std::string& run_dir,
                                          const std::vector<StepRange>& ranges);

/// Writes RUN_DIR/timeline.json atomically (report::write_file_atomic): the
/// plan's ranges of `t` with the run's profiles; the one-line reason when it
/// could not be written (an older timeline is then removed: it would be
/// another run's), else std::nullopt.
std::optional<std::string> write_run_timeline(const std::string& run_dir, const model::Telemetry& t,
                                              const TimelinePlan& plan,
                                              const std::string& producer);

}  // namespace traceml::report
