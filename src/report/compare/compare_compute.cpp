// What compare decides (spec §6.2, §6.3): the sections' deltas, the noise
// decision and the verdict, as a CompareReport. Every value is read
// defensively: summaries from older TraceML schemas, and sections that are
// missing or mistyped, yield absent values and a less comparable verdict,
// never an exception. Nothing here is wording of the output but the
// findings' sentences; compare_json.cpp and compare_text.cpp write it.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <vector>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/number_format.hpp"
#include "analysis/summary_keys.hpp"
#include "analysis/thresholds.hpp"
#include "report/compare/compare.hpp"
#include "report/compare/compare_noise.hpp"
#include "report/json_read.hpp"
#include "report/summary_view.hpp"
#include "report/text/text_format.hpp"

namespace traceml::report {

namespace {

namespace th = analysis::thresholds;
namespace key = analysis::summary_keys;
using analysis::fixed;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
/// The first schema whose step-time section carries per-clock step times
/// (step_time_cpu_ms / step_time_gpu_ms) and dataloader_fetch_cpu_ms.
constexpr double kPerClockSchema = 1.7;

using namespace json_read;

/// schema_version as a number: stored as a number, or as a numeric string.
std::optional<double> schema_number(const Json& summary) {
  const Json* v = child(&summary, key::kSchemaVersion);
  if (const auto n = number(v)) return n;
  if (const auto s = text(v)) {
    char* end = nullptr;
    const double d = std::strtod(s->c_str(), &end);
    if (end != s->c_str() && *end == '\0' && std::isfinite(d)) return d;
  }
  return std::nullopt;
}

bool per_clock_schema(const Json& summary) {
  const auto v = schema_number(summary);
  return v && *v >= kPerClockSchema - 1e-9;
}

/// The schema_version as text for messages: "1.7", "1", or the stored string.
std::string schema_text(const Json& summary) {
  return schema_version_text(&summary);
}

const Json* section(const Json& summary, const char* name) {
  return object_child(&summary, name);
}

std::optional<std::string> diagnosis_status(const Json* sec) {
  return text(path(sec, {key::kDiagnosis, key::kStatus}));
}

std::optional<std::string> diagnosis_clock(const Json* sec) {
  const auto c = text(path(sec, {key::kGlobal, key::kWindow, key::kDiagnosisClock}));
  if (c && (*c == "cpu" || *c == "gpu")) return c;
  return std::nullopt;
}

std::optional<double> finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

// ---- metrics --------------------------------------------------------------

struct Pair {
  std::optional<double> lhs;
  std::optional<double> rhs;
};

MetricDelta numeric_metric(const char* metric_key, const std::string& label, const char* unit,
                           const Pair& v, const char* delta_unit, const char* direction) {
  MetricDelta m;
  m.key = metric_key;
  m.label = label;
  m.unit = unit;
  m.lhs = v.lhs;
  m.rhs = v.rhs;
  if (v.lhs && v.rhs) {
    // Finite inputs may still overflow: such a change is not a number.
    const double delta = *v.rhs - *v.lhs;
    m.delta = finite(delta);
    if (std::fabs(*v.lhs) > th::kComparePctBaselineEps)
      m.pct_change = finite(100.0 * delta / *v.lhs);
  }
  m.delta_unit = delta_unit;
  m.direction = direction;
  return m;
}

MetricDelta text_metric(const char* metric_key, const std::string& label,
                        const std::optional<std::string>& lhs,
                        const std::optional<std::string>& rhs) {
  MetricDelta m;
  m.key = metric_key;
  m.label = label;
  m.unit = "text";
  m.lhs_text = lhs;
  m.rhs_text = rhs;
  m.delta_unit = "text";
  m.direction = "context";
  return m;
}

/// A section of both summaries and the envelope of its compare section.
template <class Section>
Section open_section(const Json* lhs, const Json* rhs) {
  Section s;
  s.available = lhs != nullptr || rhs != nullptr;
  s.diagnosis = DiagnosisChange{diagnosis_status(lhs), diagnosis_status(rhs)};
  return s;
}

// ---- step time ------------------------------------------------------------

struct StepClocks {
  std::optional<double> cpu;
  std::optional<double> gpu;
};

StepClocks step_clocks(const Json& summary) {
  const Json* sec = section(summary, key::kStepTime);
  if (per_clock_schema(summary))
    return {average(sec, key::kStepTimeCpuMs), average(sec, key::kStepTimeGpuMs)};
  // Before schema 1.7 a summary had one CPU-measured step total.
  return {average(sec, "total_step_ms"), std::nullopt};
}

/// The phase that takes the most time (first maximum; nulls skipped).
std::optional<std::string> dominant_phase(const Json* sec) {
  static const std::pair<const char*, const char*> kPhases[] = {{"input", key::kInputWaitMs},
                                                                {"h2d", key::kH2dMs},
                                                                {"forward", key::kForwardMs},
                                                                {"backward", key::kBackwardMs},
                                                                {"optimizer", key::kOptimizerMs}};
  std::optional<std::string> best;
  double best_v = 0.0;
  for (const auto& [name, metric] : kPhases) {
    const auto v = average(sec, metric);
    if (v && (!best || *v > best_v)) {
      best = name;
      best_v = *v;
    }
  }
  return best;
}

/// The stalls a step_time section's findings name (the first that names
/// some), read defensively: anything malformed is no stall.
std::optional<StallsSeen> stalls_of(const Json* sec) {
  const Json* issues = array_child(sec, "issues");
  if (issues == nullptr) return std::nullopt;
  for (const Json& issue : *issues) {
    const Json* st = object_child(object_child(&issue, "evidence"), analysis::evidence::kStalls);
    const Json* steps = array_child(st, "steps");
    const auto share = number(child(st, "share"));
    const auto without = number(child(st, "share_without"));
    const auto kind = text(child(&issue, "kind"));
    const auto metric = text(child(st, "metric"));
    if (steps == nullptr || steps->empty() || !share || !without || !kind || !metric) continue;
    StallsSeen s;
    s.kind = *kind;
    s.metric = *metric;
    s.share = *share;
    s.share_without = *without;
    for (const Json& step : *steps) {
      const auto id = integer(child(&step, "step"));
      const auto ms = number(child(&step, "value_ms"));
      if (!id || !ms) return std::nullopt;
      if (!s.rank) s.rank = integer(child(&step, "rank"));
      s.steps.emplace_back(*id, *ms);
    }
    return s;
  }
  return std::nullopt;
}

StepTimeCompare step_time_section(const Json& lhs_sum, const Json& rhs_sum) {
  const Json* lhs = section(lhs_sum, key::kStepTime);
  const Json* rhs = section(rhs_sum, key::kStepTime);
  auto s = open_section<StepTimeCompare>(lhs, rhs);
  auto& metrics = s.metrics;
  auto& notes = s.notes;

  const StepClocks a = step_clocks(lhs_sum);
  const StepClocks b = step_clocks(rhs_sum);
  std::optional<std::string> clock;
  Pair step;
  if (a.gpu && b.gpu) {
    clock = "gpu";
    step = {a.gpu, b.gpu};
  } else if (a.cpu && b.cpu) {
    clock = "cpu";
    step = {a.cpu, b.cpu};
  }
  const std::string step_label = !clock            ? "Step Time"
                                 : *clock == "gpu" ? "GPU Step Time"
                                                   : "CPU Step Time";
  metrics.push_back(
      numeric_metric(key::kStepTimeMs, step_label, "ms", step, "ms", "higher_is_worse"));
  // Ours: the median step beside the mean, which a few stalls move alone.
  metrics.push_back(numeric_metric(
      "step_time_median_ms", step_label + " median", "ms",
      clock ? Pair{median_step_ms(lhs, *clock), median_step_ms(rhs, *clock)} : Pair{}, "ms",
      "higher_is_worse"));

  // Phases are per-clock averages: comparing a GPU-clock phase with a
  // CPU-clock one would report the clock change as a phase shift.
  const auto ca = diagnosis_clock(lhs);
  const auto cb = diagnosis_clock(rhs);
  const bool same_clock = ca && cb && *ca == *cb;
  auto gated = [same_clock, lhs, rhs](const char* metric) {
    return same_clock ? Pair{average(lhs, metric), average(rhs, metric)} : Pair{};
  };
  metrics.push_back(
      numeric_metric("input_ms", "Input", "ms", gated(key::kInputWaitMs), "ms", "higher_is_worse"));
  const char* fetch_a = per_clock_schema(lhs_sum) ? key::kDataloaderFetchCpuMs : "dataloader_ms";
  const char* fetch_b = per_clock_schema(rhs_sum) ? key::kDataloaderFetchCpuMs : "dataloader_ms";
  metrics.push_back(numeric_metric(key::kDataloaderFetchCpuMs, "DataLoader Fetch (CPU)", "ms",
                                   Pair{average(lhs, fetch_a), average(rhs, fetch_b)}, "ms",
                                   "context"));
  static const std::pair<const char*, const char*> kPhases[] = {
      {key::kH2dMs, "H2D"},           {key::kComputeMs, "Compute"},
      {key::kResidualMs, "Residual"}, {key::kForwardMs, "Forward"},
      {key::kBackwardMs, "Backward"}, {key::kOptimizerMs, "Optimizer"}};
  for (const auto& [metric, label] : kPhases)
    metrics.push_back(numeric_metric(metric, label, "ms", gated(metric), "ms", "higher_is_worse"));
  metrics.push_back(
      same_clock ? text_metric("dominant_phase", "Dominant phase", dominant_phase(lhs),
                               dominant_phase(rhs))
                 : text_metric("dominant_phase", "Dominant phase", std::nullopt, std::nullopt));

  if (!clock) {
    notes.emplace_back(
        "Step Time metrics are unavailable because the summaries have no common measured GPU or "
        "CPU clock.");
  } else if (*clock == "cpu" && (a.gpu || b.gpu)) {
    // Our addition: say why a measured GPU clock was not used.
    notes.push_back(std::string("Step Time is compared on the CPU clock because run ") +
                    (a.gpu ? "B" : "A") + " has no measured GPU step time.");
  }
  for (const auto& [side, sum] : {std::pair<const char*, const Json*>{"A", &lhs_sum},
                                  std::pair<const char*, const Json*>{"B", &rhs_sum}}) {
    if (section(*sum, key::kStepTime) != nullptr && !per_clock_schema(*sum)) {
      notes.push_back(std::string("Run ") + side + " uses schema " + schema_text(*sum) +
                      ": its step time is the legacy CPU total_step_ms.");
    }
  }
  if (!same_clock) {
    notes.push_back(
        "Selected-clock phase metrics are unavailable because their clocks differ or are missing "
        "(A: " +
        ca.value_or("n/a") + ", B: " + cb.value_or("n/a") + ").");
  }
  s.noise = step_time_noise(lhs, rhs, clock, s.metric(key::kStepTimeMs));
  s.comparison_clock = clock;
  s.stalls_lhs = stalls_of(lhs);
  s.stalls_rhs = stalls_of(rhs);
  return s;
}

// ---- other sections -------------------------------------------------------

std::optional<double> memory_skew_pct(const Json* sec) {
  const auto worst = point(sec, key::kWorst, key::kPeakReservedBytes).value;
  const auto median = point(sec, key::kMedian, key::kPeakReservedBytes).value;
  if (!worst || !median || *median <= th::kComparePctBaselineEps) return std::nullopt;
  return finite(100.0 * (*worst - *median) / *median);
}

CompareSection step_memory_section(const Json& lhs_sum, const Json& rhs_sum,
                                   const MetricDelta& step_time_metric) {
  const Json* lhs = section(lhs_sum, key::kStepMemory);
  const Json* rhs = section(rhs_sum, key::kStepMemory);
  auto s = open_section<CompareSection>(lhs, rhs);
  auto& m = s.metrics;
  m.push_back(numeric_metric(key::kPeakReservedBytes, "Peak reserved", "bytes",
                             Pair{point(lhs, key::kWorst, key::kPeakReservedBytes).value,
                                  point(rhs, key::kWorst, key::kPeakReservedBytes).value},
                             "bytes", "higher_is_worse"));
  m.push_back(numeric_metric("memory_skew_pct", "Memory skew", "percent",
                             Pair{memory_skew_pct(lhs), memory_skew_pct(rhs)}, "percentage_point",
                             "higher_is_worse"));
  // TraceML reserves the key and never fills it; kept for schema parity.
  m.push_back(numeric_metric("trend_worst_delta_bytes", "Memory trend", "bytes", Pair{}, "bytes",
                             "higher_is_worse"));
  if (m.front().state() == MetricState::MissingBoth &&
      step_time_metric.state() == MetricState::Comparable) {
    s.notes.emplace_back(
        "Step memory was not measured in either run (no GPU step memory, as on every CPU run): "
        "the verdict rests on step time and the diagnoses.");
  }
  return s;
}

std::optional<double> gib(const std::optional<double>& bytes) {
  return bytes ? std::optional<double>(*bytes / kGiB) : std::nullopt;
}

/// One section of both summaries, and its averages side by side.
struct Sides {
  const Json* lhs;
  const Json* rhs;
  Pair avg(const char* metric) const { return {average(lhs, metric), average(rhs, metric)}; }
  Pair avg_gib(const char* metric) const {
    return {gib(average(lhs, metric)), gib(average(rhs, metric))};
  }
};

Sides sides(const Json& lhs_sum, const Json& rhs_sum, const char* name) {
  return {section(lhs_sum, name), section(rhs_sum, name)};
}

CompareSection process_section(const Json& lhs_sum, const Json& rhs_sum) {
  const Sides in = sides(lhs_sum, rhs_sum, key::kProcess);
  auto s = open_section<CompareSection>(in.lhs, in.rhs);
  // cpu_percent is TraceML's (100 = one core busy); the summary's text shows
  // cpu_capacity_percent (100 = every core busy), added here so that both
  // tools' numbers can be found. The text labels the first by its unit.
  s.metrics = {numeric_metric("cpu_avg_percent", "Process CPU avg", "percent",
                              in.avg(key::kCpuPercent), "percentage_point", "context"),
               numeric_metric("cpu_capacity_percent", "Process CPU capacity", "percent",
                              in.avg(key::kCpuCapacityPercent), "percentage_point", "context"),
               numeric_metric("rss_avg_gb", "Process RSS avg", "gb", in.avg_gib(key::kRamBytes),
                              "gb", "context")};
  return s;
}

CompareSection system_section(const Json& lhs_sum, const Json& rhs_sum) {
  const Sides in = sides(lhs_sum, rhs_sum, key::kSystem);
  auto s = open_section<CompareSection>(in.lhs, in.rhs);
  s.metrics = {numeric_metric("cpu_avg_percent", "System CPU avg", "percent",
                              in.avg(key::kCpuPercent), "percentage_point", "context"),
               numeric_metric("ram_avg_gb", "System RAM avg", "gb", in.avg_gib(key::kRamBytes),
                              "gb", "context"),
               numeric_metric("gpu_util_avg_percent", "GPU util avg", "percent",
                              in.avg(key::kGpuUtilPercent), "percentage_point", "context"),
               numeric_metric("gpu_memory_avg_percent", "GPU memory avg", "percent",
                              in.avg(key::kGpuMemPercent), "percentage_point", "context")};
  return s;
}

std::vector<std::string> schema_warnings(const Json& lhs, const Json& rhs) {
  std::vector<std::string> warnings;
  const Json* va = child(&lhs, key::kSchemaVersion);
  const Json* vb = child(&rhs, key::kSchemaVersion);
  if ((va == nullptr) != (vb == nullptr) || (va != nullptr && *va != *vb)) {
    warnings.push_back("Summary schema versions differ: A uses " + schema_text(lhs) + ", B uses " +
                       schema_text(rhs) +
                       ". Step Time fields changed in schema 1.6 and were made nullable and "
                       "canonical in schema 1.7; compare uses a common measured GPU clock when "
                       "possible and otherwise a common CPU clock.");
  }
  return warnings;
}

CompareRun run_of(const CompareSide& side, const Json& summary) {
  const Json* v = child(&summary, key::kSchemaVersion);
  return CompareRun{side, v != nullptr ? *v : Json(nullptr),
                    number(child(&summary, key::kDurationS))};
}

/// The newer of the two `generated_at` stamps. Both tools write the same
/// ISO-8601 UTC form ("…+00:00", microseconds), which sorts as text.
std::string newer_generated_at(const Json& lhs, const Json& rhs) {
  const auto a = text(child(&lhs, key::kGeneratedAt));
  const auto b = text(child(&rhs, key::kGeneratedAt));
  if (a && b) return std::max(*a, *b);
  if (a || b) return a ? *a : *b;
  return "1970-01-01T00:00:00.000000+00:00";
}

}  // namespace

CompareReport compute_compare(const Json& lhs, const Json& rhs, const CompareInputs& meta,
                              const CompareOptions& options) {
  CompareReport r;
  r.generated_at = newer_generated_at(lhs, rhs);
  r.lhs = run_of(meta.lhs, lhs);
  r.rhs = run_of(meta.rhs, rhs);
  r.warnings = schema_warnings(lhs, rhs);
  r.step_time = step_time_section(lhs, rhs);
  r.step_memory = step_memory_section(lhs, rhs, r.step_time.metric(key::kStepTimeMs));
  r.process = process_section(lhs, rhs);
  r.system = system_section(lhs, rhs);
  r.primary_diagnosis =
      DiagnosisChange{text(child(object_child(&lhs, key::kPrimaryDiagnosis), key::kStatus)),
                      text(child(object_child(&rhs, key::kPrimaryDiagnosis), key::kStatus))};
  r.verdict = decide_verdict(r, options);
  return r;
}

}  // namespace traceml::report
