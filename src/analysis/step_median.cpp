#include "analysis/step_median.hpp"

#include <cmath>
#include <cstddef>
#include <vector>

#include "analysis/order_statistics.hpp"

namespace traceml::analysis {

std::map<int, double> median_step_ms(const model::Telemetry& t) {
  std::map<int, std::vector<double>> per_rank;
  const auto traced = static_cast<std::size_t>(model::Event::TracedStepTime);
  const auto input = static_cast<std::size_t>(model::Event::InputWait);
  std::vector<double>* rank_steps = nullptr;  // rows come in runs of one rank
  int rank_of_steps = 0;
  for (const auto& c : t.steps.chunks()) {  // the columns in place
    for (std::size_t i = 0; i < c->size(); ++i) {
      const unsigned mask = c->cpu_mask(i);
      if (((mask >> traced) & 1u) == 0) continue;
      double step = c->cpu(i, traced);
      if (((mask >> input) & 1u) != 0) {
        const double wait = c->cpu(i, input);
        if (std::isfinite(wait) && wait > 0.0) step += wait;
      }
      if (rank_steps == nullptr || c->rank(i) != rank_of_steps) {
        rank_of_steps = c->rank(i);
        rank_steps = &per_rank[rank_of_steps];  // std::map: stays valid
      }
      rank_steps->push_back(step);
    }
  }
  std::map<int, double> out;
  for (const auto& [rank, v] : per_rank)
    out[rank] = median_of(v);  // per_rank holds no empty vector
  return out;
}

}  // namespace traceml::analysis
