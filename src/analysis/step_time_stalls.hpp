// One-off stalls in a phase share (DECISIONS 23): whether a few steps hold
// most of the share a phase-share finding quotes (one 6 s input stall in 300
// steps of 2.5 ms makes input wait 89% of the mean step while the median
// step waits 0.1 ms). The finding's kind stays TraceML's; the evidence says
// which steps, so that the text names them instead of "the typical step" and
// compare can tell a stall from a change. Private to the analysis module.
#pragma once

#include "analysis/section.hpp"
#include "analysis/step_window.hpp"

namespace traceml::analysis::step_time {

/// When at most kStallStepsMax steps of each rank, each a stall (at least
/// kStallStepFactor times the rank's median step), hold at least
/// kStallsHoldShare of `issue`'s share (INPUT_BOUND, H2D_BOUND,
/// RESIDUAL_HEAVY; any other kind is left alone), adds to its evidence
/// `stalls`: metric ("input_wait_ms", ...), share (the typical rank's, over
/// every step), share_without (without those steps), steps (the stalls of
/// the rank with the largest: rank, step, value_ms, step_time_ms; largest
/// first), median_value_ms and median_step_time_ms (that rank's medians over
/// the window).
void add_stalls(const StepWindow& w, Issue& issue);

}  // namespace traceml::analysis::step_time
