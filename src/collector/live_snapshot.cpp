#include "collector/live_snapshot.hpp"

#include <algorithm>
#include <map>

#include "analysis/order_statistics.hpp"
#include "analysis/summary.hpp"

namespace traceml::collector {

namespace {

using model::Event;

/// The row of one rank from its steps in the live window.
void fill_row(RankRow& row, const std::vector<model::StepView>& steps) {
  row.rows = static_cast<std::int64_t>(steps.size());
  if (steps.empty()) return;
  // The diagnosis clock: the GPU's when every step of the window has it.
  row.gpu_clock = std::all_of(steps.begin(), steps.end(), [](const model::StepView& r) {
    return r.gpu_ms(Event::TracedStepTime).has_value();
  });
  const auto value = [&](const model::StepView& r, Event e) {
    return (row.gpu_clock ? r.gpu_ms(e) : r.cpu_ms(e)).value_or(0.0);
  };
  std::vector<double> totals;
  totals.reserve(steps.size());
  double sums[5] = {0, 0, 0, 0, 0};
  double residual = 0.0;
  for (const model::StepView& r : steps) {
    const double traced = value(r, Event::TracedStepTime);
    // Input wait is on the CPU clock only: the GPU is idle meanwhile.
    const double input = r.cpu_ms(Event::InputWait).value_or(0.0);
    const double phases[4] = {value(r, Event::H2D), value(r, Event::Forward),
                              value(r, Event::Backward), value(r, Event::OptimizerStep)};
    sums[0] += input;
    double timed = 0.0;
    for (int i = 0; i < 4; ++i) {
      sums[i + 1] += phases[i];
      timed += phases[i];
    }
    residual += std::max(0.0, traced - timed);
    totals.push_back(traced + input);
  }
  const double n = double(steps.size());
  row.input_ms = sums[0] / n;
  row.h2d_ms = sums[1] / n;
  row.forward_ms = sums[2] / n;
  row.backward_ms = sums[3] / n;
  row.optimizer_ms = sums[4] / n;
  row.residual_ms = residual / n;
  row.last_ms = totals.back();
  std::sort(totals.begin(), totals.end());
  row.median_ms = analysis::quantile_of_sorted(totals, 0.5);
  row.p95_ms = analysis::quantile_of_sorted(totals, 0.95);
}

bool stopped(RankCondition c) {
  return c == RankCondition::Silent || c == RankCondition::Stalled;
}

}  // namespace

std::int64_t LiveSnapshot::records_dropped() const {
  std::int64_t n = 0;
  for (const RankRow& r : ranks)
    n += r.live.records_dropped;
  return n;
}

int LiveSnapshot::ranks_connected() const {
  return static_cast<int>(std::count_if(ranks.begin(), ranks.end(), [](const RankRow& r) {
    return r.live.condition != RankCondition::Ended;
  }));
}

std::optional<int> hung_rank(const std::vector<model::Stall>& stalls,
                             const std::vector<RankRow>& ranks) {
  const model::Stall* hung = model::hung_stall(stalls);
  if (hung == nullptr) return std::nullopt;
  for (const RankRow& r : ranks)
    if (r.live.global_rank == hung->global_rank && stopped(r.live.condition))
      return r.live.global_rank;
  return std::nullopt;
}

LiveSnapshot snapshot_of(const LiveStatus& status) {
  LiveSnapshot s;
  s.stalls = status.stalls;
  s.counts.invalid_records = status.invalid_records;
  s.counts.rejected_connections = status.rejected_connections;
  // Read in place (StepView): a row of the log is no StepRecord in memory.
  std::map<int, std::vector<model::StepView>> steps;
  const model::StepLog& log = status.latest.telemetry.steps;
  for (auto it = log.begin(); it != log.end(); ++it) {
    const model::StepView v = it.view();
    steps[v.rank()].push_back(v);
  }
  s.ranks.reserve(status.ranks.size());
  for (const RankLive& l : status.ranks) {
    RankRow row;
    row.live = l;
    if (const auto it = steps.find(l.global_rank); it != steps.end()) fill_row(row, it->second);
    s.ranks.push_back(std::move(row));
  }
  s.hung_rank = hung_rank(s.stalls, s.ranks);
  if (!status.latest.telemetry.steps.empty()) {
    // The end of the run's engine, on the live window (TraceML's live view
    // diagnoses its latest 100 steps the same way).
    const analysis::Summary sum = analysis::summarize(status.latest.telemetry, {kLiveRows});
    if (!sum.primary.status.empty())
      s.verdict = LiveVerdict{sum.primary.kind, sum.primary.status, sum.primary.summary,
                              sum.primary.severity};
  }
  return s;
}

}  // namespace traceml::collector
