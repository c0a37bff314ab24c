// The tracer's own cost on the training thread, measured in-process at init:
// the hot path of a typical step (one fetch, three phases, the step) is timed
// on a private recorder, so the number reported in the summary's `tracer`
// block is this machine's, not a figure from the docs.
#pragma once

namespace traceml::runtime {

/// Scopes in the calibration step: one fetch, three phases, the step itself.
inline constexpr int kCalibrationScopes = 5;

/// Nanoseconds of training-thread CPU per scope: the fastest of 15 rounds of
/// timing that step 200 times (contention only slows a round). Takes well
/// under a millisecond.
double calibrate_ns_per_scope();

}  // namespace traceml::runtime
