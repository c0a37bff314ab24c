// From the window to the issue list: what the data allow before any rule,
// the rules' issues capped and ordered, the neutral primary when none fired.
#include "analysis/step_time_diagnosis.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/step_time_context.hpp"
#include "analysis/step_time_missing.hpp"
#include "analysis/step_time_rules.hpp"
#include "analysis/step_time_stalls.hpp"
#include "analysis/step_time_straggler.hpp"
#include "analysis/thresholds.hpp"
#include "analysis/trend.hpp"

namespace traceml::analysis::step_time {

namespace {

/// Spec §4.1.14: a sentence about the direction of the primary's metric, or
/// nothing. Written into the primary issue's evidence as `trend` (DECISIONS 7).
std::optional<std::string> trend_note(const StepWindow& w, const Context& c, const Issue& primary,
                                      SeriesCache& series) {
  if (w.steps_used() < th::kTrendMinAlignedSteps) return std::nullopt;
  auto evaluate = [&](SM m) { return compute_trend(series.get(m)); };
  const std::optional<K> k = kind_from_name(primary.kind);
  if ((k == K::InputBound || k == K::InputStraggler) && c.input_share) {
    const auto t = evaluate(SM::InputWait);
    if (const auto st = t ? trend_state(t->pct) : std::nullopt) {
      return "Trend: input wait is " + *st + " (" + format_trend_pct(*t->pct) + ").";
    }
    return std::nullopt;
  }
  if (k == K::ComputeBound || k == K::ComputeStraggler || k == K::H2dStraggler ||
      k == K::Straggler) {
    const auto t = evaluate(SM::StepTime);
    if (const auto st = t ? trend_state(t->pct) : std::nullopt) {
      return "Trend: step time is " + *st + " (" + format_trend_pct(*t->pct) + ").";
    }
    return std::nullopt;
  }
  if (k == K::ResidualHeavy && c.residual_share) {
    const auto t = evaluate(SM::Residual);
    if (const auto st = t ? trend_state(t->pct) : std::nullopt) {
      return "Trend: residual time is " + *st + " (" + format_trend_pct(*t->pct) + ").";
    }
    return std::nullopt;
  }
  if (k == K::Balanced) {
    const bool near = (c.residual_share && *c.residual_share >= th::kTrendBalancedShareHint) ||
                      (c.input_share && *c.input_share >= th::kTrendBalancedShareHint);
    if (!near) return std::nullopt;
    const auto t = evaluate(SM::StepTime);
    const auto st = t ? trend_state(t->pct) : std::nullopt;
    if (st && *st == "worsening")
      return "Trend: step time is rising (" + format_trend_pct(*t->pct) + ").";
  }
  return std::nullopt;
}

Issue neutral(K kind, const std::string& summary, const std::string& action) {
  return issue_of(kind, Severity::Info, summary, action);
}

/// Neutral issues built by the generic conversion of spec §4.0: the primary's
/// other non-null fields as evidence, keys sorted (steps_used, worst_rank).
Issue generic_neutral(Issue i, std::int64_t steps_used, std::optional<int> worst_rank) {
  i.evidence = Json::object();
  i.evidence[ev::kStepsUsed] = steps_used;
  if (worst_rank) {
    i.evidence[ev::kWorstRank] = *worst_rank;
    i.ranks = {*worst_rank};
  }
  return i;
}

}  // namespace

std::vector<Issue> diagnose(const StepWindow& w, SeriesCache& series) {
  const Context c = build_context(w);
  const auto straggler = straggler_evidence(w, c);
  const auto& step_stat = w.stat(SM::StepTime);
  const std::int64_t steps = w.steps_used();
  const char* const kWaitAction = "Wait for the first complete window.";

  if (!step_stat) {
    const Missing miss = missing_signals(w, c, straggler);
    if (!miss.names.empty()) return {incomplete_data_issue(miss)};
    Issue i = neutral(K::NoData, "Step Time metric is missing.", kWaitAction);
    i.evidence = Json{{ev::kStepsUsed, 0}};
    return {i};
  }
  const double step_total =
      c.single_rank ? finite_or_zero(step_stat->worst) : finite_or_zero(step_stat->median);
  if (step_total <= 0) {
    return {generic_neutral(neutral(K::NoData, "No usable step-time data yet.", kWaitAction), steps,
                            step_stat->worst_rank)};
  }
  if (steps < th::kMinStepsForWarningDiag) {
    const std::string unit = steps == 1 ? "step" : "steps";
    return {generic_neutral(neutral(K::Warmup,
                                    "Only " + std::to_string(steps) + " " + unit +
                                        " per rank available; diagnosis "
                                        "requires " +
                                        std::to_string(th::kMinStepsForWarningDiag) + ".",
                                    "Use a longer run for a stable timing diagnosis."),
                            steps, step_stat->worst_rank)};
  }

  std::vector<Issue> issues = run_rules(w, c, straggler);
  for (auto& i : issues) {
    const bool cap = w.strategy == model::Strategy::Fsdp || steps < th::kMinStepsForConfidentDiag;
    if (cap && i.severity == Severity::Crit) i.severity = Severity::Warn;
  }
  std::stable_sort(issues.begin(), issues.end(), [](const Issue& a, const Issue& b) {
    auto key = [](const Issue& i) {
      return std::make_tuple(severity_rank(i.severity), i.score.value_or(0.0),
                             is_straggler(i.kind));
    };
    return key(a) > key(b);
  });
  std::optional<int> neutral_rank;  // BALANCED / INCOMPLETE_DATA name the worst rank
  if (!c.single_rank) neutral_rank = c.overall_worst_rank;
  if (issues.empty()) {
    const Missing miss = missing_signals(w, c, straggler);
    Issue i = !miss.names.empty()
                  ? incomplete_data_issue(miss)
                  : neutral(K::Balanced, "No dominant bottleneck is visible in this window.",
                            "Focus on throughput only if overall speed is still low.");
    if (neutral_rank) i.ranks = {*neutral_rank};
    issues.push_back(std::move(i));
  }
  if (auto note = trend_note(w, c, issues.front(), series))
    issues.front().evidence[ev::kTrend] = *note;
  // DECISIONS 23: a share that a few stalls hold says so.
  for (Issue& i : issues)
    add_stalls(w, i);
  return issues;
}

}  // namespace traceml::analysis::step_time
