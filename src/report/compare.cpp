// The compare JSON and its verdict (spec §6.2, §6.3). Every value is read
// defensively: summaries from older TraceML schemas, and sections that are
// missing or mistyped, yield nulls and a less comparable verdict, never an
// exception.
#include "report/compare.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/number_format.hpp"
#include "analysis/thresholds.hpp"
#include "report/compare_noise.hpp"
#include "report/json_read.hpp"
#include "report/summary_view.hpp"
#include "report/text_format.hpp"
#include "report/text_layout.hpp"

namespace traceml::report {

namespace {

namespace th = analysis::thresholds;
using analysis::fixed;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
/// The first schema whose step-time section carries per-clock step times
/// (step_time_cpu_ms / step_time_gpu_ms) and dataloader_fetch_cpu_ms.
constexpr double kPerClockSchema = 1.7;

using namespace json_read;

/// schema_version as a number: stored as a number, or as a numeric string.
std::optional<double> schema_number(const Json& summary) {
  const Json* v = child(&summary, "schema_version");
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
  const Json* v = child(&summary, "schema_version");
  if (v == nullptr || v->is_null()) return "n/a";
  if (v->is_string()) return v->get<std::string>();
  return v->dump(-1, ' ', false, Json::error_handler_t::replace);
}

const Json* section(const Json& summary, const char* name) {
  return object_child(&summary, name);
}

std::optional<std::string> diagnosis_status(const Json* sec) {
  return text(path(sec, {"diagnosis", "status"}));
}

std::optional<std::string> diagnosis_clock(const Json* sec) {
  const auto c = text(path(sec, {"global", "window", "diagnosis_clock"}));
  if (c && (*c == "cpu" || *c == "gpu")) return c;
  return std::nullopt;
}

// ---- metrics --------------------------------------------------------------

struct Pair {
  std::optional<double> lhs;
  std::optional<double> rhs;
};

Json numeric_metric(const std::string& label, const char* unit, const Pair& v,
                    const char* delta_unit, const char* direction) {
  Json m;
  m["label"] = label;
  m["unit"] = unit;
  m["lhs"] = opt_json(v.lhs);
  m["rhs"] = opt_json(v.rhs);
  std::optional<double> delta;
  std::optional<double> pct;
  if (v.lhs && v.rhs) {
    delta = *v.rhs - *v.lhs;
    if (std::fabs(*v.lhs) > th::kComparePctBaselineEps) pct = 100.0 * *delta / *v.lhs;
  }
  m["delta"] = opt_json(delta);
  m["pct_change"] = opt_json(pct);
  m["delta_unit"] = delta_unit;
  m["direction"] = direction;
  return m;
}

Json text_metric(const std::string& label, const std::optional<std::string>& lhs,
                 const std::optional<std::string>& rhs) {
  Json m;
  m["label"] = label;
  m["unit"] = "text";
  m["lhs"] = opt_json(lhs);
  m["rhs"] = opt_json(rhs);
  m["delta"] = nullptr;
  m["pct_change"] = nullptr;
  m["delta_unit"] = "text";
  m["direction"] = "context";
  return m;
}

Json diagnosis_json(const Json* lhs, const Json* rhs) {
  const auto a = diagnosis_status(lhs);
  const auto b = diagnosis_status(rhs);
  return Json{{"lhs", opt_json(a)}, {"rhs", opt_json(b)}, {"changed", a != b}};
}

/// A section of both summaries and the envelope of its compare section.
struct SectionPair {
  const Json* lhs;
  const Json* rhs;
  Json out;  ///< available, diagnosis, metrics (empty), notes (empty)
};

SectionPair open_section(const Json& lhs_sum, const Json& rhs_sum, const char* name) {
  SectionPair p{section(lhs_sum, name), section(rhs_sum, name), Json()};
  p.out["available"] = p.lhs != nullptr || p.rhs != nullptr;
  p.out["diagnosis"] = diagnosis_json(p.lhs, p.rhs);
  p.out["metrics"] = Json::object();
  p.out["notes"] = Json::array();
  return p;
}

// ---- step time ------------------------------------------------------------

struct StepClocks {
  std::optional<double> cpu;
  std::optional<double> gpu;
};

StepClocks step_clocks(const Json& summary) {
  const Json* sec = section(summary, "step_time");
  if (per_clock_schema(summary))
    return {average(sec, "step_time_cpu_ms"), average(sec, "step_time_gpu_ms")};
  // Before schema 1.7 a summary had one CPU-measured step total.
  return {average(sec, "total_step_ms"), std::nullopt};
}

/// The phase that takes the most time (first maximum; nulls skipped).
std::optional<std::string> dominant_phase(const Json* sec) {
  static const std::pair<const char*, const char*> kPhases[] = {{"input", "input_wait_ms"},
                                                                {"h2d", "h2d_ms"},
                                                                {"forward", "forward_ms"},
                                                                {"backward", "backward_ms"},
                                                                {"optimizer", "optimizer_ms"}};
  std::optional<std::string> best;
  double best_v = 0.0;
  for (const auto& [name, key] : kPhases) {
    const auto v = average(sec, key);
    if (v && (!best || *v > best_v)) {
      best = name;
      best_v = *v;
    }
  }
  return best;
}

Json step_time_section(const Json& lhs_sum, const Json& rhs_sum) {
  auto [lhs, rhs, s] = open_section(lhs_sum, rhs_sum, "step_time");
  Json& metrics = s["metrics"];
  Json& notes = s["notes"];

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
  metrics["step_time_ms"] = numeric_metric(step_label, "ms", step, "ms", "higher_is_worse");

  // Phases are per-clock averages: comparing a GPU-clock phase with a
  // CPU-clock one would report the clock change as a phase shift.
  const auto ca = diagnosis_clock(lhs);
  const auto cb = diagnosis_clock(rhs);
  const bool same_clock = ca && cb && *ca == *cb;
  // Init-captures: a C++17 lambda cannot capture a structured binding itself.
  auto gated = [same_clock, a_sec = lhs, b_sec = rhs](const char* key) {
    return same_clock ? Pair{average(a_sec, key), average(b_sec, key)} : Pair{};
  };
  metrics["input_ms"] =
      numeric_metric("Input", "ms", gated("input_wait_ms"), "ms", "higher_is_worse");
  const char* fetch_a = per_clock_schema(lhs_sum) ? "dataloader_fetch_cpu_ms" : "dataloader_ms";
  const char* fetch_b = per_clock_schema(rhs_sum) ? "dataloader_fetch_cpu_ms" : "dataloader_ms";
  metrics["dataloader_fetch_cpu_ms"] =
      numeric_metric("DataLoader Fetch (CPU)", "ms",
                     Pair{average(lhs, fetch_a), average(rhs, fetch_b)}, "ms", "context");
  static const std::pair<const char*, const char*> kPhases[] = {
      {"h2d_ms", "H2D"},         {"compute_ms", "Compute"},   {"residual_ms", "Residual"},
      {"forward_ms", "Forward"}, {"backward_ms", "Backward"}, {"optimizer_ms", "Optimizer"}};
  for (const auto& [key, label] : kPhases)
    metrics[key] = numeric_metric(label, "ms", gated(key), "ms", "higher_is_worse");
  metrics["dominant_phase"] =
      same_clock ? text_metric("Dominant phase", dominant_phase(lhs), dominant_phase(rhs))
                 : text_metric("Dominant phase", std::nullopt, std::nullopt);

  if (!clock) {
    notes.push_back(
        "Step Time metrics are unavailable because the summaries have no common measured GPU or "
        "CPU clock.");
  } else if (*clock == "cpu" && (a.gpu || b.gpu)) {
    // Our addition: say why a measured GPU clock was not used.
    notes.push_back(std::string("Step Time is compared on the CPU clock because run ") +
                    (a.gpu ? "B" : "A") + " has no measured GPU step time.");
  }
  for (const auto& [side, sum] : {std::pair<const char*, const Json*>{"A", &lhs_sum},
                                  std::pair<const char*, const Json*>{"B", &rhs_sum}}) {
    if (section(*sum, "step_time") != nullptr && !per_clock_schema(*sum)) {
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
  // Computed before s grows: inserting a key may move `metrics` and `notes`.
  Json noise = step_time_noise(lhs, rhs, clock, metrics["step_time_ms"]);
  s["comparison_clock"] = opt_json(clock);
  s["noise"] = std::move(noise);
  return s;
}

// ---- other sections -------------------------------------------------------

std::string metric_state(const Json& m);

std::optional<double> memory_skew_pct(const Json* sec) {
  const auto worst = point(sec, "worst", "peak_reserved_bytes").value;
  const auto median = point(sec, "median", "peak_reserved_bytes").value;
  if (!worst || !median || *median <= th::kComparePctBaselineEps) return std::nullopt;
  return 100.0 * (*worst - *median) / *median;
}

Json step_memory_section(const Json& lhs_sum, const Json& rhs_sum, const Json& step_time_metric) {
  auto [lhs, rhs, s] = open_section(lhs_sum, rhs_sum, "step_memory");
  Json& m = s["metrics"];
  m["peak_reserved_bytes"] = numeric_metric("Peak reserved", "bytes",
                                            Pair{point(lhs, "worst", "peak_reserved_bytes").value,
                                                 point(rhs, "worst", "peak_reserved_bytes").value},
                                            "bytes", "higher_is_worse");
  m["memory_skew_pct"] =
      numeric_metric("Memory skew", "percent", Pair{memory_skew_pct(lhs), memory_skew_pct(rhs)},
                     "percentage_point", "higher_is_worse");
  // TraceML reserves the key and never fills it; kept for schema parity.
  m["trend_worst_delta_bytes"] =
      numeric_metric("Memory trend", "bytes", Pair{}, "bytes", "higher_is_worse");
  if (metric_state(m["peak_reserved_bytes"]) == "missing_both" &&
      metric_state(step_time_metric) == "comparable") {
    s["notes"].push_back(
        "Step memory was not measured in either run (no GPU step memory, as on every CPU run): "
        "the verdict rests on step time and the diagnoses.");
  }
  return s;
}

std::optional<double> gib(const std::optional<double>& bytes) {
  return bytes ? std::optional<double>(*bytes / kGiB) : std::nullopt;
}

Json process_section(const Json& lhs_sum, const Json& rhs_sum) {
  auto [lhs, rhs, s] = open_section(lhs_sum, rhs_sum, "process");
  Json& m = s["metrics"];
  // cpu_percent is TraceML's (100 = one core busy); the summary's text shows
  // cpu_capacity_percent (100 = every core busy), added here so that both
  // tools' numbers can be found. The text labels the first by its unit.
  m["cpu_avg_percent"] = numeric_metric(
      "Process CPU avg", "percent", Pair{average(lhs, "cpu_percent"), average(rhs, "cpu_percent")},
      "percentage_point", "context");
  m["cpu_capacity_percent"] = numeric_metric(
      "Process CPU capacity", "percent",
      Pair{average(lhs, "cpu_capacity_percent"), average(rhs, "cpu_capacity_percent")},
      "percentage_point", "context");
  m["rss_avg_gb"] = numeric_metric(
      "Process RSS avg", "gb", Pair{gib(average(lhs, "ram_bytes")), gib(average(rhs, "ram_bytes"))},
      "gb", "context");
  return s;
}

Json system_section(const Json& lhs_sum, const Json& rhs_sum) {
  auto [lhs, rhs, s] = open_section(lhs_sum, rhs_sum, "system");
  Json& m = s["metrics"];
  auto avg = [a_sec = lhs, b_sec = rhs](const char* key) {
    return Pair{average(a_sec, key), average(b_sec, key)};
  };
  m["cpu_avg_percent"] = numeric_metric("System CPU avg", "percent", avg("cpu_percent"),
                                        "percentage_point", "context");
  m["ram_avg_gb"] = numeric_metric(
      "System RAM avg", "gb", Pair{gib(average(lhs, "ram_bytes")), gib(average(rhs, "ram_bytes"))},
      "gb", "context");
  m["gpu_util_avg_percent"] = numeric_metric("GPU util avg", "percent", avg("gpu_util_percent"),
                                             "percentage_point", "context");
  m["gpu_memory_avg_percent"] = numeric_metric("GPU memory avg", "percent", avg("gpu_mem_percent"),
                                               "percentage_point", "context");
  return s;
}

// ---- verdict ----------------------------------------------------------------

int status_rank(const std::optional<std::string>& s) {
  return s ? analysis::status_rank(*s) : 0;
}

struct Finding {
  std::string status;
  int priority = 0;
  std::string domain;
  std::optional<std::string> metric;
  std::string severity;
  std::string why;
};

/// comparable / missing_one_side / missing_both.
std::string metric_state(const Json& m) {
  const bool a = number(child(&m, "lhs")).has_value();
  const bool b = number(child(&m, "rhs")).has_value();
  return a && b ? "comparable" : (a || b) ? "missing_one_side" : "missing_both";
}

std::optional<std::string> text_of(const Json& j, const char* key) {
  return text(child(&j, key));
}

std::string title_case(const std::string& status) {
  std::string s = status;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    s[i] = static_cast<char>(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return s;
}

const char* outcome_of(const std::string& status) {
  if (status == "REGRESSION") return "regression";
  if (status == "IMPROVEMENT") return "improvement";
  if (status == "EQUIVALENT") return "equivalent";
  if (status == "MIXED") return "mixed";
  return "unclear";
}

/// "A", "A and B", "A, B and C".
std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return out;
}

/// The diagnoses that --fail-on-diagnosis-change watches (primary, step time,
/// step memory) and that changed, as clauses: "the primary and step time
/// diagnoses changed from INPUT-BOUND to COMPUTE-BOUND". Diagnoses that
/// changed the same way share a clause.
std::vector<std::string> diagnosis_changes(const Json& primary, const Json& step,
                                           const Json& memory) {
  struct Change {
    std::vector<std::string> names;
    std::string from;
    std::string to;
  };
  std::vector<Change> changes;
  for (const auto& [name, diag] : {std::pair<const char*, const Json*>{"primary", &primary},
                                   std::pair<const char*, const Json*>{"step time", &step},
                                   std::pair<const char*, const Json*>{"step memory", &memory}}) {
    if (!diag->value("changed", false)) continue;
    const std::string from = text_of(*diag, "lhs").value_or("n/a");
    const std::string to = text_of(*diag, "rhs").value_or("n/a");
    const auto same = std::find_if(changes.begin(), changes.end(),
                                   [&](const Change& c) { return c.from == from && c.to == to; });
    if (same != changes.end())
      same->names.push_back(name);
    else
      changes.push_back(Change{{name}, from, to});
  }
  std::vector<std::string> out;
  for (const Change& c : changes)
    out.push_back("the " + joined(c.names) + (c.names.size() > 1 ? " diagnoses" : " diagnosis") +
                  " changed from " + c.from + " to " + c.to);
  return out;
}

Json verdict_json(const Json& sections, const Json& primary_diag, const CompareOptions& options) {
  const Json& step_sec = sections["step_time"];
  const Json& mem_sec = sections["step_memory"];
  const Json& step = step_sec["metrics"]["step_time_ms"];
  const Json& mem = mem_sec["metrics"]["peak_reserved_bytes"];
  const Json& residual = step_sec["metrics"]["residual_ms"];
  const std::string step_state = metric_state(step);
  const std::string mem_state = metric_state(mem);
  const bool step_ok = step_state == "comparable";
  const bool mem_ok = mem_state == "comparable";
  // DECISIONS 11: when neither run measured step memory (every CPU run) the
  // runs are compared on step time and the diagnoses; TraceML stops at
  // "partially comparable" there.
  const bool mem_unmeasured = mem_state == "missing_both";
  const std::string availability = step_ok && (mem_ok || mem_unmeasured) ? "comparable"
                                   : step_ok || mem_ok                   ? "partial"
                                                                         : "insufficient";
  const auto step_pct = number(child(&step, "pct_change"));
  const auto mem_pct = number(child(&mem, "pct_change"));
  const std::string label = text_of(step, "label").value_or("Step Time");
  const Json& step_diag = step_sec["diagnosis"];
  const Json& mem_diag = mem_sec["diagnosis"];
  const bool step_diag_changed = step_diag.value("changed", false);
  const bool residual_ok = metric_state(residual) == "comparable";
  // DECISIONS 12: a step-time change counts only beyond run-to-run noise
  // (unless --strict, or when the summaries carry nothing to judge noise by).
  const Json& noise = step_sec["noise"];
  const bool noise_aware = !options.strict && noise.value("available", false);
  const double step_gate = th::kCompareStepTimePct;
  const double mem_gate = th::kCompareMemoryPct;
  const bool step_up = step_pct && *step_pct >= step_gate;
  const bool step_down = step_pct && *step_pct <= -step_gate;
  const bool step_slower = step_up && (!noise_aware || change_counts(noise, true));
  const bool step_faster = step_down && (!noise_aware || change_counts(noise, false));
  const bool step_in_noise = (step_up && !step_slower) || (step_down && !step_faster);

  std::vector<Finding> f;
  const char* kNull = nullptr;
  auto add = [&f](const char* status, int pri, const char* domain, const char* metric,
                  const char* severity, std::string why) {
    f.push_back(Finding{status, pri, domain,
                        metric ? std::optional<std::string>(metric) : std::nullopt, severity,
                        std::move(why)});
  };
  if (availability == "insufficient") {
    add("INCONCLUSIVE", 1, "compare", kNull, "info",
        step_state == "missing_one_side" || mem_state == "missing_one_side"
            ? "Primary compare sections are not comparable; signals are missing on run A or run B."
            : "Primary compare sections are not comparable.");
  }
  if (availability == "partial")
    add("INCONCLUSIVE", 2, "compare", kNull, "info",
        "Primary compare sections are only partially comparable.");
  if (step_diag_changed && !residual_ok)
    add("INCONCLUSIVE", 3, "step_time", "diagnosis", "info",
        "Step time diagnosis changed, but supporting metrics are partial.");
  if (mem_pct) {
    if (step_faster && *mem_pct >= mem_gate)
      add("MIXED", 4, "compare", kNull, "warning", label + " improved, but step memory worsened.");
    else if (step_slower && *mem_pct <= -mem_gate)
      add("MIXED", 4, "compare", kNull, "warning",
          "Step memory improved, but " + label + " worsened.");
  }
  if (step_slower)
    add("REGRESSION", 5, "step_time", "step_time_ms", "warning",
        label + " increased by " + fixed(*step_pct, 1) + "%.");
  if (step_faster)
    add("IMPROVEMENT", 6, "step_time", "step_time_ms", "info",
        label + " decreased by " + fixed(std::fabs(*step_pct), 1) + "%.");
  if (mem_pct && *mem_pct >= mem_gate)
    add("REGRESSION", 7, "step_memory", "peak_reserved_bytes", "warning",
        "Step memory increased by " + fixed(*mem_pct, 1) + "%.");
  if (mem_pct && *mem_pct <= -mem_gate)
    add("IMPROVEMENT", 8, "step_memory", "peak_reserved_bytes", "info",
        "Step memory decreased by " + fixed(std::fabs(*mem_pct), 1) + "%.");
  const auto sa = text_of(step_diag, "lhs");
  const auto sb = text_of(step_diag, "rhs");
  bool step_worse = false;
  if (sa && sb && status_rank(sb) > status_rank(sa)) {
    step_worse = true;
    add("REGRESSION", 9, "step_time", "diagnosis", "warning",
        "Step time diagnosis worsened from " + *sa + " to " + *sb + ".");
  }
  const auto ma = text_of(mem_diag, "lhs");
  const auto mb = text_of(mem_diag, "rhs");
  if (!step_worse && ma && mb && status_rank(mb) > status_rank(ma))
    add("REGRESSION", 10, "step_memory", "diagnosis", "warning",
        "Step memory diagnosis worsened from " + *ma + " to " + *mb + ".");
  // An EQUIVALENT finding says what stayed stable and never hides what
  // changed: a diagnosis may change without getting worse (INPUT-BOUND to
  // COMPUTE-BOUND), and the step time or memory may have moved in another
  // finding. TraceML's one sentence ("Primary training signals stayed
  // stable.") is kept for the case where it is true.
  const std::vector<std::string> diag_changes =
      diagnosis_changes(primary_diag, step_diag, mem_diag);
  const std::string but = diag_changes.empty() ? "" : ", but " + joined(diag_changes);
  const bool memory_note = mem_unmeasured && availability == "comparable";
  if (step_in_noise) {
    add("EQUIVALENT", 11, "step_time", "step_time_ms", "info",
        label + " changed by " + signed_fixed(*step_pct) + "%, within run-to-run noise (" +
            noise_evidence(noise) + ")" + but + ".");
  } else if (availability != "insufficient") {
    const bool mem_moved = mem_pct && std::fabs(*mem_pct) >= mem_gate;
    std::vector<std::string> stable;
    if (step_ok && !step_slower && !step_faster) stable.push_back("step time");
    if (mem_ok && !mem_moved) stable.push_back("step memory");
    if (diag_changes.empty()) stable.push_back("diagnoses");
    std::string why = joined(stable) + " stayed stable";
    why[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(why[0])));
    if (!memory_note && !step_slower && !step_faster && !mem_moved && diag_changes.empty())
      why = "Primary training signals stayed stable";
    // Nothing stable: the findings above already say what changed.
    if (!stable.empty())
      add("EQUIVALENT", 11, "compare", kNull, "info",
          why + but +
              (memory_note ? "; step memory was not measured in either run." : std::string(".")));
  }
  if (f.empty())
    add("INCONCLUSIVE", 99, "compare", kNull, "info", "No compare verdict could be derived.");
  std::stable_sort(f.begin(), f.end(),
                   [](const Finding& x, const Finding& y) { return x.priority < y.priority; });

  const Finding& p = f.front();
  Json v;
  v["status"] = p.status;
  v["outcome"] = outcome_of(p.status);
  v["severity"] = p.severity;
  v["summary"] = p.status == "INCONCLUSIVE" && p.why.find("partial") != std::string::npos
                     ? std::string("Partially comparable")
                     : title_case(p.status);
  v["why"] = p.why;
  v["action"] = p.status == "REGRESSION" || p.status == "MIXED"
                    ? "Inspect the changed section before drawing strong conclusions."
                : p.status == "INCONCLUSIVE"
                    ? "Re-run or compare with matching TraceML summary coverage before drawing "
                      "strong conclusions."
                    : "No immediate action is required from this comparison.";
  v["primary_domain"] = p.domain;
  v["primary_metric"] = opt_json(p.metric);
  Json findings = Json::array();
  for (const Finding& x : f) {
    findings.push_back(Json{{"status", x.status},
                            {"priority", x.priority},
                            {"domain", x.domain},
                            {"metric", opt_json(x.metric)},
                            {"severity", x.severity},
                            {"why", x.why}});
  }
  v["findings"] = findings;

  std::string overall = availability;
  std::string step_comp = step_state;
  if (step_diag_changed && !residual_ok && step_ok) {
    step_comp = "partial";
    overall = "partial";
  }
  v["comparability"] = Json{
      {"overall",
       Json{{"state", overall}, {"reason", overall == "comparable" ? Json(nullptr) : Json(p.why)}}},
      {"step_time", Json{{"state", step_comp}}},
      {"step_memory", mem_unmeasured && step_ok ? Json{{"state", mem_state}, {"measured", false}}
                                                : Json{{"state", mem_state}}}};
  v["noise_aware"] = noise_aware;
  Json top = Json::array();
  for (std::size_t i = 0; i < f.size() && top.size() < 3; ++i) {
    if (f[i].status == "EQUIVALENT" && i != 0) continue;
    top.push_back(Json{
        {"domain", f[i].domain},
        {"metric", opt_json(f[i].metric)},
        {"summary", f[i].why},
        {"significance",
         f[i].status == "REGRESSION" || f[i].status == "IMPROVEMENT" ? "material" : "context"}});
  }
  v["top_changes"] = top;
  v["largest_shift"] = p.why;
  return v;
}

Json side_json(const CompareSide& side, const Json& summary) {
  Json s;
  s["path"] = side.path;
  s["label"] = side.label;
  s["file_name"] = side.file_name;
  s["parent_name"] = side.parent_name;
  const Json* v = child(&summary, "schema_version");
  s["schema_version"] = v != nullptr ? *v : Json(nullptr);
  s["duration_s"] = opt_json(number(child(&summary, "duration_s")));
  return s;
}

/// The newer of the two `generated_at` stamps. Both tools write the same
/// ISO-8601 UTC form ("…+00:00", microseconds), which sorts as text.
std::string newer_generated_at(const Json& lhs, const Json& rhs) {
  const auto a = text(child(&lhs, "generated_at"));
  const auto b = text(child(&rhs, "generated_at"));
  if (a && b) return std::max(*a, *b);
  if (a || b) return a ? *a : *b;
  return "1970-01-01T00:00:00.000000+00:00";
}

}  // namespace

CompareResult compare_summaries(const Json& lhs, const Json& rhs, const CompareInputs& meta,
                                const CompareOptions& options) {
  Json out;
  out["schema_version"] = 2;
  out["generated_at"] = newer_generated_at(lhs, rhs);
  out["lhs"] = side_json(meta.lhs, lhs);
  out["rhs"] = side_json(meta.rhs, rhs);
  Json warnings = Json::array();
  const Json* va = child(&lhs, "schema_version");
  const Json* vb = child(&rhs, "schema_version");
  if ((va == nullptr) != (vb == nullptr) || (va != nullptr && *va != *vb)) {
    warnings.push_back("Summary schema versions differ: A uses " + schema_text(lhs) + ", B uses " +
                       schema_text(rhs) +
                       ". Step Time fields changed in schema 1.6 and were made nullable and "
                       "canonical in schema 1.7; compare uses a common measured GPU clock when "
                       "possible and otherwise a common CPU clock.");
  }
  out["warnings"] = warnings;
  Json sections;
  sections["step_time"] = step_time_section(lhs, rhs);
  sections["step_memory"] =
      step_memory_section(lhs, rhs, sections["step_time"]["metrics"]["step_time_ms"]);
  sections["process"] = process_section(lhs, rhs);
  sections["system"] = system_section(lhs, rhs);
  Json availability;
  for (const char* name : {"step_time", "step_memory", "process", "system"})
    availability[name] = sections[name]["available"];
  out["sections"] = sections;
  out["availability"] = availability;
  const auto pa = text(child(object_child(&lhs, "primary_diagnosis"), "status"));
  const auto pb = text(child(object_child(&rhs, "primary_diagnosis"), "status"));
  out["overview"] = Json{
      {"duration_s", Json{{"lhs", out["lhs"]["duration_s"]}, {"rhs", out["rhs"]["duration_s"]}}},
      {"primary_diagnosis",
       Json{{"lhs", opt_json(pa)}, {"rhs", opt_json(pb)}, {"changed", pa != pb}}}};
  out["text"] = "";
  out["verdict"] = verdict_json(out["sections"], out["overview"]["primary_diagnosis"], options);
  out["text"] = render_compare_text(out);
  CompareResult r;
  r.status = out["verdict"]["status"].get<std::string>();
  r.json = std::move(out);
  return r;
}

std::string sanitize_label(const std::string& raw) {
  const std::string s = json_read::trimmed(raw);
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    const bool keep = std::isalnum(u) != 0 || c == '.' || c == '_' || c == '-';
    const char next = keep ? c : '_';
    // Runs of replaced characters and repeated '_' collapse to one '_'.
    if (next == '_' && !out.empty() && out.back() == '_') continue;
    out += next;
  }
  const auto first = out.find_first_not_of("._-");
  if (first == std::string::npos) return "run";
  const auto last = out.find_last_not_of("._-");
  return out.substr(first, last - first + 1);
}

std::pair<std::string, std::string> compare_labels(const std::string& lhs, const std::string& rhs) {
  namespace fs = std::filesystem;
  auto label_of = [](const fs::path& p) {
    const std::string stem = p.stem().string();
    static const char* const kGeneric[] = {"final_summary", "summary", "run", "output"};
    for (const char* g : kGeneric)
      if (lower(stem) == g) return sanitize_label(p.parent_path().filename().string());
    return sanitize_label(stem);
  };
  const fs::path a(lhs);
  const fs::path b(rhs);
  std::string la = label_of(a);
  std::string lb = label_of(b);
  if (la != lb) return {la, lb};
  const std::string pa = sanitize_label(a.parent_path().filename().string()) + "_" + la;
  const std::string pb = sanitize_label(b.parent_path().filename().string()) + "_" + lb;
  if (pa != pb) return {pa, pb};
  return {"lhs_" + la, "rhs_" + lb};
}

CompareSide compare_side(const std::string& abs_path, const std::string& label) {
  const std::filesystem::path p(abs_path);
  return CompareSide{abs_path, label, p.filename().string(), p.parent_path().filename().string()};
}

}  // namespace traceml::report
