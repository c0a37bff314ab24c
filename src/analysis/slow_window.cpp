// The slow window (analysis/slow_window.hpp).
#include "analysis/slow_window.hpp"

#include <algorithm>
#include <cstddef>

#include "analysis/order_statistics.hpp"

namespace traceml::analysis {

std::optional<SlowestRun> slowest_run(const std::vector<double>& per_step, std::size_t k) {
  if (k == 0 || per_step.size() < 2 * k) return std::nullopt;
  double sum = 0.0;
  for (std::size_t i = 0; i < k; ++i)
    sum += per_step[i];
  SlowestRun best{0, sum};
  for (std::size_t i = k; i < per_step.size(); ++i) {
    sum += per_step[i] - per_step[i - k];
    if (sum > best.mean) best = {i - k + 1, sum};
  }
  best.mean /= double(k);
  return best;
}

std::optional<Json> slow_window(const StepWindow& w, const Issue& diagnosis) {
  const auto& stat = w.stat(StepMetric::StepTime);
  if (!stat) return std::nullopt;
  const bool named = !diagnosis.ranks.empty();
  const int rank = named ? diagnosis.ranks.front() : stat->representative_rank;
  std::optional<std::size_t> index;
  for (std::size_t i = 0; i < w.facts.size(); ++i)
    if (w.facts[i].rank == rank) index = i;
  if (!index || !w.facts[*index][StepMetric::StepTime]) return std::nullopt;
  std::vector<double> series = rank_step_series(w, *index, StepMetric::StepTime);
  const auto warmup = static_cast<std::size_t>(double(series.size()) * kSlowWindowWarmup);
  series.erase(series.begin(), series.begin() + static_cast<std::ptrdiff_t>(warmup));
  const auto run = slowest_run(series, kSlowWindowSteps);
  if (!run) return std::nullopt;
  std::vector<double> sorted = series;
  const double median = median_in_place(sorted);
  Json j = Json::object();
  j["rank"] = rank;
  j["basis"] = named ? "named_rank" : "median_rank";
  j["clock"] = clock_name(w.clock);
  j["first_step"] = w.steps[warmup + run->first];
  j["last_step"] = w.steps[warmup + run->first + kSlowWindowSteps - 1];
  j["steps"] = kSlowWindowSteps;
  j["mean_step_ms"] = run->mean;
  j["median_step_ms"] = median;
  if (median > 0.0)
    j["slower_pct"] = (run->mean / median - 1.0) * 100.0;
  else
    j["slower_pct"] = nullptr;
  return j;
}

}  // namespace traceml::analysis
