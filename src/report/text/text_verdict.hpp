// The report's verdict in words (Verdict / Why / Next, the §5.8 line after
// Next, the degraded "Observed anyway" line): the one place that turns a
// primary diagnosis kind into sentences.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/summary_view.hpp"

namespace traceml::report {

struct Verdict {
  std::string display;  ///< "INPUT STRAGGLER"; "n/a" without a primary diagnosis
  std::string why;
  std::string next;
  std::optional<std::string> culprit_metric;  ///< tree row the marker goes on
  std::string marker;                         ///< "◀ cause" / "◀ 67x"
  bool degraded = false;                      ///< no step diagnosis (INSUFFICIENT_STEP_TIME_DATA)
};

Verdict read_verdict(const SummaryView& run);

/// The slow window on the Next line (docs/timeline.md "The slow window"): a
/// sentence, and the command that draws those steps (`run_dir` as the report
/// names it; empty: "RUN_DIR").
struct SlowWindowNext {
  std::string sentence;
  std::string command;
  /// How to see those steps' operators on the next run (--profile-steps),
  /// when no profile of the run covers them; empty otherwise.
  std::string profile;
};
/// Said only when the window is notably slower than its rank's median step.
std::optional<SlowWindowNext> slow_window_next(const SummaryView& run, const std::string& run_dir);

/// §5.8 "after Next": the Supporting line, or the all-normal line.
std::vector<std::string> after_next_lines(const SummaryView& run);

/// The run's profiles (--profile-steps; the summary's `profiles`): a line
/// that says what opens them, then one line each, its path under `run_dir`
/// as the report names it (never wrapped, so that it copies whole), or why
/// it failed. At most 8, then how many more. Empty without profiles.
std::vector<std::string> profile_lines(const SummaryView& run, const std::string& run_dir);

/// §5.8 degraded line: what the host showed even without a step diagnosis.
std::vector<std::string> observed_anyway_lines(const SummaryView& run);

}  // namespace traceml::report
