// A typed view of a final_summary.json (schema 1.7, and TraceML's): the
// facts the renderers and compare read, found once. Data only — no wording,
// no number formats, no layout — so that the text report and a second
// renderer (HTML) read the same facts the same way. Every read is defensive
// (json_read.hpp): a missing, null or mistyped part is absent.
#pragma once

#include <optional>
#include <string>

#include "report/json_read.hpp"

namespace traceml::report {

/// A diagnosis severity as summaries write it ("info", "warning",
/// "critical"; TraceML also writes "warn" and "crit").
enum class Severity { Info = 0, Warning = 1, Critical = 2 };

/// Unknown or absent severities are Info: they are not printed as a problem.
Severity severity_of(const std::string& s);

/// A statistic point of a section: global.{stat}.{metric} = {value, idx}.
struct Point {
  std::optional<double> value;
  std::optional<std::string> idx;  ///< the group row it came from
};

Point point(const json_read::Json* section, const char* stat, const char* metric);

/// global.average.{metric} of a section.
std::optional<double> average(const json_read::Json* section, const char* metric);

/// The group row `key` of a section (groups.rows.{key}), or nullptr.
const json_read::Json* group_row(const json_read::Json* section,
                                 const std::optional<std::string>& key);

/// A row's global rank: its identity, else its key (rows are keyed by rank).
std::optional<long long> row_rank(const json_read::Json* row,
                                  const std::optional<std::string>& key);

/// A row's node rank from its identity.
std::optional<long long> row_node(const json_read::Json* row);

/// A System row's node: its identity, else its key (rows are keyed by node).
std::optional<long long> row_node_or_key(const json_read::Json* row,
                                         const std::optional<std::string>& key);

/// The summary's parts, read once.
struct SummaryView {
  const json_read::Json* root = nullptr;
  const json_read::Json* meta = nullptr;
  const json_read::Json* primary = nullptr;
  const json_read::Json* evidence = nullptr;  ///< primary_diagnosis.evidence
  const json_read::Json* system = nullptr;
  const json_read::Json* process = nullptr;
  const json_read::Json* step_time = nullptr;
  const json_read::Json* step_memory = nullptr;
  std::string kind;                ///< primary kind, "" when absent
  std::string severity;            ///< primary severity as written, "" when absent
  bool multi = false;              ///< step_time.metadata.global_ranks_used > 1
  std::optional<long long> gpus;   ///< meta.gpus_observed
  std::optional<long long> world;  ///< meta.world_size
};

/// `summary` must outlive the view.
SummaryView view_summary(const json_read::Json& summary);

/// gpus_observed == 0: a run without a GPU.
bool cpu_only(const SummaryView& run);

/// Steps in the diagnosis window (the step-time window, else the primary's evidence).
std::optional<long long> steps_analyzed(const SummaryView& run);

/// The primary diagnosis's GPU util average.
std::optional<double> primary_util(const SummaryView& run);

/// A section's diagnosis field ("kind", "status", "severity", "summary"), "" when absent.
std::string diagnosis_field(const json_read::Json* section, const char* field);

/// The rank a step-time issue of `kind` names first, if any.
std::optional<long long> issue_rank(const SummaryView& run, const std::string& kind);

/// The evidence object of the step-time issue of `kind`, if any: where the
/// GPU activity numbers of a finding live (issue 5; absent in TraceML's files).
const json_read::Json* issue_evidence(const SummaryView& run, const std::string& kind);

/// Straggler evidence: for STRAGGLER, the comparison where the culprit rank
/// loses the most time (TraceML quotes the first comparison, always input
/// wait, even when the excess is elsewhere: DECISIONS 4 lets our text say
/// where the time went); otherwise the comparison merged into the evidence
/// itself (§4.5).
const json_read::Json* straggler_comparison(const SummaryView& run);

/// step_time.global.slow_window: the slowest consecutive aligned steps of
/// one rank (docs/timeline.md "The slow window"); absent when the summary has
/// none or a part of it is missing or out of range.
struct SlowWindow {
  long long rank = 0;
  long long first_step = 0;
  long long last_step = 0;
  long long steps = 0;
  double slower_pct = 0.0;  ///< than the rank's median step, percent
};
std::optional<SlowWindow> slow_window(const SummaryView& run);

/// The rank a straggler verdict names (its comparison's worst rank); absent
/// for other verdicts.
std::optional<long long> straggler_rank(const SummaryView& run);

/// The group-row key of the rank a multi-rank report shows (the STEP TIMING
/// tree, the HTML report's phase plot): the step time's median rank, except
/// under a straggler verdict, where every rank advances at the culprit's pace
/// and that median may land on the culprit itself (with two ranks it is one
/// of them by a hair): then the comparison's typical rank.
std::optional<std::string> representative_key(const SummaryView& run);

}  // namespace traceml::report
