// The Step Time section (spec §4.1 and §5.4): the window and its diagnosis
// (step_window, step_time_diagnosis) assembled into the section — metadata,
// the payload metrics and rows, the step-time spread and the card.
#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "analysis/distribution.hpp"
#include "analysis/number_format.hpp"
#include "analysis/rank_identity.hpp"
#include "analysis/slow_window.hpp"
#include "analysis/step_time_diagnosis.hpp"
#include "analysis/step_window.hpp"
#include "analysis/summary.hpp"

namespace traceml::analysis {

using SM = StepMetric;
using step_time::SeriesCache;

namespace {

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

/// One metric of the payload: its name, average, median and worst (spec §5.4).
void add_metric(Section& s, const char* name, const std::optional<MetricStat>& st,
                std::optional<double> average) {
  s.metric_names.emplace_back(name);
  s.average.push_back(average);
  s.median.push_back(st ? Point{st->representative, std::to_string(st->representative_rank)}
                        : Point{});
  s.worst.push_back(st ? Point{st->worst, std::to_string(st->worst_rank)} : Point{});
}

}  // namespace

Section analyze_step_time(const model::Telemetry& t, const Options& o,
                          std::shared_ptr<const StepWindow>* window) {
  const auto shared = std::make_shared<const StepWindow>(build_step_window(t, o.window));
  if (window != nullptr) *window = shared;
  const StepWindow& w = *shared;
  Section s;
  s.name = "step_time";
  SeriesCache series(w);
  // Both clocks' step-time series in one pass; the window's clock's is the
  // StepTime series the trend note and the spread read.
  const std::array<std::vector<double>, 2> clocks = clock_step_series(w);
  if (w.stat(SM::StepTime)) series.put(SM::StepTime, clocks[static_cast<std::size_t>(w.clock)]);
  s.issues = step_time::diagnose(w, series);
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
  if (w.profiled_left_out > 0) s.window.profiled_steps_left_out = w.profiled_left_out;

  for (const auto& [name, m] : kPayloadMetrics) {
    const auto& st = w.stat(m);
    std::optional<double> avg;
    if (st) {
      double sum = 0.0;
      for (const auto& f : w.facts)
        sum += f[m].value_or(0.0);
      avg = sum / double(st->ranks);
    }
    add_metric(s, name, st, avg);
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
      add_metric(s, m.name, st, avg);
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
  if (auto slow = slow_window(w, s.diagnosis())) s.global_extra["slow_window"] = *slow;
  s.units = {{"time", "ms"}};
  if (activity) s.units.emplace_back("memory", "bytes");  // h2d_bytes_per_step
  s.card = card(w, s);
  return s;
}

}  // namespace traceml::analysis
