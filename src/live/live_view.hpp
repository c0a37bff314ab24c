// The live view of a run (traceml run --mode live): what each rank is doing
// now, the verdict so far, and the run's stalls. A model built from the
// collector's LiveStatus, then drawn as terminal lines or as one progress
// line for a log. Pure functions: the terminal itself is live/screen.hpp's.
// docs/live.md shows the view and says what each column means.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collector/collector.hpp"

namespace traceml::live {

/// One rank's row: where it is and how its latest steps split (the
/// collector's snapshot computes it, for the metrics endpoint too).
using RankRow = collector::RankRow;

struct LiveModel {
  std::string run_name;
  int world_size = 0;
  double elapsed_s = 0.0;
  std::vector<RankRow> ranks;
  std::string verdict;  ///< "INPUT-BOUND: input wait is ..."; empty before any step
  std::vector<model::Stall> stalls;
  std::int64_t dropped = 0;  ///< the tracers' dropped records, all ranks
  /// How old the snapshot's values are, in seconds (said once over
  /// kStaleAfterS: the collector's writer is behind, e.g. on a slow disk).
  double age_s = 0.0;
};

inline constexpr double kStaleAfterS = 3.0;

/// The model of the collector's latest snapshot: per rank its row from the
/// latest window, and the verdict of the same engine as the end of the run,
/// on that window. `world_size` 0: the snapshot's. `now_unix`: the time now
/// (the snapshot's age); 0: none said.
LiveModel build_model(const collector::LiveSnapshot& snapshot, const std::string& run_name,
                      int world_size, double elapsed_s, double now_unix = 0.0);

/// "R1 silent 12 s (last: step 812, backward)"; empty for a rank that runs.
std::string condition_text(const collector::RankLive& r);

/// Who the other ranks are waiting for, when the stalls say so:
/// "R0, R2 wait in backward, likely for R1"; empty otherwise.
std::string waiting_text(const LiveModel& m);

/// The hang now, when a rank is silent or stalled and has not resumed
/// (model::hung_stall: the one the others wait for first), with whom they
/// wait: "R1/N0 silent 12 s (last: step 812, backward); R0, R2 wait in
/// backward, likely for R1". Empty while no rank hangs. The view and the
/// progress line open with it (DECISIONS 15).
std::string hang_text(const LiveModel& m);

/// The view as lines of at most `width` visible columns and at most
/// `height` lines (the worst ranks first when they do not all fit). With
/// `color`, ANSI colours; without, plain ASCII.
std::vector<std::string> render_view(const LiveModel& m, int width, int height, bool color);

/// One line for a log (no terminal): elapsed, steps per rank, step time,
/// verdict so far, stalls.
std::string progress_line(const LiveModel& m);

}  // namespace traceml::live
