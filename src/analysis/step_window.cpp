#include "analysis/step_window.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace traceml::analysis {

using model::Event;
using model::StepRecord;

namespace {

constexpr std::array<const char*, kStepMetricCount> kMetricNames = {"input_wait",
                                                                    "h2d",
                                                                    "forward",
                                                                    "backward",
                                                                    "optimizer_step",
                                                                    "step_time",
                                                                    "traced_step_time",
                                                                    "residual_proxy",
                                                                    "compute",
                                                                    "step_time_cpu",
                                                                    "step_time_gpu",
                                                                    "traced_step_time_cpu",
                                                                    "traced_step_time_gpu",
                                                                    "dataloader_fetch"};

/// Each rank keeps this many windows of its latest steps before alignment, so
/// that ranks a little apart still share `window` common steps (TraceML's live
/// lookback; its summary path keeps one window and can align nothing when
/// ranks drift by more than a window).
constexpr std::int64_t kRankLookback = 4;

constexpr std::size_t idx(StepMetric m) {
  return static_cast<std::size_t>(m);
}

/// A clock's value of an event: non-finite is "not measured", negative is 0
/// (spec §4.1.1 event normalisation).
std::optional<double> clock_value(const StepRecord& r, Event e, Clock c) {
  auto v = c == Clock::Gpu ? r.events.gpu_ms(e) : r.events.cpu_ms(e);
  if (!v || !std::isfinite(*v)) return std::nullopt;
  return std::max(0.0, *v);
}

bool has_value(const StepRecord& r, Event e, Clock c) {
  return clock_value(r, e, c).has_value();
}

bool has_any_event(const StepRecord& r) {
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    if (r.events.has(static_cast<Event>(e))) return true;
  }
  return false;
}

/// Spec §4.1.3: the GPU clock only when every aligned row can be read on it.
Clock select_clock(const std::vector<std::vector<const StepRecord*>>& rows) {
  if (rows.empty()) return Clock::Cpu;
  for (const auto& rank_rows : rows) {
    for (const StepRecord* r : rank_rows) {
      if (!has_value(*r, Event::InputWait, Clock::Gpu) ||
          !has_value(*r, Event::TracedStepTime, Clock::Gpu)) {
        return Clock::Cpu;
      }
      for (Event e : {Event::H2D, Event::Forward, Event::Backward, Event::OptimizerStep}) {
        if (r->events.has(e) && !has_value(*r, e, Clock::Gpu)) return Clock::Cpu;
      }
    }
  }
  return Clock::Gpu;
}

/// Which events a rank can report on a clock over its aligned rows (spec
/// §4.1.4): "every-step" events must be on every row; occurrence events (H2D,
/// optimizer) on at least one, and count as 0 where absent.
struct Availability {
  std::array<bool, model::kEventCount> ok{};
};

Availability availability(const std::vector<const StepRecord*>& rows, Clock c) {
  Availability a;
  for (Event e : {Event::InputWait, Event::Forward, Event::Backward, Event::TracedStepTime}) {
    a.ok[std::size_t(e)] = std::all_of(rows.begin(), rows.end(),
                                       [&](const StepRecord* r) { return has_value(*r, e, c); });
  }
  for (Event e : {Event::H2D, Event::OptimizerStep}) {
    a.ok[std::size_t(e)] = std::any_of(rows.begin(), rows.end(),
                                       [&](const StepRecord* r) { return has_value(*r, e, c); });
  }
  return a;
}

/// The value of an event on one row, under a rank's availability.
std::optional<double> available_value(const StepRecord& r, Event e, Clock c,
                                      const Availability& a) {
  if (!a.ok[std::size_t(e)]) return std::nullopt;
  auto v = clock_value(r, e, c);
  return v ? v : std::optional<double>(0.0);  // only occurrence events can be absent here
}

std::optional<double> add(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b) return std::nullopt;
  return *a + *b;
}

/// The per-step values of the display metrics on the selected clock (§4.1.5).
struct StepValues {
  std::optional<double> input, h2d, forward, backward, optimizer, traced, compute, residual,
      step_time;
};

StepValues step_values(const StepRecord& r, Clock c, const Availability& a) {
  StepValues v;
  v.input = available_value(r, Event::InputWait, c, a);
  v.h2d = available_value(r, Event::H2D, c, a);
  v.forward = available_value(r, Event::Forward, c, a);
  v.backward = available_value(r, Event::Backward, c, a);
  v.optimizer = available_value(r, Event::OptimizerStep, c, a);
  v.traced = available_value(r, Event::TracedStepTime, c, a);
  v.compute = add(add(v.forward, v.backward), v.optimizer);
  if (v.traced && v.compute) {
    v.residual = std::max(0.0, *v.traced - v.h2d.value_or(0.0) - *v.compute);
  }
  v.step_time = add(v.input, v.traced);
  return v;
}

/// Running sum of a per-step value; the average is null if no step had one.
struct Mean {
  double sum = 0.0;
  bool any = false;
  void add(const std::optional<double>& v) {
    if (v) {
      sum += *v;
      any = true;
    }
  }
  [[nodiscard]] std::optional<double> over(std::size_t n) const {
    if (!any || n == 0) return std::nullopt;
    return sum / double(n);
  }
};

RankFacts rank_facts(int rank, const std::vector<const StepRecord*>& rows, Clock clock) {
  const Availability sel = availability(rows, clock);
  const Availability cpu = availability(rows, Clock::Cpu);
  const Availability gpu = availability(rows, Clock::Gpu);
  Mean input, h2d, fwd, bwd, opt, traced, residual, step, step_cpu, step_gpu, traced_cpu,
      traced_gpu, fetch;
  for (const StepRecord* r : rows) {
    const StepValues v = step_values(*r, clock, sel);
    input.add(v.input);
    h2d.add(v.h2d);
    fwd.add(v.forward);
    bwd.add(v.backward);
    opt.add(v.optimizer);
    traced.add(v.traced);
    residual.add(v.residual);
    step.add(v.step_time);
    const auto ic = available_value(*r, Event::InputWait, Clock::Cpu, cpu);
    const auto tc = available_value(*r, Event::TracedStepTime, Clock::Cpu, cpu);
    const auto ig = available_value(*r, Event::InputWait, Clock::Gpu, gpu);
    const auto tg = available_value(*r, Event::TracedStepTime, Clock::Gpu, gpu);
    step_cpu.add(add(ic, tc));
    step_gpu.add(add(ig, tg));
    traced_cpu.add(tc);
    traced_gpu.add(tg);
    fetch.add(ic);
  }
  const std::size_t n = rows.size();
  RankFacts f;
  f.rank = rank;
  auto set = [&](StepMetric m, std::optional<double> v) { f.avg[idx(m)] = v; };
  set(StepMetric::InputWait, input.over(n));
  set(StepMetric::H2D, h2d.over(n));
  set(StepMetric::Forward, fwd.over(n));
  set(StepMetric::Backward, bwd.over(n));
  set(StepMetric::OptimizerStep, opt.over(n));
  set(StepMetric::StepTime, step.over(n));
  set(StepMetric::TracedStepTime, traced.over(n));
  set(StepMetric::Residual, residual.over(n));  // mean of clamped per-step residuals
  set(StepMetric::Compute,
      add(add(f[StepMetric::Forward], f[StepMetric::Backward]), f[StepMetric::OptimizerStep]));
  set(StepMetric::StepTimeCpu, step_cpu.over(n));
  set(StepMetric::StepTimeGpu, step_gpu.over(n));
  set(StepMetric::TracedStepTimeCpu, traced_cpu.over(n));
  set(StepMetric::TracedStepTimeGpu, traced_gpu.over(n));
  set(StepMetric::DataloaderFetch, fetch.over(n));
  return f;
}

std::optional<MetricStat> metric_stat(const std::vector<RankFacts>& facts, StepMetric m) {
  std::vector<std::pair<int, double>> vals;  // (rank, value), ascending rank
  for (const auto& f : facts) {
    if (f[m]) vals.emplace_back(f.rank, *f[m]);
  }
  if (vals.empty()) return std::nullopt;
  MetricStat s;
  s.ranks = vals.size();
  std::vector<double> only;
  only.reserve(vals.size());
  for (const auto& [r, v] : vals)
    only.push_back(v);
  s.median = median_of(only);
  s.worst = vals.front().second;
  s.worst_rank = vals.front().first;
  for (const auto& [r, v] : vals) {
    if (v > s.worst) {
      s.worst = v;
      s.worst_rank = r;
    }
  }
  auto key = [&](const std::pair<int, double>& p) {
    return std::make_tuple(std::fabs(p.second - s.median), p.second, p.first);
  };
  const auto rep = *std::min_element(vals.begin(), vals.end(),
                                     [&](const auto& a, const auto& b) { return key(a) < key(b); });
  s.representative_rank = rep.first;
  s.representative = rep.second;
  if (vals.size() > 1) {
    if (s.median > 0) {
      s.skew = (s.worst - s.median) / s.median;
    } else if (s.worst <= 0) {
      s.skew = 0.0;
    }
  }
  return s;
}

/// Sorted, deduplicated steps of one rank: (step, row), the latest arrival
/// winning, limited to the latest `window` steps.
std::vector<std::pair<std::int64_t, const StepRecord*>> rank_steps(
    std::vector<const StepRecord*>& recs, std::int64_t window) {
  // Records usually arrive in step order; sort only when they do not.
  const bool sorted =
      std::is_sorted(recs.begin(), recs.end(), [](auto* a, auto* b) { return a->step < b->step; });
  if (!sorted) {
    std::stable_sort(recs.begin(), recs.end(), [](auto* a, auto* b) { return a->step < b->step; });
  }
  std::vector<std::pair<std::int64_t, const StepRecord*>> out;
  out.reserve(recs.size());
  for (const StepRecord* r : recs) {
    if (!out.empty() && out.back().first == r->step) {
      out.back().second = r;  // stable order: a later arrival replaces an earlier one
    } else {
      out.emplace_back(r->step, r);
    }
  }
  if (window > 0 && std::int64_t(out.size()) > window) {
    out.erase(out.begin(), out.end() - window);
  }
  return out;
}

}  // namespace

const char* step_metric_name(StepMetric m) {
  return kMetricNames[idx(m)];
}

double median_of(std::vector<double> v) {
  const std::size_t n = v.size();
  const auto mid = v.begin() + std::ptrdiff_t(n / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (n % 2 == 1) return *mid;
  const double hi = *mid;
  const double lo = *std::max_element(v.begin(), mid);
  return (lo + hi) / 2.0;
}

StepWindow build_step_window(const model::Telemetry& t, std::int64_t window) {
  StepWindow w;
  w.strategy = t.run.strategy;

  // Group usable rows by rank (ranks are small non-negative integers).
  std::map<int, std::vector<const StepRecord*>> by_rank;
  std::vector<std::int64_t> all_steps;
  all_steps.reserve(t.steps.size());
  for (const auto& r : t.steps) {
    if (!has_any_event(r)) continue;  // an empty events object is not a row
    by_rank[r.global_rank].push_back(&r);
    all_steps.push_back(r.step);
    w.latest_step = w.latest_step ? std::max(*w.latest_step, r.step) : r.step;
  }
  std::sort(all_steps.begin(), all_steps.end());
  w.distinct_steps =
      std::int64_t(std::unique(all_steps.begin(), all_steps.end()) - all_steps.begin());
  std::vector<std::int64_t>().swap(all_steps);

  std::vector<std::vector<std::pair<std::int64_t, const StepRecord*>>> per_rank;
  for (auto& [rank, recs] : by_rank) {
    w.expected_ranks.push_back(rank);
    per_rank.push_back(rank_steps(recs, window > 0 ? window * kRankLookback : 0));
  }
  w.ranks_present = per_rank.size();
  if (per_rank.empty()) return w;

  // Intersection of every rank's steps (spec §4.1.2), then the latest `window`.
  std::vector<std::int64_t> common;
  common.reserve(per_rank.front().size());
  for (const auto& p : per_rank.front())
    common.push_back(p.first);
  for (std::size_t i = 1; i < per_rank.size() && !common.empty(); ++i) {
    std::vector<std::int64_t> next;
    next.reserve(common.size());
    auto it = per_rank[i].begin();
    for (std::int64_t s : common) {
      while (it != per_rank[i].end() && it->first < s)
        ++it;
      if (it != per_rank[i].end() && it->first == s) next.push_back(s);
    }
    common.swap(next);
  }
  if (window > 0 && std::int64_t(common.size()) > window) {
    common.erase(common.begin(), common.end() - window);
  }
  if (common.empty()) return w;
  w.steps = std::move(common);

  w.rows.resize(per_rank.size());
  for (std::size_t i = 0; i < per_rank.size(); ++i) {
    auto& out = w.rows[i];
    out.reserve(w.steps.size());
    auto it = per_rank[i].begin();
    for (std::int64_t s : w.steps) {
      while (it->first < s)
        ++it;  // every aligned step is in every rank's list
      out.push_back(it->second);
    }
  }
  w.clock = select_clock(w.rows);
  for (std::size_t i = 0; i < w.rows.size(); ++i) {
    w.facts.push_back(rank_facts(w.expected_ranks[i], w.rows[i], w.clock));
  }
  for (std::size_t m = 0; m < kStepMetricCount; ++m) {
    w.stats[m] = metric_stat(w.facts, static_cast<StepMetric>(m));
  }
  return w;
}

std::vector<double> step_series(const StepWindow& w, StepMetric m, bool worst) {
  std::vector<double> series;
  if (w.facts.empty()) return series;
  // Availability is a whole-window property of each rank: compute it once.
  std::vector<Availability> avail;
  std::vector<std::size_t> measured;  // indices into facts of ranks measuring m
  for (std::size_t i = 0; i < w.facts.size(); ++i) {
    avail.push_back(availability(w.rows[i], w.clock));
    if (w.facts[i][m]) measured.push_back(i);
  }
  if (measured.empty()) return series;
  series.reserve(w.steps.size());
  std::vector<double> at_step(measured.size());
  for (std::size_t s = 0; s < w.steps.size(); ++s) {
    for (std::size_t k = 0; k < measured.size(); ++k) {
      const std::size_t i = measured[k];
      const StepValues v = step_values(*w.rows[i][s], w.clock, avail[i]);
      std::optional<double> x;
      switch (m) {
        case StepMetric::InputWait:
          x = v.input;
          break;
        case StepMetric::H2D:
          x = v.h2d;
          break;
        case StepMetric::Forward:
          x = v.forward;
          break;
        case StepMetric::Backward:
          x = v.backward;
          break;
        case StepMetric::OptimizerStep:
          x = v.optimizer;
          break;
        case StepMetric::StepTime:
          x = v.step_time;
          break;
        case StepMetric::TracedStepTime:
          x = v.traced;
          break;
        case StepMetric::Residual:
          x = v.residual;
          break;
        default:
          x = std::nullopt;
          break;  // only display metrics have a series
      }
      at_step[k] = x.value_or(0.0);
    }
    series.push_back(worst ? *std::max_element(at_step.begin(), at_step.end())
                           : median_of(at_step));
  }
  return series;
}

}  // namespace traceml::analysis
