// The compare result written as JSON (spec §6.2, schema_version 2): a
// CompareReport in the fixed key order of TraceML's compare, and the labels
// of its inputs (spec §6.1).
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "report/compare/compare.hpp"
#include "report/compare/compare_noise.hpp"
#include "report/compare/compare_stalls.hpp"
#include "report/json_read.hpp"
#include "report/text/text_format.hpp"
#include "report/text/text_layout.hpp"

namespace traceml::report {

namespace {

using json_read::opt_json;

const char* outcome_of(VerdictStatus status) {
  // In the order of VerdictStatus.
  constexpr const char* kOutcomes[] = {"improvement", "regression", "equivalent", "mixed",
                                       "unclear"};
  return kOutcomes[static_cast<int>(status)];
}

Json metric_json(const MetricDelta& m) {
  Json j;
  j["label"] = m.label;
  j["unit"] = m.unit;
  j["lhs"] = m.is_text() ? opt_json(m.lhs_text) : opt_json(m.lhs);
  j["rhs"] = m.is_text() ? opt_json(m.rhs_text) : opt_json(m.rhs);
  j["delta"] = opt_json(m.delta);
  j["pct_change"] = opt_json(m.pct_change);
  j["delta_unit"] = m.delta_unit;
  j["direction"] = m.direction;
  return j;
}

Json diagnosis_json(const DiagnosisChange& d) {
  return Json{{"lhs", opt_json(d.lhs)}, {"rhs", opt_json(d.rhs)}, {"changed", d.changed()}};
}

Json section_json(const CompareSection& s) {
  Json j;
  j["available"] = s.available;
  j["diagnosis"] = diagnosis_json(s.diagnosis);
  Json metrics = Json::object();
  for (const MetricDelta& m : s.metrics)
    metrics[m.key] = metric_json(m);
  j["metrics"] = std::move(metrics);
  Json notes = Json::array();
  for (const std::string& n : s.notes)
    notes.push_back(n);
  j["notes"] = std::move(notes);
  return j;
}

Json step_time_json(const StepTimeCompare& s) {
  Json j = section_json(s);
  j["comparison_clock"] = opt_json(s.comparison_clock);
  j["noise"] = noise_json(s.noise);
  j["stalls"] = stalls_json(s);
  return j;
}

Json run_json(const CompareRun& run) {
  Json s;
  s["path"] = run.side.path;
  s["label"] = run.side.label;
  s["file_name"] = run.side.file_name;
  s["parent_name"] = run.side.parent_name;
  s["schema_version"] = run.schema_version;
  s["duration_s"] = opt_json(run.duration_s);
  return s;
}

Json verdict_json(const CompareVerdict& v) {
  Json j;
  j["status"] = verdict_name(v.status);
  j["outcome"] = outcome_of(v.status);
  j["severity"] = v.severity;
  j["summary"] = v.summary;
  j["why"] = v.why;
  j["action"] = v.action;
  j["primary_domain"] = v.primary_domain;
  j["primary_metric"] = opt_json(v.primary_metric);
  Json findings = Json::array();
  for (const Finding& x : v.findings) {
    findings.push_back(Json{{"status", verdict_name(x.status)},
                            {"priority", x.priority},
                            {"domain", x.domain},
                            {"metric", opt_json(x.metric)},
                            {"severity", x.severity},
                            {"why", x.why}});
  }
  j["findings"] = std::move(findings);
  Json memory{{"state", comparability_name(v.step_memory)}};
  if (v.step_memory_measured) memory["measured"] = *v.step_memory_measured;
  j["comparability"] = Json{{"overall", Json{{"state", comparability_name(v.overall)},
                                             {"reason", opt_json(v.overall_reason)}}},
                            {"step_time", Json{{"state", comparability_name(v.step_time)}}},
                            {"step_memory", std::move(memory)}};
  j["noise_aware"] = v.noise_aware;
  Json top = Json::array();
  for (const TopChange& t : v.top_changes) {
    top.push_back(Json{{"domain", t.domain},
                       {"metric", opt_json(t.metric)},
                       {"summary", t.summary},
                       {"significance", t.significance}});
  }
  j["top_changes"] = std::move(top);
  j["largest_shift"] = v.why;
  return j;
}

}  // namespace

Json compare_json(const CompareReport& r, const std::string& text) {
  Json out;
  out["schema_version"] = 2;
  out["generated_at"] = r.generated_at;
  out["lhs"] = run_json(r.lhs);
  out["rhs"] = run_json(r.rhs);
  Json warnings = Json::array();
  for (const std::string& w : r.warnings)
    warnings.push_back(w);
  out["warnings"] = std::move(warnings);
  const std::pair<const char*, const CompareSection*> kSections[] = {
      {"step_time", &r.step_time},
      {"step_memory", &r.step_memory},
      {"process", &r.process},
      {"system", &r.system}};
  Json sections;
  Json availability;
  for (const auto& [name, sec] : kSections) {
    sections[name] = sec == &r.step_time ? step_time_json(r.step_time) : section_json(*sec);
    availability[name] = sec->available;
  }
  out["sections"] = std::move(sections);
  out["availability"] = std::move(availability);
  out["overview"] = Json{{"duration_s", Json{{"lhs", opt_json(r.lhs.duration_s)},
                                             {"rhs", opt_json(r.rhs.duration_s)}}},
                         {"primary_diagnosis", diagnosis_json(r.primary_diagnosis)}};
  out["text"] = text;
  out["verdict"] = verdict_json(r.verdict);
  return out;
}

CompareResult compare_summaries(const Json& lhs, const Json& rhs, const CompareInputs& meta,
                                const CompareOptions& options) {
  CompareResult r;
  r.report = compute_compare(lhs, rhs, meta, options);
  r.json = compare_json(r.report, render_compare_text(r.report));
  r.status = verdict_name(r.report.verdict.status);
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
