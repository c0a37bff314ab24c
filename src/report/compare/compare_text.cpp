// The compare text (spec §6.4): an 88-column box printed from the typed
// compare result, which compare_json.cpp writes as JSON beside it.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "analysis/number_format.hpp"
#include "analysis/summary_keys.hpp"
#include "model/text.hpp"
#include "report/compare/compare.hpp"
#include "report/compare/compare_noise.hpp"
#include "report/compare/compare_stalls.hpp"
#include "report/json_read.hpp"
#include "report/text/text_format.hpp"
#include "report/text/text_layout.hpp"

namespace traceml::report {

namespace {

using analysis::fixed;
using analysis::format_bytes_binary;

constexpr std::size_t kWidth = 88;
/// Inside "|  " and "|".
constexpr std::size_t kContent = kWidth - 4;

namespace key = analysis::summary_keys;

/// A string from the summaries (a label, a diagnosis, a file's schema
/// version) as the terminal may show it: data, never control; trimmed, and
/// absent when nothing is left.
std::optional<std::string> shown(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  std::string t = json_read::trimmed(model::escape_for_terminal(*s));
  if (t.empty()) return std::nullopt;
  return t;
}

std::string shown_or(const std::optional<std::string>& s, const std::string& fallback) {
  return shown(s).value_or(fallback);
}

/// Greedy word wrap at kContent (by display width, as the box pads);
/// continuation lines start with `indent` spaces.
void add_wrapped(std::vector<std::string>& lines, const std::string& s, std::size_t indent) {
  append(lines, wrap("", s, kContent, indent));
}

std::string row(const std::string& metric, const std::string& a, const std::string& b,
                const std::string& delta) {
  return rstrip(pad_right(metric, 28) + " " + pad_right(a, 17) + " " + pad_right(b, 17) + " " +
                pad_right(delta, 17));
}

/// A row that never overruns the box: when its cells are too wide for one
/// line (a delta of "+101.3 ms (+8576%)", a long diagnosis), the delta goes
/// on a line of its own, at the box's right edge.
void add_row(std::vector<std::string>& lines, const std::string& metric, const std::string& a,
             const std::string& b, const std::string& delta) {
  const std::string one = row(metric, a, b, delta);
  if (display_width(one) <= kContent) {
    lines.push_back(one);
    return;
  }
  lines.push_back(row(metric, a, b, ""));
  lines.push_back(pad_left(delta, kContent));
}

std::string value_text(const std::optional<double>& n, const std::string& unit) {
  if (!n) return "n/a";
  if (unit == "ms") return fixed(*n, 1) + " ms";
  if (unit == "percent") return fixed(*n, 1) + "%";
  if (unit == "gb") return fixed(*n, 1) + " GB";
  if (unit == "bytes") return format_bytes_binary(*n);
  return fixed(*n, 1);
}

std::string delta_text(const MetricDelta& m) {
  const std::string unit = m.unit;
  const std::string delta_unit = m.delta_unit;
  if (m.is_text()) {
    const auto a = shown(m.lhs_text);
    const auto b = shown(m.rhs_text);
    return a == b ? "same" : "changed";
  }
  if (!m.delta) return "n/a";
  const double d = *m.delta;
  std::string s;
  if (delta_unit == "bytes") {
    // Quirk 12 fixed (DECISIONS 7): a negative delta keeps its unit.
    s = (d > 0 ? "+" : "") + format_bytes_binary(d);
  } else {
    const std::string signed_v = signed_fixed(d);
    if (delta_unit == "ms")
      s = signed_v + " ms";
    else if (delta_unit == "percentage_point")
      s = signed_v + " pp";
    else if (delta_unit == "percent")
      s = signed_v + "%";
    else if (delta_unit == "gb")
      s = signed_v + " GB";
    else
      s = signed_v;
  }
  // A percentage of a base that shows as zero ("0.0 ms -> 0.0 ms, +78.9%")
  // says nothing; one of thousands reads in whole percents.
  const bool zero_base = m.lhs && value_text(m.lhs, unit) == value_text(0.0, unit);
  if (m.pct_change && unit != "percent" && !zero_base) {
    const double pct = *m.pct_change;
    s += " (" +
         (std::fabs(pct) >= 1000.0 ? (pct > 0 ? "+" : "") + fixed(pct, 0) : signed_fixed(pct)) +
         "%)";
  }
  return s;
}

struct SectionSpec {
  const CompareSection* section;
  const char* diagnosis_label;
  std::vector<const char*> rows;
};

std::string section_title(const CompareReport& r, const CompareSection* sec) {
  if (sec == &r.step_time) {
    const auto& clock = r.step_time.comparison_clock;
    if (!clock) return "Step Time (no common comparison clock)";
    return std::string("Step Time (") + (*clock == "gpu" ? "GPU" : "CPU") + " comparison clock)";
  }
  if (sec == &r.step_memory) return "Step Memory";
  if (sec == &r.process) return "Process";
  return "System";
}

/// Our addition: whether the step-time change is beyond run-to-run noise,
/// with the evidence, and whether the verdict used it.
std::optional<std::string> noise_line(const NoiseDecision& n, bool noise_aware) {
  if (!n.available) return std::nullopt;
  std::string line = "Noise: the mean's " + signed_fixed(n.delta_ms) + " ms is " +
                     (n.beyond_noise ? "beyond" : "within") + " run-to-run noise (" +
                     noise_evidence(n) + ").";
  if (!noise_aware) line += " The verdict ignores noise (--strict).";
  return line;
}

}  // namespace

std::string render_compare_text(const CompareReport& r) {
  std::vector<std::string> lines;
  lines.emplace_back("TraceML Compare");
  const std::size_t header_end = lines.size();
  lines.emplace_back("");
  lines.push_back("A: " + shown_or(r.lhs.side.label, "A"));
  lines.push_back("B: " + shown_or(r.rhs.side.label, "B"));
  lines.emplace_back("Delta: B - A");
  const auto pa = shown(r.primary_diagnosis.lhs);
  const auto pb = shown(r.primary_diagnosis.rhs);
  if (pa || pb) {
    lines.push_back("Primary diagnosis: " + pa.value_or("n/a") + " -> " + pb.value_or("n/a") +
                    " (" + (pa != pb ? "changed" : "same") + ")");
  }
  const CompareVerdict& verdict = r.verdict;
  lines.emplace_back("");
  lines.push_back(std::string("Verdict: ") + verdict_name(verdict.status));
  add_wrapped(lines, "Why: " + shown_or(verdict.why, "n/a"), 5);

  const SectionSpec kSections[] = {
      {&r.step_time,
       "Step time diagnosis",
       {key::kStepTimeMs, "step_time_median_ms", "input_ms", key::kDataloaderFetchCpuMs,
        key::kH2dMs, key::kComputeMs, key::kResidualMs}},
      {&r.step_memory, "Step memory diagnosis", {key::kPeakReservedBytes, "memory_skew_pct"}},
      {&r.process, "Process diagnosis", {"cpu_avg_percent", "cpu_capacity_percent", "rss_avg_gb"}},
      {&r.system,
       "System diagnosis",
       {"cpu_avg_percent", "ram_avg_gb", "gpu_util_avg_percent", "gpu_memory_avg_percent"}}};
  for (const SectionSpec& spec : kSections) {
    const CompareSection& sec = *spec.section;
    if (!sec.available) continue;
    lines.emplace_back("");
    lines.push_back(section_title(r, &sec));
    lines.push_back(row("Metric", "A", "B", "Delta"));
    const auto da = shown(sec.diagnosis.lhs);
    const auto db = shown(sec.diagnosis.rhs);
    add_row(lines, spec.diagnosis_label, da.value_or("n/a"), db.value_or("n/a"),
            da != db ? "changed" : "same");
    for (const char* metric : spec.rows) {
      const MetricDelta& m = sec.metric(metric);
      const std::string unit = m.unit;
      std::string a;
      std::string b;
      if (m.is_text()) {
        if (!m.lhs_text && !m.rhs_text) continue;
        a = shown_or(m.lhs_text, "n/a");
        b = shown_or(m.rhs_text, "n/a");
      } else {
        if (!m.lhs && !m.rhs) continue;
        a = value_text(m.lhs, unit);
        b = value_text(m.rhs, unit);
      }
      // TraceML's label "Process CPU avg" hides that 100% is one core; the
      // summary's text shows CPU capacity (100% = every core) instead.
      const bool per_core = &sec == &r.process && std::string(metric) == "cpu_avg_percent";
      std::string label = per_core ? "Process CPU (1 core = 100%)" : shown_or(m.label, metric);
      // Step times are means over the steps but for the median step's row:
      // a few stalls move the one and not the other (DECISIONS 23).
      if (&sec == &r.step_time && !m.is_text())
        label = std::string(metric) == "step_time_median_ms"
                    ? shown_or(r.step_time.metric(key::kStepTimeMs).label, "Step Time") +
                          ", median step"
                    : label + ", mean";
      add_row(lines, label, a, b, delta_text(m));
    }
    if (&sec == &r.step_time) {
      if (const auto n = noise_line(r.step_time.noise, verdict.noise_aware))
        add_wrapped(lines, *n, 2);
    }
  }

  std::vector<std::string> notes;
  for (const std::string& w : r.warnings)
    notes.push_back(model::escape_for_terminal(w));
  // Our addition: the sections' own notes (clock fallbacks, legacy schemas).
  for (const SectionSpec& spec : kSections) {
    for (const std::string& n : spec.section->notes)
      notes.push_back(model::escape_for_terminal(n));
  }
  // And the runs' stalls (DECISIONS 23), which move a mean and not a median.
  for (const auto& [side, st] :
       {std::pair<const char*, const std::optional<StallsSeen>*>{"A", &r.step_time.stalls_lhs},
        std::pair<const char*, const std::optional<StallsSeen>*>{"B", &r.step_time.stalls_rhs}}) {
    if (*st)
      notes.push_back(std::string("Run ") + side + ": " + stalls_text(**st) +
                      "; the means above include it, the median step does not.");
  }
  if (verdict.overall == Comparability::Partial || verdict.overall == Comparability::Insufficient)
    notes.push_back(shown_or(verdict.overall_reason, "Some primary compare signals are missing."));
  if (!notes.empty()) {
    lines.emplace_back("");
    lines.emplace_back("Notes");
    for (const std::string& n : notes)
      add_wrapped(lines, "- " + n, 2);
  }

  const std::string border = "+" + std::string(kWidth - 2, '-') + "+";
  std::string out = border + "\n";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    out += "|  " + pad_right(lines[i], kContent) + "|\n";
    if (i + 1 == header_end) out += border + "\n";
  }
  out += border;
  return out;
}

}  // namespace traceml::report
