// The straggler rule: the rank with the least visible compute time arrives
// last at the collective (the others wait for it inside it), and the upper
// median rank is the victim it is compared with.
#include "analysis/step_time_straggler.hpp"

#include <algorithm>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/number_format.hpp"
#include "analysis/thresholds.hpp"

namespace traceml::analysis::step_time {

std::optional<Straggler> straggler_evidence(const StepWindow& w, const Context& c) {
  const auto& cohort = c.straggler_cohort;
  if (cohort.size() < 2) return std::nullopt;
  const bool fsdp = w.strategy == model::Strategy::Fsdp;
  auto visible = [&](const RankFacts& f) {
    return fsdp ? finite_or_zero(f[SM::Forward]) + finite_or_zero(f[SM::Backward])
                : finite_or_zero(f[SM::Backward]);
  };
  std::vector<const RankFacts*> order(cohort.begin(), cohort.end());
  std::stable_sort(order.begin(), order.end(), [&](const RankFacts* a, const RankFacts* b) {
    return std::make_pair(visible(*a), a->rank) < std::make_pair(visible(*b), b->rank);
  });
  const RankFacts& cul = *order.front();            // least visible time: it arrives last
  const RankFacts& vic = *order[order.size() / 2];  // the upper median
  Straggler s;
  s.culprit = cul.rank;
  s.victim = vic.rank;
  s.visible_culprit = visible(cul);
  s.visible_victim = visible(vic);
  s.cost = std::max(0.0, s.visible_victim - s.visible_culprit);
  s.culprit_activity = cul.activity;
  s.victim_activity = vic.activity;
  s.victim_step = finite_or_zero(vic[SM::StepTime]);
  if (s.victim_step <= 0) return std::nullopt;
  s.score = s.cost / s.victim_step;
  if (s.score < th::kStragglerScoreWarn) return std::nullopt;
  s.visible_metric = fsdp ? "forward_backward" : "backward";

  auto excess = [](const std::optional<double>& a, const std::optional<double>& b) {
    return std::max(0.0, finite_or_zero(a) - finite_or_zero(b));
  };
  s.excesses.emplace_back("input", excess(cul[SM::InputWait], vic[SM::InputWait]));
  if (cul[SM::H2D] && vic[SM::H2D]) {
    s.excesses.emplace_back("h2d", excess(cul[SM::H2D], vic[SM::H2D]));
  }
  if (fsdp) {
    s.excesses.emplace_back("compute", 0.0);
  } else if (cul[SM::Forward] && vic[SM::Forward]) {
    const bool positive = *cul[SM::Forward] > 0 && *vic[SM::Forward] > 0;
    s.excesses.emplace_back("compute", positive ? excess(cul[SM::Forward], vic[SM::Forward]) : 0.0);
  }
  std::optional<std::pair<std::string, double>> best;
  if (s.cost > 0) {
    for (const auto& [name, ex] : s.excesses) {
      const double cov = std::min(1.0, ex / s.cost);
      s.coverage.emplace_back(name, cov);
      if (!best || cov > best->second) best = std::make_pair(name, cov);  // ties: first
    }
  }
  if (best && best->second > 0 && best->second >= th::kStragglerCauseCoverageMin) {
    s.component = best->first;
  }
  return s;
}

Issue straggler_issue(const Straggler& s) {
  Issue i;
  const std::string impact = percent_text(s.score);
  double cov = 0.0;
  for (const auto& [n, v] : s.coverage) {
    if (n == s.component) cov = v;
  }
  std::string label;
  if (s.component == "input") {
    i.set_kind(K::InputStraggler);
    i.metric = "input_wait";
    i.phase = "input";
    label = "input wait";
  } else if (s.component == "h2d") {
    i.set_kind(K::H2dStraggler);
    i.metric = "h2d";
    i.phase = "h2d";
    label = "H2D";
  } else if (s.component == "compute") {
    i.set_kind(K::ComputeStraggler);
    i.metric = "forward";
    i.phase = "forward";
    label = "forward compute";
  } else {
    i.set_kind(K::Straggler);
    i.metric = s.visible_metric;
    i.phase = "sync";
  }
  const std::string c = "r" + std::to_string(s.culprit);
  const std::string v = "r" + std::to_string(s.victim);
  if (label.empty()) {
    i.summary = c + " is slower than victim " + v + " (~" + impact +
                " impact); no measured component explains " +
                percent_text(th::kStragglerCauseCoverageMin) + " of visible wait cost.";
    i.action = "Inspect synchronization, collectives, and unattributed work around " + c + ".";
  } else {
    i.summary = c + " has excess " + label + " burden relative to victim " + v + " (~" + impact +
                " impact; ~" + percent_text(cov) + " of visible wait cost).";
    i.action = "Inspect " + label + " on " + c + ".";
  }
  i.severity = s.score >= th::kStragglerScoreCrit ? Severity::Crit : Severity::Warn;
  i.score = s.score;
  i.skew_pct = s.score;
  i.ranks = {s.culprit};
  Json ex = Json::object(), cv = Json::object();
  for (const auto& [n, x] : s.excesses)
    ex[n] = x;
  for (const auto& [n, x] : s.coverage)
    cv[n] = x;
  i.evidence = Json{{ev::kComponent, s.component},
                    {ev::kCulpritRank, s.culprit},
                    {ev::kVictimRank, s.victim},
                    {ev::kVisibleMetric, s.visible_metric},
                    {ev::kVisibleCulpritMs, s.visible_culprit},
                    {ev::kVisibleVictimMs, s.visible_victim},
                    {ev::kVisibleCostMs, s.cost},
                    {ev::kStepTimeMs, s.victim_step},
                    {ev::kComponentExcessesMs, ex},
                    {ev::kComponentCoverage, cv}};
  // Issue 5: ranks that wait for a late one wait inside the collective, so the
  // victim's extra collective (NCCL) time over the culprit's is the measured
  // part of the visible wait cost.
  if (s.culprit_activity && s.victim_activity) {
    const double wait =
        std::max(0.0, s.victim_activity->collective_ms - s.culprit_activity->collective_ms);
    const double share = std::min(1.0, wait / s.cost);  // cost > 0: the score passed its gate
    i.evidence[ev::kCollectiveCulpritMs] = s.culprit_activity->collective_ms;
    i.evidence[ev::kCollectiveVictimMs] = s.victim_activity->collective_ms;
    i.evidence[ev::kCollectiveWaitMs] = wait;
    i.evidence[ev::kCollectiveShareOfWait] = share;
    if (label.empty() && collective_explains(share)) {
      i.summary += " Collective (NCCL) time explains ~" + percent_text(share) +
                   " of that cost: " + v + " spends " + fixed(wait, 1) +
                   " ms more per step in collectives than " + c + ".";
    }
  }
  if (s.component == "h2d" && s.culprit_activity) {
    add_h2d_activity(i.evidence, *s.culprit_activity);
    if (const auto advice = pageable_advice(h2d_copies(*s.culprit_activity))) {
      i.action += " " + *advice;
    }
  }
  return i;
}

}  // namespace traceml::analysis::step_time
