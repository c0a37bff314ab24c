// The stalls of two compared runs in words and JSON (DECISIONS 23): a few
// steps that hold most of one run's step-time finding move its mean step
// time while its median step stays, and compare names them rather than call
// a change of hundreds of percent noise, or a regression, without saying why.
#pragma once

#include <string>

#include "report/compare/compare_result.hpp"

namespace traceml::report {

/// "step 52 of R0 waited 6.0 s for input"; "steps 52 (6.0 s) and 180 (5.1 s)
/// of R0 waited for input".
std::string stalls_text(const StallsSeen& s);

/// The clause that tells the runs' stalls apart, or empty when neither has
/// any: "one stall in run B that run A has not (step 52 of R0 waited 6.0 s
/// for input)", "stalls in both runs (A: ...; B: ...)".
std::string stalls_difference(const StepTimeCompare& s);

/// ", which run B's stall decides (without it, input wait is 38% of its
/// step, not 93%)" when `changed_to`, run B's step-time diagnosis status, is
/// the finding its stalls hold; else empty.
std::string stalls_decide(const StepTimeCompare& s, const std::optional<std::string>& changed_to);

/// The `stalls` block of the compare JSON's step_time section: lhs and rhs,
/// each null or {kind, metric, rank, steps: [{step, value_ms}], share, share_without}.
Json stalls_json(const StepTimeCompare& s);

}  // namespace traceml::report
