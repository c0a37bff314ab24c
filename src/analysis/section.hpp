// The common shape every section diagnosis produces (spec §4.0 and §5.3): an
// ordered, never-empty list of issues plus the window statistics that
// final_summary.json and the text report both read. The report module
// serializes this generically; nothing downstream recomputes a value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/diagnosis_kind.hpp"

namespace traceml::analysis {

/// Insertion-ordered JSON, used for the free-form `evidence` of an issue. The
/// key order is part of the schema (spec §4.0), so a plain map would not do.
using Json = nlohmann::ordered_json;

enum class Severity : std::uint8_t { Info = 0, Warn = 1, Crit = 2 };
const char* severity_name(Severity s);  ///< "info" | "warn" | "crit"
/// "info"/"warn"/"crit" (and "warning"/"critical"); anything else is Info (rank 0).
Severity severity_from_name(const std::string& s);
inline int severity_rank(Severity s) {
  return static_cast<int>(s);
}

/// One diagnosis record (spec §4.0, `DiagnosticIssue`).
struct Issue {
  std::string kind;    ///< stable machine key, e.g. INPUT_BOUND
  std::string status;  ///< display label, e.g. INPUT-BOUND
  Severity severity = Severity::Info;
  std::string summary;
  std::string action;
  std::optional<std::string> metric;
  std::optional<std::string> phase;
  std::optional<double> score;
  std::optional<double> share_pct;  ///< a fraction (0.25 = 25 %), despite the name
  std::optional<double> skew_pct;   ///< a fraction as well
  std::vector<int> ranks;
  Json evidence = Json::object();

  /// Sets `kind` and `status` from the vocabulary (they always go together).
  void set_kind(DiagnosisKind k) {
    kind = to_string(k);
    status = status_of(k);
  }
  [[nodiscard]] bool is(DiagnosisKind k) const { return kind == to_string(k); }
};

/// The order every section ranks its issues by after its own rule priority:
/// the more severe first, then the higher score (absent: 0). Negative when `a`
/// goes first, positive when `b` does, 0 when neither decides.
inline int severity_then_score(const Issue& a, const Issue& b) {
  const int sa = severity_rank(a.severity), sb = severity_rank(b.severity);
  if (sa != sb) return sa > sb ? -1 : 1;
  const double ca = a.score.value_or(0.0), cb = b.score.value_or(0.0);
  if (ca != cb) return ca > cb ? -1 : 1;
  return 0;
}

/// An issue of `kind` at `severity` with its words; the rule that raises it
/// adds its metric, phase, numbers, ranks and evidence.
inline Issue issue_of(DiagnosisKind kind, Severity severity, std::string summary,
                      std::string action) {
  Issue i;
  i.set_kind(kind);
  i.severity = severity;
  i.summary = std::move(summary);
  i.action = std::move(action);
  return i;
}

/// Identity of a group row (a rank or a node).
struct Identity {
  std::optional<int> global_rank;
  std::optional<int> local_rank;
  std::optional<int> node_rank;
  std::optional<std::string> hostname;
  std::optional<int> local_world_size;
  std::optional<int> world_size;
};

/// A point statistic: a value and the group-row key it came from.
struct Point {
  std::optional<double> value;
  std::optional<std::string> idx;
};

struct GroupRow {
  std::string key;  ///< "0", "1", ... (rank or node label)
  Identity identity;
  std::vector<std::optional<double>> metrics;  ///< parallel to Section::metric_names
};

struct Window {
  std::string kind;       ///< "sample_window" | "step_window"
  std::string alignment;  ///< "none" | "common_steps"
  std::optional<std::int64_t> samples;
  std::optional<std::int64_t> steps_analyzed;
  std::optional<std::int64_t> start_step;
  std::optional<std::int64_t> end_step;
  std::optional<std::int64_t> completed_step;
  std::optional<std::int64_t> window_size;
  std::optional<std::string> diagnosis_clock;  ///< step_time only; otherwise the key is omitted
  /// step_time only, an added key present when not 0: steps left out
  /// because they ran under LibTorch's profiler (StepWindow::profiled_left_out).
  std::optional<std::int64_t> profiled_steps_left_out;
};

struct Metadata {
  std::string mode = "no_data";  ///< "no_data" | "single_node" | "multi_node"
  std::optional<double> duration_s;
  std::optional<std::int64_t> samples;
  std::optional<std::int64_t> nodes_expected;
  std::optional<std::int64_t> nodes_observed;
  std::optional<std::string> nodes_coverage;
  std::optional<bool> nodes_partial;
  std::optional<std::int64_t> gpus_observed;
  std::optional<std::int64_t> global_ranks_seen;
  std::optional<std::int64_t> global_ranks_used;
  std::optional<std::int64_t> training_total_steps;
  std::optional<std::int64_t> training_latest_step;
};

/// One section of final_summary.json (spec §5.3), ready to serialize.
struct Section {
  std::string name;  ///< "system" | "process" | "step_time" | "step_memory"
  Metadata metadata;
  std::vector<Issue> issues;  ///< never empty; issues[0] is the section's diagnosis
  std::string index_by;       ///< "node_rank" | "global_rank"
  Window window;
  std::vector<std::string> metric_names;  ///< section_metric_names, in order
  std::vector<std::optional<double>> average;
  std::vector<Point> median;
  std::vector<Point> worst;
  /// Keys added to `global` after `worst` (ours, not TraceML's; e.g. the
  /// step-time spread that compare uses to judge noise).
  Json global_extra = Json::object();
  std::vector<GroupRow> rows;  ///< in key order of the JSON object
  std::vector<std::pair<std::string, std::string>> units;
  std::string card;  ///< the section-local card text (spec §5.6)

  [[nodiscard]] const Issue& diagnosis() const { return issues.front(); }
  /// Index of a metric in metric_names, or nullopt.
  [[nodiscard]] std::optional<std::size_t> metric_index(const std::string& name) const;
};

/// A section with its name, what its rows are indexed by, and its metrics
/// (section_metric_names, in order) with their units set.
Section section_of(std::string name, std::string index_by, std::vector<std::string> metric_names,
                   std::vector<std::pair<std::string, std::string>> units);

/// The fallback payload for a section whose analysis failed (spec §5.1).
Section fallback_section(const std::string& name);

}  // namespace traceml::analysis
