// The phase-share rules read the typical rank's share of the Step Time (the
// median over ranks); on the GPU activity records (issue 5) they add what the
// records measured: pageable H2D copies, collective time in the residual.
#include "analysis/step_time_rules.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/number_format.hpp"
#include "analysis/thresholds.hpp"

namespace traceml::analysis::step_time {

namespace {

/// The facts of `rank`, or nullptr when the rank has none.
const RankFacts* facts_of(const StepWindow& w, int rank) {
  for (const auto& f : w.facts) {
    if (f.rank == rank) return &f;
  }
  return nullptr;
}

Severity share_severity(double share) {
  return share >= th::kOverheadShareCrit ? Severity::Crit : Severity::Warn;
}

std::string clock_label(Clock c) {
  return c == Clock::Gpu ? "GPU" : "CPU";
}

/// The issue of a phase-share rule: "<what> is <share> of the typical <clock>
/// Step Time.", its severity, score and share from `share`.
Issue share_issue(K kind, const std::string& what, double share, Clock clock, std::string action) {
  Issue i = issue_of(
      kind, share_severity(share),
      what + " is " + percent_text(share) + " of the typical " + clock_label(clock) + " Step Time.",
      std::move(action));
  i.score = i.share_pct = share;
  return i;
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

}  // namespace

std::vector<Issue> run_rules(const StepWindow& w, const Context& c,
                             const std::optional<Straggler>& straggler) {
  std::vector<Issue> out;
  if (!c.single_rank && straggler) out.push_back(straggler_issue(*straggler));

  if (c.input_share && *c.input_share >= th::kOverheadShareWarn) {
    Issue i = share_issue(K::InputBound, "Input wait", *c.input_share, w.clock,
                          "Increase workers, prefetch, or storage throughput.");
    i.metric = "input_wait";
    i.phase = "input";
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
    Issue i = share_issue(K::H2dBound, "H2D transfer", *c.h2d_share, w.clock,  // the GPU clock
                          "Inspect pinned memory, batch transfer, and host-to-device copies.");
    i.metric = "h2d";
    i.phase = "h2d";
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
    Issue i = share_issue(K::ResidualHeavy, "Residual time", *c.residual_share, w.clock,
                          "Inspect work outside traced phases, CPU stalls, logging, "
                          "checkpointing, validation, or unobserved transfers.");
    i.metric = "residual_proxy";
    i.phase = "residual";
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
    Issue i = issue_of(K::ComputeBound, Severity::Info,
                       "Compute-bound; " + c.largest_compute + " is the largest phase.",
                       "Optimize model compute or reduce step cost.");
    i.metric = "compute";
    i.phase = c.largest_compute;
    i.share_pct = c.compute_share;
    i.skew_pct = c.compute_skew;
    if (c.overall_worst_rank) i.ranks = {*c.overall_worst_rank};
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace traceml::analysis::step_time
