// The run-level part of the diagnosis: the primary verdict (spec §4.5), the
// meta block (spec §5.2) and the section orchestration with its fallback.
#include "analysis/summary.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/number_format.hpp"
#include "analysis/rank_identity.hpp"
#include "analysis/sample_statistics.hpp"

namespace traceml::analysis {

namespace ev = evidence;
using K = DiagnosisKind;

namespace {

/// Python round(x, 3), null stays null (the only rounding in final_summary.json).
Json r3(const std::optional<double>& v) {
  if (!v) return nullptr;
  return py_round(*v, 3);
}

std::optional<double> average_of(const Section& s, const std::string& metric) {
  const auto i = s.metric_index(metric);
  if (!i || *i >= s.average.size()) return std::nullopt;
  return s.average[*i];
}

const Point* point_of(const std::vector<Point>& points, const Section& s,
                      const std::string& metric) {
  const auto i = s.metric_index(metric);
  if (!i || *i >= points.size()) return nullptr;
  return &points[*i];
}

bool in(const std::string& k, std::initializer_list<const char*> set) {
  return std::any_of(set.begin(), set.end(), [&](const char* x) { return k == x; });
}

Json steps_analyzed(const Section& st) {
  if (st.window.steps_analyzed) return *st.window.steps_analyzed;
  return nullptr;
}

/// `type: phase_share` evidence: the average step decomposition.
Json phase_share(const Section& st, const Json& util) {
  Json e = Json::object();
  e[ev::kType] = "phase_share";
  e[ev::kBasis] = "average";
  e[ev::kStepsAnalyzed] = steps_analyzed(st);
  // The phase metrics under their step-time payload names.
  for (const char* m : {"step_time_ms", "traced_step_time_ms"})
    e[m] = r3(average_of(st, m));
  e[ev::kDiagnosisClock] = st.window.diagnosis_clock ? Json(*st.window.diagnosis_clock) : Json();
  for (const char* m :
       {"dataloader_fetch_cpu_ms", "input_wait_ms", "h2d_ms", "compute_ms", "residual_ms"})
    e[m] = r3(average_of(st, m));
  e[ev::kGpuUtilAvgPercent] = util;
  return e;
}

/// Median rank vs worst rank of one step-time metric.
std::optional<Json> comparison(const Section& st, const std::string& metric,
                               const std::string& phase) {
  const Point* med = point_of(st.median, st, metric);
  const Point* wor = point_of(st.worst, st, metric);
  if (!med || !wor || !med->value || !wor->value || !med->idx || !wor->idx) return std::nullopt;
  Json c = Json::object();
  c[ev::kMetric] = metric;
  c[ev::kPhase] = phase;
  c[ev::kMedian] = Json{{ev::kRank, std::stoi(*med->idx)}, {ev::kValueMs, r3(med->value)}};
  c[ev::kWorst] = Json{{ev::kRank, std::stoi(*wor->idx)}, {ev::kValueMs, r3(wor->value)}};
  c[ev::kDeltaMs] = r3(*wor->value - *med->value);
  c[ev::kRatio] = *med->value > 0 ? r3(*wor->value / *med->value) : Json();
  return c;
}

std::string without_ms(const std::string& metric) {
  return metric.size() > 3 && metric.compare(metric.size() - 3, 3, "_ms") == 0
             ? metric.substr(0, metric.size() - 3)
             : metric;
}

Json rank_comparison(const Section& st, const Issue& d, const Json& util) {
  Json e = Json::object();
  e[ev::kType] = "rank_comparison";
  e[ev::kStepsAnalyzed] = steps_analyzed(st);
  e[ev::kGpuUtilAvgPercent] = util;
  if (d.is(K::Straggler)) {
    Json list = Json::array();
    for (auto [metric, phase] :
         {std::pair{"input_wait_ms", "input"}, std::pair{"compute_ms", "compute"},
          std::pair{"h2d_ms", "h2d"}, std::pair{"residual_ms", "residual"}}) {
      if (auto c = comparison(st, metric, phase)) list.push_back(*c);
    }
    e[ev::kComparisons] = list;
    return e;
  }
  const auto kind = kind_from_name(d.kind);
  const char* named = kind ? culprit_metric(*kind) : nullptr;
  std::string metric = named != nullptr ? named : "input_wait_ms";
  if (kind == K::ComputeStraggler) {
    const std::string p = d.phase.value_or("");
    if (in(p, {"forward", "backward", "optimizer"})) metric = p + "_ms";
  }
  if (auto c = comparison(st, metric, d.phase.value_or(without_ms(metric)))) {
    for (auto& [k, v] : c->items())
      e[k] = v;
  }
  return e;
}

}  // namespace

Primary primary_diagnosis(const Section& system, const Section& /*process*/,
                          const Section& step_time, const Section& /*step_memory*/) {
  const Issue& d = step_time.diagnosis();
  const std::optional<K> k = kind_from_name(d.kind);
  const Json util = r3(average_of(system, "gpu_util_percent"));
  Primary p;
  p.section = "step_time";
  p.severity = Severity::Info;
  const bool straggler = k && is_straggler(*k);
  const bool phase_kind = k && is_phase_share(*k);
  if (straggler || phase_kind) {
    p.kind = d.kind;
    p.status = d.status;
    p.severity = d.severity;
    p.summary = d.summary;
    p.action = d.action;
    if (straggler) {
      p.evidence = rank_comparison(step_time, d, util);
      // Every rank comparison ends with its score and the two times it divides.
      if (d.score) {
        p.evidence[ev::kScore] = *d.score;
        p.evidence[ev::kScoreBasis] = "visible_cost_ms / victim_step_time_ms";
        p.evidence[ev::kScoreNumeratorMs] = d.evidence.value(ev::kVisibleCostMs, Json());
        p.evidence[ev::kScoreDenominatorMs] = d.evidence.value(ev::kStepTimeMs, Json());
      }
    } else {
      p.evidence = phase_share(step_time, util);
      if (d.score) {
        p.evidence[ev::kScore] = *d.score;
        p.evidence[ev::kScoreBasis] = "median_per_rank_step_time_share";
        p.evidence[ev::kScoreDenominator] = "selected-clock Step Time per rank";
      }
    }
  } else if (k && is_insufficient_step_time(*k)) {
    p.set_kind(K::InsufficientStepTimeData);
    if (k == K::IncompleteData) {
      p.summary =
          "Step timing is missing phase signals, so no reliable performance diagnosis is "
          "available.";
      p.action =
          "Instrument the missing phases; the Step Time section lists the missing signal "
          "names.";
    } else {
      p.summary =
          "Not enough completed step-time samples were available for a stable performance "
          "diagnosis.";
      p.action = "Run for more steps or ensure step timing is recorded.";
    }
    p.evidence = Json{{ev::kType, "insufficient_data"},
                      {ev::kStepTimeStatus, d.status.empty() ? status_of(K::NoData) : d.status},
                      {ev::kStepsAnalyzed, steps_analyzed(step_time)},
                      {ev::kGpuUtilAvgPercent, util}};
  } else if (k == K::Balanced && [&] {
               const auto sys = kind_from_name(system.diagnosis().kind);
               return sys && is_gpu_utilization(*sys);
             }()) {
    p.set_kind(K::LowGpuUtilizationUnexplained);
    p.section = "system";
    p.summary =
        "GPU utilization was low, but step timing did not identify input, residual time, "
        "compute-skew, or rank-skew as the cause.";
    p.action =
        "Inspect untraced work, validation/checkpointing, kernel efficiency, or missing "
        "instrumentation.";
    p.evidence = Json{{ev::kType, "utilization_fallback"},
                      {ev::kGpuUtilAvgPercent, util},
                      {ev::kStepTimeStatus, d.status},
                      {ev::kStepsAnalyzed, steps_analyzed(step_time)}};
  } else {
    p.set_kind(K::NoClearPerformanceBottleneck);
    p.summary =
        "Step timing did not show material input, residual time, compute-skew, or rank-skew "
        "bottlenecks.";
    p.action =
        "No data-pipeline or rank-skew bottleneck was detected; use model/kernel-level profiling "
        "if more speed is needed.";
    p.evidence = phase_share(step_time, util);
    p.evidence[ev::kType] = "no_clear_bottleneck";
    p.evidence[ev::kStepTimeStatus] = d.status;
  }
  return p;
}

namespace {

template <typename Fn>
Section guarded(const std::string& name, Fn&& fn) {
  try {
    Section s = fn();
    if (s.issues.empty()) return fallback_section(name);  // the invariant: never empty
    return s;
  } catch (const std::exception&) {
    return fallback_section(name);
  }
}

/// Issue 5: each node's GPU idle time within steps, beside its GPU
/// utilisation: the mean `gpu_idle_fraction` of the node's ranks (Step Time
/// rows). A rank of unknown node counts toward the only node when there is
/// one. Added only when some node has a value, so that runs without GPU
/// activity records keep exactly the spec's System metrics.
void add_gpu_idle(Section& system, const Section& step_time) {
  const auto m = step_time.metric_index("gpu_idle_fraction");
  if (!m || system.rows.empty()) return;
  std::vector<MeanMax> per_row(system.rows.size());
  bool any = false;
  for (const auto& row : step_time.rows) {
    if (*m >= row.metrics.size() || !row.metrics[*m]) continue;
    std::optional<std::size_t> at;
    if (row.identity.node_rank) {
      const std::string label = std::to_string(*row.identity.node_rank);
      for (std::size_t k = 0; k < system.rows.size(); ++k) {
        if (system.rows[k].key == label) at = k;
      }
    } else if (system.rows.size() == 1) {
      at = 0;
    }
    if (!at) continue;
    per_row[*at].add(row.metrics[*m]);
    any = true;
  }
  if (!any) return;
  const auto util = system.metric_index("gpu_util_percent");
  const std::size_t pos = util ? *util + 1 : system.metric_names.size();
  const auto at = [pos](auto& v) { return v.begin() + static_cast<std::ptrdiff_t>(pos); };
  system.metric_names.insert(at(system.metric_names), "gpu_idle_fraction");
  for (std::size_t k = 0; k < system.rows.size(); ++k) {
    auto& metrics = system.rows[k].metrics;
    metrics.insert(at(metrics), per_row[k].mean());
  }
  const RowStatistics st = row_statistics(system.rows, pos, WorseEnd::Higher);  // idle is bad
  system.average.insert(at(system.average), st.average);
  system.median.insert(at(system.median), st.median);
  system.worst.insert(at(system.worst), st.worst);
}

Meta derive_meta(const model::Telemetry& t, const Summary& s) {
  Meta m;
  std::string name = t.run.run_name;
  name.erase(0, name.find_first_not_of(" \t\r\n"));
  name.erase(name.find_last_not_of(" \t\r\n") + 1);
  if (!name.empty()) m.run_name = name;

  const std::array<const Section*, 4> sections = {&s.system, &s.process, &s.step_time,
                                                  &s.step_memory};
  m.mode = "no_data";
  for (const Section* sec : sections) {
    if (sec->metadata.mode == "multi_node") m.mode = "multi_node";
  }
  if (m.mode == "no_data") {
    for (const Section* sec : sections) {
      if (sec->metadata.mode == "single_node") m.mode = "single_node";
    }
  }
  std::int64_t world = 0;
  std::set<int> nodes;
  for (const Section* sec : sections) {
    world = std::max({world, sec->metadata.global_ranks_seen.value_or(0),
                      sec->metadata.global_ranks_used.value_or(0)});
    if (sec->index_by == "global_rank") world = std::max(world, std::int64_t(sec->rows.size()));
    for (const auto& row : sec->rows) {
      world = std::max<std::int64_t>(world, row.identity.world_size.value_or(0));
      if (row.identity.node_rank) nodes.insert(*row.identity.node_rank);
    }
  }
  if (world > 0) m.world_size = world;
  // The System section counts nodes and GPUs only from its samples; without
  // any, "0 nodes / 0 GPUs" would be a claim, not an observation, so the
  // other sections' evidence is used instead (or nothing is said).
  const bool system_seen = s.system.metadata.samples.value_or(0) > 0;
  if (system_seen && s.system.metadata.nodes_observed) {
    m.nodes_observed = s.system.metadata.nodes_observed;
  } else if (!nodes.empty()) {
    m.nodes_observed = std::int64_t(nodes.size());
  }
  if (system_seen && s.system.metadata.gpus_observed) {
    m.gpus_observed = s.system.metadata.gpus_observed;
  } else if (!t.process.empty()) {
    std::set<std::pair<int, int>> devices;  // (node, device) of processes with a GPU
    for (const auto& p : t.process) {
      if (!p.gpu) continue;
      const Identity id = identity_of(t, p.global_rank);
      devices.emplace(id.node_rank.value_or(0), p.gpu->device.value_or(p.global_rank));
    }
    m.gpus_observed = std::int64_t(devices.size());
  } else if (s.step_time.window.diagnosis_clock.value_or("cpu") == "gpu") {
    m.gpus_observed = m.world_size;  // every rank timed its steps on a GPU
  }
  return m;
}

}  // namespace

double step_begin(double end_ts, std::optional<double> traced_ms,
                  std::optional<double> input_wait_ms) {
  double ms = 0.0;
  for (const auto& part : {traced_ms, input_wait_ms})
    if (part && std::isfinite(*part) && *part > 0.0) ms += *part;
  return end_ts - ms / 1000.0;
}

std::optional<double> run_duration(const model::Telemetry& t) {
  std::optional<double> first;
  std::optional<double> last;
  const auto see = [&](double begin, double end) {
    if (std::isfinite(begin) && (!first || begin < *first)) first = begin;
    if (std::isfinite(end) && (!last || end > *last)) last = end;
  };
  const auto traced = static_cast<std::size_t>(model::Event::TracedStepTime);
  const auto input = static_cast<std::size_t>(model::Event::InputWait);
  // A column of an event no row of the chunk measured may hold nothing:
  // read a value only under its bit.
  const auto measured = [](const auto& c, std::size_t i, std::size_t e) {
    return ((c.cpu_mask(i) >> e) & 1u) != 0 ? std::optional<double>(c.cpu(i, e)) : std::nullopt;
  };
  for (const auto& c : t.steps.chunks()) {
    for (std::size_t i = 0; i < c->size(); ++i)
      see(step_begin(c->ts(i), measured(*c, i, traced), measured(*c, i, input)), c->ts(i));
  }
  for (const auto& r : t.system)
    see(r.ts, r.ts);
  for (const auto& r : t.process)
    see(r.ts, r.ts);
  // A store that keeps the run bounded (collector::RunState) has left the
  // oldest rows out: its totals hold the run's ends.
  if (t.totals) {
    if (const auto e = t.totals->earliest_ts; e && std::isfinite(*e) && (!first || *e < *first))
      first = *e;
    if (const auto l = t.totals->latest_ts; l && std::isfinite(*l) && (!last || *l > *last))
      last = *l;
  }
  if (!first || !last || *last < *first) return std::nullopt;
  // To the millisecond: the clocks' sum and difference carry float noise
  // (18.000309944152832) that no reader wants in the file.
  return std::round((*last - *first) * 1000.0) / 1000.0;
}

Summary summarize(const model::Telemetry& t, const Options& o) {
  Summary s;
  // Spec §5.1: sections are built in this order.
  s.system = guarded("system", [&] { return analyze_system(t, o); });
  s.process = guarded("process", [&] { return analyze_process(t, o); });
  s.step_time = guarded("step_time", [&] { return analyze_step_time(t, o, &s.step_window); });
  s.step_memory = guarded("step_memory", [&] { return analyze_step_memory(t, o); });
  add_gpu_idle(s.system, s.step_time);
  s.duration_s = s.step_time.metadata.duration_s;
  if (!s.duration_s) s.duration_s = s.process.metadata.duration_s;
  if (!s.duration_s) s.duration_s = s.system.metadata.duration_s;
  s.run_duration_s = run_duration(t);
  s.meta = derive_meta(t, s);
  s.primary = primary_diagnosis(s.system, s.process, s.step_time, s.step_memory);
  return s;
}

}  // namespace traceml::analysis
