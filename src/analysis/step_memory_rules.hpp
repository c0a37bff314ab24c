// Step Memory's diagnosis (spec §4.4): the rules (device pressure, cross-rank
// imbalance, creep) over each metric, their order, and the primary diagnosis —
// the first issue, or the neutral state the data allow. Private to the
// analysis module.
#pragma once

#include <vector>

#include "analysis/section.hpp"
#include "analysis/step_memory_section.hpp"
#include "analysis/step_memory_signals.hpp"

namespace traceml::analysis::step_memory {

/// The issues the rules raise over `metrics`, by (rule priority, -severity,
/// -score, metric name), stable.
std::vector<Issue> run_rules(const std::vector<MetricSignals>& metrics);

/// Spec §4.4: the first issue, else the neutral state the data allow.
StepMemoryPrimary choose_primary(bool no_gpu, const std::vector<MetricSignals>& metrics,
                                 const std::vector<Issue>& issues);

/// Spec §4.0: a neutral primary as issues[0].
Issue issue_from_primary(const StepMemoryPrimary& p);

}  // namespace traceml::analysis::step_memory
