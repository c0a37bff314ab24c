// The end-of-run artifacts: final_summary.json (with its `text`) and
// final_summary.txt, written atomically into a run directory.
#pragma once

#include <optional>
#include <string>

#include "analysis/summary.hpp"
#include "report/summary_json.hpp"

namespace traceml::report {

struct FinalSummary {
  Json json;         ///< the complete final_summary.json, `text` included
  std::string text;  ///< the text report (final_summary.txt without its last newline)
};

/// Builds the summary JSON and its text. `generated_at` as for summary_json;
/// `evidence_hint` is the path the text report names as full evidence.
/// `tracer` and `run` are the added blocks of DECISIONS 9: the tracer's own
/// counters and cost, and how the traced program ended (`traceml run` only).
/// `run_dir` names the run directory in commands the text gives (TextOptions::run_dir).
FinalSummary build_final_summary(const analysis::Summary& s, const std::string& generated_at,
                                 const std::string& evidence_hint,
                                 const std::optional<Json>& tracer = std::nullopt,
                                 const std::optional<Json>& run = std::nullopt,
                                 const std::string& run_dir = {});

/// Writes DIR/final_summary.json and DIR/final_summary.txt (creating DIR).
/// Throws WriteError; an existing good file is never left half-written.
void write_final_summary(const FinalSummary& f, const std::string& dir);

/// "<parent>/<dir>/final_summary.json" for a run directory (as the report names it).
std::string evidence_hint_for(const std::string& dir);
/// "<parent>/<dir>": a run directory as the report names it.
std::string run_dir_hint_for(const std::string& dir);

}  // namespace traceml::report
