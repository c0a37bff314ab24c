#include "analysis/step_time_stalls.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/order_statistics.hpp"
#include "analysis/thresholds.hpp"

namespace traceml::analysis::step_time {

namespace {

namespace th = thresholds;
namespace ev = evidence;
using SM = StepMetric;
using K = DiagnosisKind;

/// One rank's series of the share's phase and of the step time, and its
/// steps ordered by the phase, largest first (ties: the earlier step).
struct RankSeries {
  std::size_t index = 0;  ///< into the window's facts
  std::vector<double> value;
  std::vector<double> step;
  std::vector<std::size_t> largest;
  double value_sum = 0.0;
  double step_sum = 0.0;
  double median_step = 0.0;
};

/// The rank's share without its `k` largest steps of the phase.
double share_without(const RankSeries& r, std::size_t k) {
  double value = r.value_sum;
  double step = r.step_sum;
  for (std::size_t i = 0; i < k && i < r.largest.size(); ++i) {
    value -= r.value[r.largest[i]];
    step -= r.step[r.largest[i]];
  }
  return step > 0.0 ? std::max(0.0, value) / step : 0.0;
}

/// Whether the `k` largest steps of the rank are each a stall.
bool all_stalls(const RankSeries& r, std::size_t k) {
  if (r.largest.size() < k) return false;
  for (std::size_t i = 0; i < k; ++i)
    if (r.value[r.largest[i]] < th::kStallStepFactor * r.median_step) return false;
  return true;
}

}  // namespace

void add_stalls(const StepWindow& w, Issue& issue) {
  const auto kind = kind_from_name(issue.kind);
  SM metric;
  if (kind == K::InputBound)
    metric = SM::InputWait;
  else if (kind == K::H2dBound)
    metric = SM::H2D;
  else if (kind == K::ResidualHeavy)
    metric = SM::Residual;
  else
    return;
  std::vector<RankSeries> ranks;
  for (std::size_t i = 0; i < w.facts.size(); ++i) {
    const auto& f = w.facts[i];
    if (!f[metric] || !f[SM::StepTime] || *f[SM::StepTime] <= 0) continue;
    RankSeries r;
    r.index = i;
    r.value = rank_step_series(w, i, metric);
    r.step = rank_step_series(w, i, SM::StepTime);
    r.value_sum = std::accumulate(r.value.begin(), r.value.end(), 0.0);
    r.step_sum = std::accumulate(r.step.begin(), r.step.end(), 0.0);
    if (r.step_sum <= 0.0 || r.value.size() < std::size_t(th::kMinStepsForConfidentDiag)) continue;
    r.median_step = median_of(r.step);
    std::vector<std::size_t> order(r.value.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    const std::size_t keep = std::min(th::kStallStepsMax, order.size());
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(),
                      [&r](std::size_t a, std::size_t b) {
                        return r.value[a] > r.value[b] || (r.value[a] == r.value[b] && a < b);
                      });
    order.resize(keep);
    r.largest = std::move(order);
    ranks.push_back(std::move(r));
  }
  if (ranks.empty()) return;
  const auto typical = [&ranks](std::size_t k) {
    std::vector<double> shares;
    shares.reserve(ranks.size());
    for (const RankSeries& r : ranks)
      shares.push_back(share_without(r, k));
    return median_of(shares);
  };
  const double share = typical(0);
  if (share <= 0.0) return;
  for (std::size_t k = 1; k <= th::kStallStepsMax; ++k) {
    // The rank whose stalls are named: the one whose k largest values sum
    // to the most (ties: the lowest rank).
    const RankSeries* named = nullptr;
    double most = 0.0;
    for (const RankSeries& r : ranks) {
      double sum = 0.0;
      for (std::size_t i = 0; i < k && i < r.largest.size(); ++i)
        sum += r.value[r.largest[i]];
      if (named == nullptr || sum > most) {
        named = &r;
        most = sum;
      }
    }
    const double without = typical(k);
    if (without > share * (1.0 - th::kStallsHoldShare) || !all_stalls(*named, k)) continue;
    Json steps = Json::array();
    for (std::size_t i = 0; i < k; ++i) {
      const std::size_t s = named->largest[i];
      steps.push_back(Json{{ev::kRank, w.facts[named->index].rank},
                           {"step", w.steps[s]},
                           {ev::kValueMs, named->value[s]},
                           {ev::kStepTimeMs, named->step[s]}});
    }
    issue.evidence[ev::kStalls] = Json{{ev::kMetric, culprit_metric(*kind)},
                                       {"share", share},
                                       {"share_without", without},
                                       {"steps", std::move(steps)},
                                       {"median_value_ms", median_of(named->value)},
                                       {"median_step_time_ms", named->median_step}};
    return;
  }
}

}  // namespace traceml::analysis::step_time
