// The compare text (spec §6.4): an 88-column box rendered from the compare
// JSON alone, so that a stored compare result always renders the same way.
#include <algorithm>
#include <optional>
#include <vector>

#include "analysis/number_format.hpp"
#include "report/compare.hpp"
#include "report/compare_noise.hpp"
#include "report/json_read.hpp"
#include "report/summary_json.hpp"
#include "report/text_format.hpp"
#include "report/text_layout.hpp"

namespace traceml::report {

namespace {

using analysis::fixed;
using analysis::format_bytes_binary;

constexpr std::size_t kWidth = 88;
/// Inside "|  " and "|".
constexpr std::size_t kContent = kWidth - 4;

using namespace json_read;

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

std::string value_text(const Json* v, const std::string& unit) {
  if (const auto s = text(v)) return *s;
  const auto n = number(v);
  if (!n) return "n/a";
  if (unit == "ms") return fixed(*n, 1) + " ms";
  if (unit == "percent") return fixed(*n, 1) + "%";
  if (unit == "gb") return fixed(*n, 1) + " GB";
  if (unit == "bytes") return format_bytes_binary(*n);
  return fixed(*n, 1);
}

std::string delta_text(const Json& m) {
  const std::string unit = text_or(child(&m, "unit"), "");
  const std::string delta_unit = text_or(child(&m, "delta_unit"), "");
  if (unit == "text") {
    const Json* a = child(&m, "lhs");
    const Json* b = child(&m, "rhs");
    const bool same = a != nullptr && b != nullptr && *a == *b;
    return same ? "same" : "changed";
  }
  const auto d = number(child(&m, "delta"));
  if (!d) return "n/a";
  std::string s;
  if (delta_unit == "bytes") {
    // Quirk 12 fixed (DECISIONS 7): a negative delta keeps its unit.
    s = (*d > 0 ? "+" : "") + format_bytes_binary(*d);
  } else {
    const std::string signed_v = signed_fixed(*d);
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
  const auto pct = number(child(&m, "pct_change"));
  if (pct && unit != "percent") {
    s += " (" + signed_fixed(*pct) + "%)";
  }
  return s;
}

struct SectionSpec {
  const char* key;
  const char* diagnosis_label;
  std::vector<const char*> rows;
};

std::string section_title(const char* key, const Json& sec) {
  const std::string k = key;
  if (k == "step_time") {
    const auto clock = text(child(&sec, "comparison_clock"));
    if (!clock) return "Step Time (no common comparison clock)";
    return std::string("Step Time (") + (*clock == "gpu" ? "GPU" : "CPU") + " comparison clock)";
  }
  if (k == "step_memory") return "Step Memory";
  if (k == "process") return "Process";
  return "System";
}

/// Our addition: whether the step-time change is beyond run-to-run noise,
/// with the evidence, and whether the verdict used it.
std::optional<std::string> noise_line(const Json& sec, const Json* verdict) {
  const Json* n = child(&sec, "noise");
  if (!flag(child(n, "available")).value_or(false)) return std::nullopt;
  const auto delta = number(child(n, "delta_ms"));
  if (!delta) return std::nullopt;
  const bool beyond = flag(child(n, "beyond_noise")).value_or(false);
  std::string line = "Noise: " + signed_fixed(*delta) + " ms is " + (beyond ? "beyond" : "within") +
                     " run-to-run noise (" + noise_evidence(*n) + ").";
  if (!flag(child(verdict, "noise_aware")).value_or(true))
    line += " The verdict ignores noise (--strict).";
  return line;
}

}  // namespace

std::string render_compare_text(const Json& untrusted) {
  // Labels and diagnosis texts come from the two summaries: data, never control.
  const TerminalSafeJson safe(untrusted);
  const Json& compare = safe.get();
  std::vector<std::string> lines;
  lines.emplace_back("TraceML Compare");
  const std::size_t header_end = lines.size();
  lines.emplace_back("");
  lines.push_back("A: " + text_or(child(child(&compare, "lhs"), "label"), "A"));
  lines.push_back("B: " + text_or(child(child(&compare, "rhs"), "label"), "B"));
  lines.emplace_back("Delta: B - A");
  const Json* primary = child(child(&compare, "overview"), "primary_diagnosis");
  const auto pa = text(child(primary, "lhs"));
  const auto pb = text(child(primary, "rhs"));
  if (pa || pb) {
    lines.push_back("Primary diagnosis: " + pa.value_or("n/a") + " -> " + pb.value_or("n/a") +
                    " (" + (pa != pb ? "changed" : "same") + ")");
  }
  const Json* verdict = child(&compare, "verdict");
  lines.emplace_back("");
  lines.push_back("Verdict: " + text_or(child(verdict, "status"), "INCONCLUSIVE"));
  add_wrapped(lines, "Why: " + text_or(child(verdict, "why"), "n/a"), 5);

  static const SectionSpec kSections[] = {
      {"step_time",
       "Step time diagnosis",
       {"step_time_ms", "input_ms", "dataloader_fetch_cpu_ms", "h2d_ms", "compute_ms",
        "residual_ms"}},
      {"step_memory", "Step memory diagnosis", {"peak_reserved_bytes", "memory_skew_pct"}},
      {"process", "Process diagnosis", {"cpu_avg_percent", "cpu_capacity_percent", "rss_avg_gb"}},
      {"system",
       "System diagnosis",
       {"cpu_avg_percent", "ram_avg_gb", "gpu_util_avg_percent", "gpu_memory_avg_percent"}}};
  const Json* sections = child(&compare, "sections");
  for (const SectionSpec& spec : kSections) {
    const Json* sec = child(sections, spec.key);
    if (!flag(child(sec, "available")).value_or(false)) continue;
    lines.emplace_back("");
    lines.push_back(section_title(spec.key, *sec));
    lines.push_back(row("Metric", "A", "B", "Delta"));
    const Json* diag = child(sec, "diagnosis");
    const auto da = text(child(diag, "lhs"));
    const auto db = text(child(diag, "rhs"));
    lines.push_back(row(spec.diagnosis_label, da.value_or("n/a"), db.value_or("n/a"),
                        da != db ? "changed" : "same"));
    const Json* metrics = child(sec, "metrics");
    for (const char* key : spec.rows) {
      const Json* m = child(metrics, key);
      if (m == nullptr || !m->is_object()) continue;
      const Json* a = child(m, "lhs");
      const Json* b = child(m, "rhs");
      if ((a == nullptr || a->is_null()) && (b == nullptr || b->is_null())) continue;
      const std::string unit = text_or(child(m, "unit"), "");
      // TraceML's label "Process CPU avg" hides that 100% is one core; the
      // summary's text shows CPU capacity (100% = every core) instead.
      const bool per_core =
          std::string(spec.key) == "process" && std::string(key) == "cpu_avg_percent";
      lines.push_back(
          row(per_core ? "Process CPU (1 core = 100%)" : text_or(child(m, "label"), key),
              value_text(a, unit), value_text(b, unit), delta_text(*m)));
    }
    if (const auto n = noise_line(*sec, verdict)) add_wrapped(lines, *n, 2);
  }

  std::vector<std::string> notes;
  if (const Json* w = child(&compare, "warnings"); w != nullptr && w->is_array()) {
    for (const Json& x : *w)
      if (x.is_string()) notes.push_back(x.get<std::string>());
  }
  // Our addition: the sections' own notes (clock fallbacks, legacy schemas).
  for (const SectionSpec& spec : kSections) {
    const Json* n = child(child(sections, spec.key), "notes");
    if (n == nullptr || !n->is_array()) continue;
    for (const Json& x : *n)
      if (x.is_string()) notes.push_back(x.get<std::string>());
  }
  const Json* overall = child(child(verdict, "comparability"), "overall");
  const std::string state = text_or(child(overall, "state"), "");
  if (state == "partial" || state == "insufficient")
    notes.push_back(text_or(child(overall, "reason"), "Some primary compare signals are missing."));
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
