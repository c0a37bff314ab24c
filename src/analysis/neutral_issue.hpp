// Spec §4.0: when no rule fired, a section's neutral primary diagnosis (NO_DATA,
// NORMAL, ...) still becomes issues[0], so that the issue list is never empty.
// Private to the analysis module.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/section.hpp"

namespace traceml::analysis {

/// The issue of a neutral primary. `primary_fields` are the primary's own
/// fields beyond kind/status/severity/reason/action (System: samples_used,
/// scope; Process: samples_used). Those that are null or an empty object are
/// dropped and the rest become the evidence with keys sorted alphabetically,
/// as TraceML's conversion does. Score, share and skew stay null.
inline Issue neutral_issue(DiagnosisKind kind, std::string summary, std::string action,
                           const Json& primary_fields) {
  Issue issue = issue_of(kind, Severity::Info, std::move(summary), std::move(action));
  std::vector<std::string> keys;
  for (auto it = primary_fields.begin(); it != primary_fields.end(); ++it) {
    const Json& v = it.value();
    if (v.is_null() || (v.is_object() && v.empty())) continue;
    keys.push_back(it.key());
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& k : keys)
    issue.evidence[k] = primary_fields.at(k);
  return issue;
}

/// The neutral primary of a sample section (System, Process) whose rules
/// raised nothing: NO_DATA in the section's words without samples, else
/// NORMAL saying which signals showed no pressure. `fields` as above.
inline Issue sample_neutral_issue(std::int64_t samples, const Json& fields,
                                  std::string no_data_summary, std::string no_data_action,
                                  std::string normal_summary) {
  if (samples <= 0) {
    return neutral_issue(DiagnosisKind::NoData, std::move(no_data_summary),
                         std::move(no_data_action), fields);
  }
  return neutral_issue(DiagnosisKind::Normal, std::move(normal_summary),
                       "Use training diagnostics for model-level bottlenecks.", fields);
}

}  // namespace traceml::analysis
