// Step Time's rank comparison (spec §4.1.10): who arrives late at the
// collective, what that costs the typical rank, and which measured component
// (input wait, H2D, forward compute) explains the gap — and the issue that
// says so. Private to the analysis module.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/section.hpp"
#include "analysis/step_time_context.hpp"

namespace traceml::analysis::step_time {

/// Spec §4.1.10: who arrives late at the collective, and why.
struct Straggler {
  int culprit = 0, victim = 0;
  double visible_culprit = 0, visible_victim = 0, cost = 0, victim_step = 0, score = 0;
  std::vector<std::pair<std::string, double>> excesses;  // input, [h2d], [compute]
  std::vector<std::pair<std::string, double>> coverage;
  std::string component = "sync_or_unattributed";
  std::string visible_metric = "backward";
  std::optional<ActivityFacts> culprit_activity, victim_activity;  // issue 5
};

/// The evidence when the comparable ranks (Context::straggler_cohort) show a
/// straggler scoring at least kStragglerScoreWarn; nullopt otherwise.
std::optional<Straggler> straggler_evidence(const StepWindow& w, const Context& c);

/// The straggler rule's issue: INPUT_STRAGGLER, H2D_STRAGGLER or
/// COMPUTE_STRAGGLER when a component explains the gap, else STRAGGLER.
Issue straggler_issue(const Straggler& s);

}  // namespace traceml::analysis::step_time
