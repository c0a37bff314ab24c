// A run's steps as a timeline: Chrome trace event JSON (the "JSON Array/Object
// Format" that ui.perfetto.dev and chrome://tracing open), written by
// `traceml export RUN_DIR --format chrome-trace`. Layout: docs/timeline.md.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "model/telemetry.hpp"

namespace traceml::report {

/// Steps A..B, both included (1 <= A <= B).
struct StepRange {
  std::int64_t first = 1;
  std::int64_t last = 1;
};

/// Parses "A:B" (1 <= A <= B); std::nullopt and `error` set when it is not one.
std::optional<StepRange> parse_step_range(const std::string& text, std::string& error);

/// Steps a timeline shows when none are asked for: the latest `max_steps` of
/// the analysed window (the steps every rank reported among its latest
/// `window`, as the diagnosis aligns them); std::nullopt when no step aligns.
std::optional<StepRange> default_timeline_steps(const model::Telemetry& t, std::int64_t window,
                                                std::int64_t max_steps);

/// What write_chrome_trace wrote.
struct TimelineStats {
  std::int64_t ranks = 0;           ///< ranks with a step in the range
  std::int64_t steps = 0;           ///< step rows drawn (a rank's step once: the later row wins)
  std::int64_t events = 0;          ///< trace events, metadata included
  bool gpu = false;                 ///< some step had GPU-clock durations (a track of their own)
  std::int64_t recorded_steps = 0;  ///< steps drawn where their phases began, as recorded
  std::int64_t inferred_steps = 0;  ///< steps without begins: phases placed back to back
  std::int64_t threads = 0;         ///< the most traced threads of one rank
  std::int64_t profile_ops = 0;     ///< LibTorch operators drawn (RankProfile)
};

/// A rank's profiled operators (report/profile_trace: --profile-steps), to
/// draw under its steps.
struct RankProfile {
  int rank = 0;
  std::vector<model::ProfileOp> ops;
};

/// Writes the steps of `range` of every rank as a Chrome trace, a track per
/// traced thread (and one more for the GPU clock). A step is a slice that
/// ends at its timestamp; its phases are slices inside it, each from where
/// it began as the rank recorded it (telemetry format 2, protocol 3). Steps
/// recorded without begins (older data) have their phases placed one after
/// the other in the order a step runs them, which the trace's metadata and
/// those steps' args say. Counters: step memory peaks, process and system
/// samples within the steps' time span.
/// The operators of `profiles` that fall inside the drawn steps' span go
/// on tracks of their own under their rank's steps, one per profiler thread
/// ("operators (LibTorch profiler, thread N)"), at their recorded times (the
/// profile's clock is the steps' clock).
TimelineStats write_chrome_trace(const model::Telemetry& t, StepRange range,
                                 const std::string& producer, std::ostream& out,
                                 const std::vector<RankProfile>& profiles = {});
/// The same over several ranges of steps (ascending, not overlapping): the
/// latest steps and the slow window, say. Counters are drawn within each
/// range's time span; the metadata's `steps` reads "A:B,C:D".
TimelineStats write_chrome_trace(const model::Telemetry& t, const std::vector<StepRange>& ranges,
                                 const std::string& producer, std::ostream& out,
                                 const std::vector<RankProfile>& profiles = {});
/// "A:B" or "A:B,C:D": ranges as the trace's metadata and the report write them.
std::string ranges_text(const std::vector<StepRange>& ranges);

}  // namespace traceml::report
