// final_summary.txt: the plain-text run report, rendered from a final_summary.json
// object (schema 1.7). It reads only the JSON, so it renders summaries written by
// this tool and by TraceML (Python) alike.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace traceml::report {

struct TextOptions {
  /// Shown on the last line, e.g. "logs/run1/final_summary.json"; empty means
  /// "final_summary.json".
  std::string evidence_hint;
  /// ANSI colours for a terminal. The visible text is the same either way.
  bool color = false;
  /// The run directory as the report names it (e.g. "logs/run1"), for the
  /// command that draws the slow window; empty: "RUN_DIR" (a summary made
  /// from telemetry JSONL has no run database to draw from).
  std::string run_dir;
  /// The HTML report beside it, e.g. "logs/run1/final_summary.html": the
  /// last line then reads "Full evidence: {hint} · {html_hint}" (spec §5.8
  /// item 8). Empty: no page was written.
  std::string html_hint;
};

/// The report of the seed guide (Verdict / Why / Next / Scope, STEP TIMING beside
/// STEP MEMORY, SYSTEM beside PROCESS). Never throws: a missing, null or
/// mistyped part of `summary` is left out or printed as "n/a". No trailing newline.
std::string render_text(const nlohmann::ordered_json& summary, const TextOptions& opts = {});

/// What `traceml view` prints: the summary's own top-level "text" when it is a
/// non-empty string (the report as written at the end of the run), else
/// render_text(summary).
std::string summary_text(const nlohmann::ordered_json& summary);

}  // namespace traceml::report
