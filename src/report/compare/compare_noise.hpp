// Is a step-time change between two runs beyond run-to-run noise?
// (DECISIONS 12; docs/compare.md "Run-to-run noise".)
//
// Two tests, both required for "beyond noise":
//  * the rank test: a two-sided Mann-Whitney U test on the two runs' per-step
//    distributions (the sketches of `step_time.global.spread.step_time_<clock>_ms`),
//    p below kCompareAlpha, in the direction of the shift;
//  * the band: the median shift is larger than the larger interquartile range
//    of the two runs (a std scaled to an IQR when that is all a run reports).
// Per-step samples of one run do not see what changes between runs (machine
// state, placement, clocks), so significance alone would flag every pair of
// runs of one configuration on a shared machine; the band is the practical
// threshold. A summary without sketches (TraceML's, older ours) gets the band
// alone; without a band either, the noise block is unavailable and compare
// falls back to TraceML's raw percentage rule.
#pragma once

#include <optional>
#include <string>

#include "report/compare/compare_result.hpp"

namespace traceml::report {

/// The noise decision of `sections.step_time`. `lhs`/`rhs` are the
/// summaries' step_time sections (nullptr when absent), `clock` the comparison
/// clock, `step_metric` the compare's `step_time_ms` metric (for the mean delta).
NoiseDecision step_time_noise(const Json* lhs, const Json* rhs,
                              const std::optional<std::string>& clock,
                              const MetricDelta& step_metric);

/// The median step on `clock` of a step_time section (its spread), if given.
std::optional<double> median_step_ms(const Json* sec, const std::string& clock);

/// Whether the noise decision lets a change in this direction count: true
/// when it says the shift is beyond noise that way, or when it is
/// unavailable (then the raw threshold decides alone, as in TraceML).
bool change_counts(const NoiseDecision& noise, bool slower);

/// The evidence in one clause, for the text, the gate and JUnit, e.g.
/// "Mann-Whitney U p=0.41 (alpha 0.05), n=300/300 steps; median shift +0.4 ms,
/// IQR band 0.7 ms". Empty when the decision is unavailable.
std::string noise_evidence(const NoiseDecision& noise);

/// The `noise` block of the compare JSON.
Json noise_json(const NoiseDecision& noise);

}  // namespace traceml::report
