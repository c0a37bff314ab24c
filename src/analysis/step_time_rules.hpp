// Step Time's rules (spec §4.1.11), in order: the straggler rule on several
// ranks, then the phase shares — input-bound, H2D-bound, residual-heavy — and
// compute-bound when none of those is high. Private to the analysis module.
#pragma once

#include <optional>
#include <vector>

#include "analysis/section.hpp"
#include "analysis/step_time_context.hpp"
#include "analysis/step_time_straggler.hpp"

namespace traceml::analysis::step_time {

/// The issues of the five rules of spec §4.1.11 that fire, in rule order.
std::vector<Issue> run_rules(const StepWindow& w, const Context& c,
                             const std::optional<Straggler>& straggler);

}  // namespace traceml::analysis::step_time
