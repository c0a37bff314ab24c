// The Step Time section (spec §4.1 and §5.4): context, straggler evidence, the
// five rules, orchestration (NO_DATA / WARMUP / INCOMPLETE_DATA / BALANCED),
// missing signals, the trend note, the payload and the card.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/distribution.hpp"
#include "analysis/h2d_advice.hpp"
#include "analysis/number_format.hpp"
#include "analysis/rank_identity.hpp"
#include "analysis/step_window.hpp"
#include "analysis/summary.hpp"
#include "analysis/thresholds.hpp"
#include "analysis/trend.hpp"

namespace traceml::analysis {

namespace th = thresholds;
namespace ev = evidence;
using SM = StepMetric;
using K = DiagnosisKind;

namespace {

double finite_or_zero(std::optional<double> v) {
  return v && std::isfinite(*v) && *v > 0 ? *v : 0.0;
}

/// Median, worst and worst rank of one metric over a cohort (values null→0).
struct CohortStat {
  double median = 0.0;
  double worst = 0.0;
  std::optional<int> worst_rank;
  std::size_t n = 0;
};

CohortStat cohort_stat(const std::vector<const RankFacts*>& cohort, SM m) {
  CohortStat s;
  s.n = cohort.size();
  if (cohort.empty()) return s;
  std::vector<double> v;
  for (const RankFacts* f : cohort) {
    const double x = finite_or_zero((*f)[m]);
    v.push_back(x);
    if (!s.worst_rank || x > s.worst) {
      s.worst = x;
      s.worst_rank = f->rank;
    }
  }
  s.median = median_of(v);
  return s;
}

std::optional<double> cohort_skew(const CohortStat& s) {
  if (s.n < 2) return std::nullopt;
  if (s.median > 0) return std::max(0.0, s.worst - s.median) / s.median;
  if (s.worst <= 0) return 0.0;
  return std::nullopt;
}

/// The facts of `rank`, or nullptr when the rank has none.
const RankFacts* facts_of(const StepWindow& w, int rank) {
  for (const auto& f : w.facts) {
    if (f.rank == rank) return &f;
  }
  return nullptr;
}

H2dCopies h2d_copies(const ActivityFacts& a) {
  return {a.h2d_copies, a.h2d_pageable_copies, a.h2d_bytes, a.h2d_pageable_bytes};
}

/// Issue 5: the H2D copies of the rank an H2D finding names, per step, from
/// its GPU activity records (appended to the finding's evidence).
void add_h2d_activity(Json& evidence, const ActivityFacts& a) {
  evidence[ev::kH2dCopiesPerStep] = a.h2d_copies;
  evidence[ev::kH2dPageableCopiesPerStep] = a.h2d_pageable_copies;
  evidence[ev::kH2dBytesPerStep] = a.h2d_bytes;
  evidence[ev::kH2dPageableBytesPerStep] = a.h2d_pageable_bytes;
  evidence[ev::kH2dPageableShare] =
      a.h2d_pageable_share ? Json(*a.h2d_pageable_share) : Json(nullptr);
}

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

std::optional<double> share(const StepWindow& w, SM m) {
  std::vector<double> v;
  for (const auto& f : w.facts) {
    const auto& num = f[m];
    const auto& den = f[SM::StepTime];
    if (num && den && *den > 0) v.push_back(*num / *den);
  }
  if (v.empty()) return std::nullopt;
  return median_of(v);
}

Context build_context(const StepWindow& w) {
  Context c;
  c.single_rank = w.single_rank();
  std::vector<const RankFacts*> step_cohort, compute_cohort;
  const bool fsdp = w.strategy == model::Strategy::Fsdp;
  for (const auto& f : w.facts) {
    if (!f[SM::StepTime]) continue;
    step_cohort.push_back(&f);
    if (f[SM::Forward] && f[SM::Backward] && f[SM::OptimizerStep]) compute_cohort.push_back(&f);
    if (f[SM::InputWait] && *f[SM::StepTime] > 0 && f[SM::Backward] && *f[SM::Backward] > 0 &&
        (!fsdp || (f[SM::Forward] && *f[SM::Forward] > 0))) {
      c.straggler_cohort.push_back(&f);
    }
  }
  const CohortStat in = cohort_stat(step_cohort, SM::InputWait);
  const CohortStat tr = cohort_stat(step_cohort, SM::TracedStepTime);
  const CohortStat st = cohort_stat(step_cohort, SM::StepTime);
  c.input_total = c.single_rank ? in.worst : in.median;
  c.traced_total = c.single_rank ? tr.worst : tr.median;
  c.step_total = c.single_rank ? st.worst : st.median;
  c.input_worst_rank = in.worst_rank;
  c.input_skew = cohort_skew(in);
  c.compute_skew = cohort_skew(cohort_stat(compute_cohort, SM::Compute));
  double best = 0.0;
  for (auto [m, label] : {std::pair{SM::Forward, "forward"}, std::pair{SM::Backward, "backward"},
                          std::pair{SM::OptimizerStep, "optimizer"}}) {
    if (compute_cohort.empty()) break;
    const double med = cohort_stat(compute_cohort, m).median;
    if (med > best) {  // strictly greater: the first wins ties
      best = med;
      c.largest_compute = label;
    }
  }
  if (const auto& s = w.stat(SM::StepTime)) c.overall_worst_rank = s->worst_rank;
  c.input_share = share(w, SM::InputWait);
  c.h2d_share = share(w, SM::H2D);
  c.compute_share = share(w, SM::Compute);
  c.residual_share = share(w, SM::Residual);
  return c;
}

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

Severity share_severity(double share) {
  return share >= th::kOverheadShareCrit ? Severity::Crit : Severity::Warn;
}

std::string clock_label(Clock c) {
  return c == Clock::Gpu ? "GPU" : "CPU";
}

/// Issue 5: how much of the residual collective (NCCL) kernels could be. Per
/// rank with activity records and a residual above 0: min(1, collective /
/// residual); the typical rank's share is the median, as for the rule's own
/// share. An upper bound: a collective launched inside a traced phase (DDP's
/// all-reduce in backward) counts too, since the records do not say which
/// phase launched it.
void add_residual_collectives(const StepWindow& w, const Context& c, Issue& i) {
  std::vector<double> collective, shares;
  for (const auto& f : w.facts) {
    if (!f.activity) continue;
    collective.push_back(f.activity->collective_ms);
    const auto& residual = f[SM::Residual];
    if (residual && *residual > 0) {
      shares.push_back(std::min(1.0, f.activity->collective_ms / *residual));
    }
  }
  if (collective.empty()) return;
  const double typical = c.single_rank ? *std::max_element(collective.begin(), collective.end())
                                       : median_of(collective);
  i.evidence[ev::kCollectiveMs] = typical;
  if (shares.empty()) {
    i.evidence[ev::kCollectiveShareOfResidual] = nullptr;
    return;
  }
  const double share = median_of(shares);
  i.evidence[ev::kCollectiveShareOfResidual] = share;
  if (collective_explains(share)) {
    i.summary += " Collective (NCCL) kernels ran " + fixed(typical, 1) + " ms per step, up to ~" +
                 percent_text(share) + " of the residual.";
    i.action =
        "Inspect collectives outside the traced phases (metric or loss all-reduces, barriers), "
        "then logging, checkpointing, validation, or unobserved transfers.";
  }
}

/// The five rules of spec §4.1.11, in order.
std::vector<Issue> run_rules(const StepWindow& w, const Context& c,
                             const std::optional<Straggler>& straggler) {
  std::vector<Issue> out;
  if (!c.single_rank && straggler) out.push_back(straggler_issue(*straggler));

  if (c.input_share && *c.input_share >= th::kOverheadShareWarn) {
    Issue i;
    i.set_kind(K::InputBound);
    i.severity = share_severity(*c.input_share);
    i.summary = "Input wait is " + percent_text(*c.input_share) + " of the typical " +
                clock_label(w.clock) + " Step Time.";
    i.action = "Increase workers, prefetch, or storage throughput.";
    i.metric = "input_wait";
    i.phase = "input";
    i.score = i.share_pct = c.input_share;
    i.skew_pct = c.input_skew;
    if (c.input_worst_rank) i.ranks = {*c.input_worst_rank};
    i.evidence = Json{{ev::kInputWaitMs, c.input_total},
                      {ev::kTracedStepTimeMs, c.traced_total},
                      {ev::kStepTimeMs, c.step_total},
                      {ev::kInputBoundShare, *c.input_share},
                      {ev::kDiagnosisClock, clock_name(w.clock)}};
    out.push_back(std::move(i));
  }

  const auto& h2d = w.stat(SM::H2D);
  if (w.clock == Clock::Gpu && c.h2d_share && *c.h2d_share >= th::kOverheadShareWarn && h2d) {
    Issue i;
    i.set_kind(K::H2dBound);
    i.severity = share_severity(*c.h2d_share);
    i.summary = "H2D transfer is " + percent_text(*c.h2d_share) + " of the typical GPU Step Time.";
    i.action = "Inspect pinned memory, batch transfer, and host-to-device copies.";
    i.metric = "h2d";
    i.phase = "h2d";
    i.score = i.share_pct = c.h2d_share;
    if (!c.single_rank) i.skew_pct = h2d->skew;
    i.ranks = {h2d->worst_rank};
    i.evidence = Json{{ev::kH2dMs, c.single_rank ? h2d->worst : h2d->median},
                      {ev::kH2dShare, *c.h2d_share},
                      {ev::kDiagnosisClock, clock_name(w.clock)}};
    if (const RankFacts* f = facts_of(w, h2d->worst_rank); f && f->activity) {
      add_h2d_activity(i.evidence, *f->activity);
      if (const auto advice = pageable_advice(h2d_copies(*f->activity))) i.action = *advice;
    }
    out.push_back(std::move(i));
  }

  if (c.residual_share && *c.residual_share >= th::kOverheadShareWarn) {
    Issue i;
    i.set_kind(K::ResidualHeavy);
    i.severity = share_severity(*c.residual_share);
    i.summary = "Residual time is " + percent_text(*c.residual_share) + " of the typical " +
                clock_label(w.clock) + " Step Time.";
    i.action =
        "Inspect work outside traced phases, CPU stalls, logging, "
        "checkpointing, validation, or "
        "unobserved transfers.";
    i.metric = "residual_proxy";
    i.phase = "residual";
    i.score = i.share_pct = c.residual_share;
    if (c.overall_worst_rank) i.ranks = {*c.overall_worst_rank};
    add_residual_collectives(w, c, i);
    out.push_back(std::move(i));
  }

  const bool input_low = !c.input_share || *c.input_share < th::kOverheadShareWarn;
  const bool h2d_low =
      w.clock != Clock::Gpu || !c.h2d_share || *c.h2d_share < th::kOverheadShareWarn;
  const bool residual_low = !c.residual_share || *c.residual_share < th::kOverheadShareWarn;
  if (c.compute_share && *c.compute_share >= th::kComputeBoundShareWarn && input_low && h2d_low &&
      residual_low) {
    Issue i;
    i.set_kind(K::ComputeBound);
    i.severity = Severity::Info;
    i.summary = "Compute-bound; " + c.largest_compute + " is the largest phase.";
    i.action = "Optimize model compute or reduce step cost.";
    i.metric = "compute";
    i.phase = c.largest_compute;
    i.share_pct = c.compute_share;
    i.skew_pct = c.compute_skew;
    if (c.overall_worst_rank) i.ranks = {*c.overall_worst_rank};
    out.push_back(std::move(i));
  }
  return out;
}

/// Spec §4.1.13: which timing signals some rank never measured.
struct Missing {
  std::vector<std::string> names;
  Json coverage = Json::object();
};

Missing missing_signals(const StepWindow& w, const Context& c,
                        const std::optional<Straggler>& straggler) {
  Missing out;
  const std::size_t ranks = w.expected_ranks;
  if (ranks == 0) return out;
  const std::array<SM, 5> order = {SM::InputWait, SM::Forward, SM::Backward, SM::OptimizerStep,
                                   SM::TracedStepTime};
  std::set<SM> needed;
  auto need_all = [&] { needed.insert(order.begin(), order.end()); };
  if (w.facts.size() < ranks) need_all();
  if (!c.input_share) needed.insert({SM::InputWait, SM::TracedStepTime});
  if (!c.compute_share || !c.residual_share) need_all();
  if (ranks > 1 && !straggler && c.straggler_cohort.size() < 2) {
    needed.insert({SM::Backward, SM::InputWait, SM::TracedStepTime});
    if (w.strategy == model::Strategy::Fsdp) needed.insert(SM::Forward);
  }
  for (SM m : order) {
    if (!needed.count(m)) continue;
    std::size_t count = 0;
    for (const auto& f : w.facts)
      count += f[m].has_value() ? 1 : 0;
    if (count < ranks) {
      out.names.emplace_back(step_metric_name(m));
      out.coverage[step_metric_name(m)] = std::to_string(count) + "/" + std::to_string(ranks);
    }
  }
  return out;
}

/// Per-step series are one pass over every (rank, step) row of the window, so
/// the trend note and the spread share them instead of computing one twice.
class SeriesCache {
 public:
  explicit SeriesCache(const StepWindow& w) : w_(w) {}
  /// A series computed elsewhere (the same values get(m) would compute).
  void put(SM m, std::vector<double> series) { cache_[m] = std::move(series); }
  /// The median series across ranks (a single rank: its own values).
  const std::vector<double>& get(SM m) {
    auto it = cache_.find(m);
    if (it == cache_.end()) it = cache_.emplace(m, step_series(w_, m, w_.single_rank())).first;
    return it->second;
  }

 private:
  const StepWindow& w_;
  std::map<SM, std::vector<double>> cache_;
};

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
  Issue i;
  i.set_kind(kind);
  i.summary = summary;
  i.action = action;
  return i;
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

std::vector<Issue> diagnose(const StepWindow& w, SeriesCache& series) {
  const Context c = build_context(w);
  const auto straggler = straggler_evidence(w, c);
  const auto& step_stat = w.stat(SM::StepTime);
  const std::int64_t steps = w.steps_used();
  const char* const kWaitAction = "Wait for the first complete window.";

  if (!step_stat) {
    const Missing miss = missing_signals(w, c, straggler);
    if (!miss.names.empty()) {
      Issue i = neutral(
          K::IncompleteData,
          "Missing timing signals prevent a reliable diagnosis: " +
              [&] {
                std::string s;
                for (const auto& n : miss.names)
                  s += (s.empty() ? "" : ", ") + n;
                return s;
              }() +
              ".",
          "Instrument the missing phases (auto mode or the matching wrap_* "
          "helpers) to restore "
          "coverage.");
      i.evidence = Json{{ev::kMissingSignals, miss.names}, {ev::kSignalCoverage, miss.coverage}};
      return {i};
    }
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
    Issue i;
    if (!miss.names.empty()) {
      std::string names;
      for (const auto& n : miss.names)
        names += (names.empty() ? "" : ", ") + n;
      i = neutral(K::IncompleteData,
                  "Missing timing signals prevent a reliable diagnosis: " + names + ".",
                  "Instrument the missing phases (auto mode or the matching wrap_* "
                  "helpers) to "
                  "restore coverage.");
      i.evidence = Json{{ev::kMissingSignals, miss.names}, {ev::kSignalCoverage, miss.coverage}};
    } else {
      i = neutral(K::Balanced, "No dominant bottleneck is visible in this window.",
                  "Focus on throughput only if overall speed is still low.");
    }
    if (neutral_rank) i.ranks = {*neutral_rank};
    issues.push_back(std::move(i));
  }
  if (auto note = trend_note(w, c, issues.front(), series))
    issues.front().evidence[ev::kTrend] = *note;
  return issues;
}

std::string ms1(const std::optional<MetricStat>& s, bool worst) {
  if (!s) return "n/a";
  return fixed(worst ? s->worst : s->median, 1);
}

std::string rank_text(const std::optional<MetricStat>& s, bool worst) {
  if (!s) return "n/a";
  return "r" + std::to_string(worst ? s->worst_rank : s->representative_rank);
}

/// Spec §5.6, Step Time card.
std::string card(const StepWindow& w, const Section& s) {
  std::string out = "TraceML Step Timing Summary | steps " +
                    std::to_string(s.metadata.training_total_steps.value_or(0)) +
                    " | global ranks " + std::to_string(s.metadata.global_ranks_seen.value_or(0)) +
                    "\nStep Time\n- Diagnosis: " + s.diagnosis().status + "\n";
  const auto& st = w.stat(SM::StepTime);
  const auto& in = w.stat(SM::InputWait);
  const auto& h2d = w.stat(SM::H2D);
  const auto& cp = w.stat(SM::Compute);
  const auto& rs = w.stat(SM::Residual);
  if (w.facts.empty()) {
    out += "- Scope: latest step " +
           (w.latest_step ? std::to_string(*w.latest_step) : std::string("n/a")) +
           "\n- Stats: n/a\n";
  } else if (w.facts.size() == 1) {
    out += "- Scope: last " + std::to_string(w.steps_used()) + " aligned steps on global rank r" +
           std::to_string(w.facts.front().rank) + "\n";
    out += "- Stats: Step Time " + ms1(st, true) + "ms | input " + ms1(in, true) + "ms | H2D " +
           ms1(h2d, true) + "ms | compute " + ms1(cp, true) + "ms\n";
    out += "- Residual: " + ms1(rs, true) + "ms\n";
  } else {
    auto pair = [&](const std::optional<MetricStat>& m) {
      return ms1(m, false) + "/" + ms1(m, true);
    };
    auto rpair = [&](const std::optional<MetricStat>& m) {
      return rank_text(m, false) + "/" + rank_text(m, true);
    };
    out += "- Scope: compared over last " + std::to_string(w.steps_used()) +
           " aligned steps across " + std::to_string(w.facts.size()) + " global ranks\n";
    out += "- Stats: median/worst | Step Time " + pair(st) + "ms | input " + pair(in) +
           "ms | H2D " + pair(h2d) + "ms | compute " + pair(cp) + "ms\n";
    out += "- Residual: median/worst " + pair(rs) + "ms\n";
    out += "- Ranks: median/worst | Step Time " + rpair(st) + " | input " + rpair(in) + " | H2D " +
           rpair(h2d) + " | compute " + rpair(cp) + "\n";
    out += "- Residual ranks: median/worst " + rpair(rs) + "\n";
  }
  out += "- Why: " + s.diagnosis().summary;
  return out;
}

/// JSON metric name → internal metric (spec §5.4, Step Time).
const std::array<std::pair<const char*, SM>, 14> kPayloadMetrics = {{
    {"input_wait_ms", SM::InputWait},
    {"step_time_ms", SM::StepTime},
    {"traced_step_time_ms", SM::TracedStepTime},
    {"step_time_cpu_ms", SM::StepTimeCpu},
    {"step_time_gpu_ms", SM::StepTimeGpu},
    {"traced_step_time_cpu_ms", SM::TracedStepTimeCpu},
    {"traced_step_time_gpu_ms", SM::TracedStepTimeGpu},
    {"dataloader_fetch_cpu_ms", SM::DataloaderFetch},
    {"h2d_ms", SM::H2D},
    {"compute_ms", SM::Compute},
    {"residual_ms", SM::Residual},
    {"forward_ms", SM::Forward},
    {"backward_ms", SM::Backward},
    {"optimizer_ms", SM::OptimizerStep},
}};

/// Issue 5: per-rank metrics from GPU activity records, added after the spec's
/// metrics only when some rank of the window has such records (a run without
/// them keeps exactly the spec's metric names).
struct ActivityMetric {
  const char* name;
  std::optional<double> (*value)(const ActivityFacts&);
};
const std::array<ActivityMetric, 6> kActivityMetrics = {{
    {"collective_ms",
     [](const ActivityFacts& a) { return std::optional<double>(a.collective_ms); }},
    {"gpu_idle_fraction", [](const ActivityFacts& a) { return a.gpu_idle_fraction; }},
    {"h2d_bytes_per_step",
     [](const ActivityFacts& a) { return std::optional<double>(a.h2d_bytes); }},
    {"h2d_copies_per_step",
     [](const ActivityFacts& a) { return std::optional<double>(a.h2d_copies); }},
    {"h2d_pageable_copies_per_step",
     [](const ActivityFacts& a) { return std::optional<double>(a.h2d_pageable_copies); }},
    {"h2d_pageable_share", [](const ActivityFacts& a) { return a.h2d_pageable_share; }},
}};

std::optional<double> activity_value(const RankFacts& f, const ActivityMetric& m) {
  if (!f.activity) return std::nullopt;
  return m.value(*f.activity);
}

/// Quartiles of a per-step series (non-empty), and with `sketch` its whole
/// distribution. The quartiles are sketch quantiles 5, 10 and 15 of 20: one
/// sort serves both.
Json spread_entry(const std::vector<double>& series, const char* basis, bool sketch) {
  const DistributionSketch k = *sketch_of(series);
  Json e = Json{{"basis", basis},
                {"steps", k.count},
                {"p25", k.quantiles[5]},
                {"median", k.quantiles[10]},
                {"p75", k.quantiles[15]}};
  if (sketch) {
    e["quantiles"] = k.quantiles;
    e["lag1_autocorrelation"] = k.lag1 ? Json(*k.lag1) : Json(nullptr);
  }
  return e;
}

/// How much the typical rank's step time varies from step to step over the
/// window: quartiles of the per-step median (one rank: its own) step time on
/// the window's clock (`step_time_ms`), and per measured clock the
/// distribution sketch (`step_time_cpu_ms`, `step_time_gpu_ms`) that
/// `traceml compare` runs its rank test on (DECISIONS 12).
std::optional<Json> step_time_spread(const StepWindow& w, SeriesCache& cache,
                                     const std::array<std::vector<double>, 2>& clocks) {
  if (!w.stat(SM::StepTime)) return std::nullopt;
  const std::vector<double>& series = cache.get(SM::StepTime);
  if (series.size() < 2) return std::nullopt;
  const char* basis = w.single_rank() ? "per_step" : "per_step_median_across_ranks";
  Json spread = Json{{"step_time_ms", spread_entry(series, basis, false)}};
  for (const Clock c : {Clock::Cpu, Clock::Gpu}) {
    const std::vector<double>& per_clock = clocks[static_cast<std::size_t>(c)];
    if (per_clock.size() < 2) continue;
    spread[std::string("step_time_") + clock_name(c) + "_ms"] =
        spread_entry(per_clock, basis, true);
  }
  return spread;
}

}  // namespace

Section analyze_step_time(const model::Telemetry& t, const Options& o) {
  const StepWindow w = build_step_window(t, o.window);
  Section s;
  s.name = "step_time";
  SeriesCache series(w);
  // Both clocks' step-time series in one pass; the window's clock's is the
  // StepTime series the trend note and the spread read.
  const std::array<std::vector<double>, 2> clocks = clock_step_series(w);
  if (w.stat(SM::StepTime)) series.put(SM::StepTime, clocks[static_cast<std::size_t>(w.clock)]);
  s.issues = diagnose(w, series);
  s.index_by = "global_rank";

  std::vector<Identity> ids;
  for (const auto& f : w.facts)
    ids.push_back(identity_of(t, f.rank));
  s.metadata.mode = mode_of(ids);
  s.metadata.global_ranks_seen = std::int64_t(w.expected_ranks);
  s.metadata.global_ranks_used = std::int64_t(w.facts.size());
  // DECISIONS 7 (quirk 4): the number of steps seen, not latest + 1.
  s.metadata.training_total_steps = w.distinct_steps;
  s.metadata.training_latest_step = w.latest_step;

  s.window.kind = "step_window";
  s.window.alignment = "common_steps";
  s.window.steps_analyzed = w.steps_used();
  if (!w.steps.empty()) {
    s.window.start_step = w.steps.front();
    s.window.end_step = s.window.completed_step = w.steps.back();
  }
  s.window.window_size = o.window;
  s.window.diagnosis_clock = clock_name(w.clock);

  for (const auto& [name, m] : kPayloadMetrics) {
    s.metric_names.emplace_back(name);
    const auto& st = w.stat(m);
    std::optional<double> avg;
    if (st) {
      double sum = 0.0;
      for (const auto& f : w.facts)
        sum += f[m].value_or(0.0);
      avg = sum / double(st->ranks);
    }
    s.average.push_back(avg);
    s.median.push_back(st ? Point{st->representative, std::to_string(st->representative_rank)}
                          : Point{});
    s.worst.push_back(st ? Point{st->worst, std::to_string(st->worst_rank)} : Point{});
  }
  const bool activity = std::any_of(w.facts.begin(), w.facts.end(),
                                    [](const RankFacts& f) { return f.activity.has_value(); });
  if (activity) {
    for (const auto& m : kActivityMetrics) {
      std::vector<std::pair<int, double>> vals;  // ascending rank, as facts are
      for (const auto& f : w.facts) {
        if (const auto v = activity_value(f, m)) vals.emplace_back(f.rank, *v);
      }
      const auto st = stat_of(vals);
      std::optional<double> avg;
      if (st) {
        double sum = 0.0;
        for (const auto& [rank, v] : vals)
          sum += v;
        avg = sum / double(vals.size());
      }
      s.metric_names.emplace_back(m.name);
      s.average.push_back(avg);
      s.median.push_back(st ? Point{st->representative, std::to_string(st->representative_rank)}
                            : Point{});
      s.worst.push_back(st ? Point{st->worst, std::to_string(st->worst_rank)} : Point{});
    }
  }
  for (std::size_t i = 0; i < w.facts.size(); ++i) {
    GroupRow row;
    row.key = std::to_string(w.facts[i].rank);
    row.identity = ids[i];
    for (const auto& [name, m] : kPayloadMetrics)
      row.metrics.push_back(w.facts[i][m]);
    if (activity) {
      for (const auto& m : kActivityMetrics)
        row.metrics.push_back(activity_value(w.facts[i], m));
    }
    s.rows.push_back(std::move(row));
  }
  if (auto spread = step_time_spread(w, series, clocks)) s.global_extra["spread"] = *spread;
  s.units = {{"time", "ms"}};
  if (activity) s.units.emplace_back("memory", "bytes");  // h2d_bytes_per_step
  s.card = card(w, s);
  return s;
}

}  // namespace traceml::analysis
