// Each rank's median step: the collector's live board measures stalls
// against it and the run's end weighs the tracer's overhead against it, so
// the two must mean the same step.
#pragma once

#include <map>

#include "model/telemetry.hpp"

namespace traceml::analysis {

/// Per rank of `t`: the median CPU step time in ms over the steps `t` holds
/// with a traced step time, input wait added where it was measured (the whole
/// step the user sees, not only its traced part). A rank without such a step
/// is absent.
std::map<int, double> median_step_ms(const model::Telemetry& t);

}  // namespace traceml::analysis
