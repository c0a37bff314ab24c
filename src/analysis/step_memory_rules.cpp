// The rules of spec §4.4 in table order, the order of their issues, and the
// primary diagnosis with TraceML's confidence in it.
#include "analysis/step_memory_rules.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "analysis/neutral_issue.hpp"
#include "analysis/number_format.hpp"
#include "analysis/thresholds.hpp"

namespace traceml::analysis::step_memory {

namespace {

namespace th = thresholds;
using K = DiagnosisKind;

// TraceML's confidence in each verdict. Not thresholds: nothing compares
// against them; a neutral state serializes its value as evidence.
constexpr double kConfidencePressureCrit = 0.90;
constexpr double kConfidencePressureWarn = 0.80;
constexpr double kConfidenceImbalanceCrit = 0.85;
constexpr double kConfidenceImbalanceWarn = 0.75;
constexpr double kConfidenceCreepConfirmed = 0.88;
constexpr double kConfidenceCreepEarly = 0.60;
constexpr double kConfidenceNoGpu = 1.0;
constexpr double kConfidenceNoData = 0.0;
constexpr double kConfidenceBalanced = 0.75;

std::string percent0(double fraction) {
  return fixed(fraction * 100.0, 0);
}

std::string creep_note(const Creep& c) {
  std::string note = "baseline " + fixed(c.worst.baseline_avg, 0) + " B -> recent " +
                     fixed(c.worst.recent_avg, 0) + " B";
  note += std::string(", ") + (c.delta >= 0.0 ? "+" : "-") + fixed(std::fabs(c.delta), 0) + " B";
  if (c.worst.pct) note += ", (~" + percent0(*c.worst.pct) + "%)";
  return note;
}

Issue metric_issue(const MetricSignals& s, K kind, Severity sev, std::string summary,
                   const char* action, double score, Json evidence) {
  Issue i = issue_of(kind, sev, std::move(summary), action);
  i.metric = s.name;
  i.phase = "memory";
  i.score = score;
  i.skew_pct = s.skew;
  i.ranks = {s.worst_rank};
  i.evidence = std::move(evidence);
  return i;
}

Json creep_evidence(const Creep& c) {
  Json e = Json::object();
  e["overall_abs_delta_bytes"] = c.delta;
  e["overall_worst_growth_pct"] = c.worst.pct ? Json(*c.worst.pct) : Json();
  e["overall_median_growth_pct"] = c.median.pct ? Json(*c.median.pct) : Json();
  e["note"] = creep_note(c);
  return e;
}

/// The rules of spec §4.4 for one metric, in table order.
std::vector<Issue> metric_rules(const MetricSignals& s) {
  std::vector<Issue> out;
  if (s.steps_used < th::kStepMemoryMinSteps) return out;
  const std::string label = label_of(s.name);

  if (s.pressure && *s.pressure >= th::kMemoryPressureWarn) {
    const double p = *s.pressure;
    out.push_back(metric_issue(s, K::HighPressure,
                               p >= th::kMemoryPressureCrit ? Severity::Crit : Severity::Warn,
                               label + " is near device capacity (~" + percent0(p) + "%).",
                               "Reduce memory load.", p, Json{{"pressure_frac", p}}));
  }

  // Skew only matters once the worst rank is a real share of the device: a
  // large relative gap between two small footprints cannot cause an OOM.
  if (s.pressure) {
    const double p = *s.pressure;
    std::optional<Severity> sev;
    if (s.skew >= th::kMemoryImbalanceSkewCrit && p >= th::kMemoryImbalancePressureCrit) {
      sev = Severity::Crit;
    } else if (s.skew >= th::kMemoryImbalanceSkewWarn && p >= th::kMemoryImbalancePressureWarn) {
      sev = Severity::Warn;
    }
    if (sev) {
      out.push_back(metric_issue(
          s, K::Imbalance, *sev,
          label + " shows +" + fixed(s.skew * 100.0, 1) + "% cross-rank skew at ~" + percent0(p) +
              "% of device capacity.",
          "Inspect per-rank workload.", s.skew, Json{{"skew_pct", s.skew}, {"pressure_frac", p}}));
    }
  }

  if (s.creep && s.creep->confirmed) {
    out.push_back(metric_issue(
        s, K::CreepConfirmed, Severity::Warn, label + " is rising across the window.",
        "Check retained tensors or caches.", s.creep->score, creep_evidence(*s.creep)));
  } else if (s.creep && s.creep->early) {
    out.push_back(metric_issue(s, K::CreepEarly, Severity::Info,
                               label + " is rising from early to recent steps.",
                               "Watch the next window.", s.creep->score, creep_evidence(*s.creep)));
  }
  return out;
}

int rule_priority(const Issue& issue) {
  if (issue.is(K::HighPressure)) return 0;
  if (issue.is(K::Imbalance)) return 1;
  if (issue.is(K::CreepConfirmed)) return 2;
  return 3;  // CREEP_EARLY
}

/// (priority, -severity, -score, metric name), stable.
void sort_issues(std::vector<Issue>& issues) {
  std::stable_sort(issues.begin(), issues.end(), [](const Issue& a, const Issue& b) {
    const int pa = rule_priority(a), pb = rule_priority(b);
    if (pa != pb) return pa < pb;
    if (const int c = severity_then_score(a, b)) return c < 0;
    return a.metric.value_or("") < b.metric.value_or("");
  });
}

StepMemoryPrimary primary_from_issue(const Issue& issue, const MetricSignals& m) {
  StepMemoryPrimary p;
  p.kind = kind_from_name(issue.kind).value_or(K::NoData);  // the rules' kinds are all known
  p.severity = issue.severity;
  p.reason = issue.summary;
  p.action = issue.action;
  p.metric = m.name;
  p.steps_used = m.steps_used;
  p.worst_rank = m.worst_rank;
  const bool crit = issue.severity == Severity::Crit;
  if (p.kind == K::HighPressure) {
    p.confidence = crit ? kConfidencePressureCrit : kConfidencePressureWarn;
  } else if (p.kind == K::Imbalance) {
    p.confidence = crit ? kConfidenceImbalanceCrit : kConfidenceImbalanceWarn;
  } else if (p.kind == K::CreepConfirmed) {
    p.confidence = kConfidenceCreepConfirmed;
  } else {
    p.confidence = kConfidenceCreepEarly;
  }
  const auto note = issue.evidence.find("note");
  if (note != issue.evidence.end() && note->is_string()) p.note = note->get<std::string>();
  return p;
}

StepMemoryPrimary neutral(K kind, std::string reason, const char* action, std::string metric,
                          double confidence) {
  StepMemoryPrimary p;
  p.kind = kind;
  p.reason = std::move(reason);
  p.action = action;
  p.metric = std::move(metric);
  p.confidence = confidence;
  return p;
}

}  // namespace

std::vector<Issue> run_rules(const std::vector<MetricSignals>& metrics) {
  std::vector<Issue> issues;
  for (const auto& m : metrics) {
    auto fired = metric_rules(m);
    issues.insert(issues.end(), fired.begin(), fired.end());
  }
  sort_issues(issues);
  return issues;
}

/// Spec §4.4: the first issue, else the neutral state the data allow.
StepMemoryPrimary choose_primary(bool no_gpu, const std::vector<MetricSignals>& metrics,
                                 const std::vector<Issue>& issues) {
  if (no_gpu) {
    return neutral(K::NoGpu, "No GPU detected. Step memory uses torch-based GPU memory telemetry.",
                   "Step memory is not applicable for this run.", kReserved, kConfidenceNoGpu);
  }
  if (metrics.empty()) {
    return neutral(K::NoData, "No step-memory data yet.", "Wait for more completed steps.",
                   kReserved, kConfidenceNoData);
  }
  if (!issues.empty()) {
    return primary_from_issue(issues.front(), *find_metric(metrics, *issues.front().metric));
  }
  const bool ready = std::any_of(metrics.begin(), metrics.end(), [](const MetricSignals& m) {
    return m.steps_used >= th::kStepMemoryMinSteps;
  });
  if (!ready) {
    // The metric with the most steps; the first (allocated) keeps a tie.
    const MetricSignals* best = &metrics.front();
    for (const auto& m : metrics) {
      if (m.steps_used > best->steps_used) best = &m;
    }
    auto p = neutral(
        K::NoData, "Need at least " + std::to_string(th::kStepMemoryMinSteps) + " completed steps.",
        "Keep monitoring.", best->name, kConfidenceNoData);
    p.steps_used = best->steps_used;
    p.worst_rank = best->worst_rank;
    return p;
  }
  const MetricSignals* m = find_metric(metrics, kReserved);
  if (!m) m = find_metric(metrics, kAllocated);
  auto p = neutral(K::Balanced, "No clear pressure, imbalance, or creep signal.",
                   "Keep monitoring.", m->name, kConfidenceBalanced);
  p.steps_used = m->steps_used;
  p.worst_rank = m->worst_rank;
  return p;
}

/// Spec §4.0: a neutral primary as issues[0].
Issue issue_from_primary(const StepMemoryPrimary& p) {
  Json fields = Json::object();
  fields["steps_used"] = p.steps_used;
  fields["worst_rank"] = p.worst_rank ? Json(*p.worst_rank) : Json();
  fields["note"] = p.note ? Json(*p.note) : Json();
  fields["confidence"] = p.confidence;
  Issue i = neutral_issue(p.kind, p.reason, p.action, fields);
  i.severity = p.severity;
  i.metric = p.metric;
  if (p.worst_rank) i.ranks = {*p.worst_rank};
  return i;
}

}  // namespace traceml::analysis::step_memory
