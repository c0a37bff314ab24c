// Step Time's context (spec §4.1.9): what the rules read about the window —
// the typical input wait, traced step and step time, the cross-rank skews,
// the largest compute phase, the phase shares and the ranks the straggler
// rule may compare — and the small helpers the rules share. Private to the
// analysis module.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/h2d_advice.hpp"
#include "analysis/section.hpp"
#include "analysis/step_window.hpp"
#include "analysis/thresholds.hpp"

namespace traceml::analysis::step_time {

// Short names every Step Time file uses.
namespace th = thresholds;
namespace ev = evidence;
using SM = StepMetric;
using K = DiagnosisKind;

/// Spec §4.1.9.
struct Context {
  bool single_rank = true;
  double input_total = 0, traced_total = 0, step_total = 0;
  std::optional<int> input_worst_rank;
  std::optional<double> input_skew, compute_skew;
  std::string largest_compute = "compute";  ///< the phase word, lower case (spec §4.1.11)
  std::optional<int> overall_worst_rank;
  std::optional<double> input_share, h2d_share, compute_share, residual_share;
  std::vector<const RankFacts*> straggler_cohort;
};

Context build_context(const StepWindow& w);

/// `v` when finite and above 0, else 0: an absent or unusable average adds
/// nothing to a sum or a difference.
double finite_or_zero(std::optional<double> v);

/// A rank's per-step H2D copies, as pageable_advice reads them.
H2dCopies h2d_copies(const ActivityFacts& a);

/// Issue 5: the H2D copies of the rank an H2D finding names, per step, from
/// its GPU activity records (appended to the finding's evidence).
void add_h2d_activity(Json& evidence, const ActivityFacts& a);

}  // namespace traceml::analysis::step_time
