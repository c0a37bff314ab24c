#include "analysis/section.hpp"

#include <cctype>

namespace traceml::analysis {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Crit:
      return "crit";
    case Severity::Warn:
      return "warn";
    case Severity::Info:
      return "info";
  }
  return "info";
}

Severity severity_from_name(const std::string& s) {
  if (s == "crit" || s == "critical") return Severity::Crit;
  if (s == "warn" || s == "warning") return Severity::Warn;
  return Severity::Info;
}

std::optional<std::size_t> Section::metric_index(const std::string& n) const {
  for (std::size_t i = 0; i < metric_names.size(); ++i) {
    if (metric_names[i] == n) return i;
  }
  return std::nullopt;
}

Section section_of(std::string name, std::string index_by, std::vector<std::string> metric_names,
                   std::vector<std::pair<std::string, std::string>> units) {
  Section s;
  s.name = std::move(name);
  s.index_by = std::move(index_by);
  s.metric_names = std::move(metric_names);
  s.units = std::move(units);
  return s;
}

Section fallback_section(const std::string& name) {
  Section s;
  s.name = name;
  s.metadata.mode = "no_data";
  s.metadata.samples = 0;
  s.issues.push_back(issue_of(DiagnosisKind::NoData, Severity::Info, "Section summary unavailable.",
                              "Check final-report logs for this section."));
  s.index_by = name == "system" ? "node_rank" : "global_rank";
  s.window.kind = "sample_window";
  s.window.alignment = "none";
  s.window.samples = 0;
  // Title: "step_time" -> "Step Time".
  std::string title;
  bool up = true;
  for (char c : name) {
    if (c == '_') {
      title += ' ';
      up = true;
    } else {
      title += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
  }
  s.card = "TraceML " + title + " Summary\n- Status: unavailable";
  return s;
}

}  // namespace traceml::analysis
