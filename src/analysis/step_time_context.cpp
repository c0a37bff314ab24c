// The context is read over cohorts of ranks: those with a step time, those
// with every compute phase, and those the straggler rule can compare; a
// single rank stands for itself (its values are the "worst").
#include "analysis/step_time_context.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "analysis/diagnosis_kind.hpp"

namespace traceml::analysis::step_time {

namespace {

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

}  // namespace

double finite_or_zero(std::optional<double> v) {
  return v && std::isfinite(*v) && *v > 0 ? *v : 0.0;
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

H2dCopies h2d_copies(const ActivityFacts& a) {
  return {a.h2d_copies, a.h2d_pageable_copies, a.h2d_bytes, a.h2d_pageable_bytes};
}

void add_h2d_activity(Json& evidence, const ActivityFacts& a) {
  evidence[ev::kH2dCopiesPerStep] = a.h2d_copies;
  evidence[ev::kH2dPageableCopiesPerStep] = a.h2d_pageable_copies;
  evidence[ev::kH2dBytesPerStep] = a.h2d_bytes;
  evidence[ev::kH2dPageableBytesPerStep] = a.h2d_pageable_bytes;
  evidence[ev::kH2dPageableShare] =
      a.h2d_pageable_share ? Json(*a.h2d_pageable_share) : Json(nullptr);
}

}  // namespace traceml::analysis::step_time
