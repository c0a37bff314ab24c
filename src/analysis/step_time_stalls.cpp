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

/// What one rank's steps say about its share: its sums, its median step,
/// and its few largest steps of the phase (values kept, not the series: a
/// run of 64 ranks x 10,000 steps would hold 10 MB of series for this).
struct RankSeries {
  std::size_t index = 0;  ///< into the window's facts
  double value_sum = 0.0;
  double step_sum = 0.0;
  double median_step = 0.0;
  /// The largest steps of the phase, largest first (ties: the earlier step):
  /// their index into the window's steps, value and step time.
  struct Top {
    std::size_t at = 0;
    double value = 0.0;
    double step = 0.0;
  };
  std::vector<Top> largest;
};

/// The rank's share without its `k` largest steps of the phase.
double share_without(const RankSeries& r, std::size_t k) {
  double value = r.value_sum;
  double step = r.step_sum;
  for (std::size_t i = 0; i < k && i < r.largest.size(); ++i) {
    value -= r.largest[i].value;
    step -= r.largest[i].step;
  }
  return step > 0.0 ? std::max(0.0, value) / step : 0.0;
}

/// Whether the `k` largest steps of the rank are each a stall.
bool all_stalls(const RankSeries& r, std::size_t k) {
  if (r.largest.size() < k) return false;
  for (std::size_t i = 0; i < k; ++i)
    if (r.largest[i].value < th::kStallStepFactor * r.median_step) return false;
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
    const std::vector<double> value = rank_step_series(w, i, metric);
    std::vector<double> step = rank_step_series(w, i, SM::StepTime);
    if (value.size() < std::size_t(th::kMinStepsForConfidentDiag)) continue;
    RankSeries r;
    r.index = i;
    r.value_sum = std::accumulate(value.begin(), value.end(), 0.0);
    r.step_sum = std::accumulate(step.begin(), step.end(), 0.0);
    if (r.step_sum <= 0.0) continue;
    std::vector<std::size_t> order(value.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    const std::size_t keep = std::min(th::kStallStepsMax, order.size());
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(keep), order.end(),
                      [&value](std::size_t a, std::size_t b) {
                        return value[a] > value[b] || (value[a] == value[b] && a < b);
                      });
    for (std::size_t k = 0; k < keep; ++k)
      r.largest.push_back({order[k], value[order[k]], step[order[k]]});
    r.median_step = median_of(std::move(step));
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
        sum += r.largest[i].value;
      if (named == nullptr || sum > most) {
        named = &r;
        most = sum;
      }
    }
    const double without = typical(k);
    if (without > share * (1.0 - th::kStallsHoldShare) || !all_stalls(*named, k)) continue;
    Json steps = Json::array();
    for (std::size_t i = 0; i < k; ++i) {
      const RankSeries::Top& t = named->largest[i];
      steps.push_back(Json{{ev::kRank, w.facts[named->index].rank},
                           {"step", w.steps[t.at]},
                           {ev::kValueMs, t.value},
                           {ev::kStepTimeMs, t.step}});
    }
    issue.evidence[ev::kStalls] =
        Json{{ev::kMetric, culprit_metric(*kind)},
             {"share", share},
             {"share_without", without},
             {"steps", std::move(steps)},
             {"median_value_ms", median_of(rank_step_series(w, named->index, metric))},
             {"median_step_time_ms", named->median_step}};
    return;
  }
}

}  // namespace traceml::analysis::step_time
