// final_summary.html: the run report as one self-contained page (inline CSS
// and SVG, no script, no external URL; it opens from disk). The verdict
// block of the text report, then plots of the run's per-step data, then the
// text report itself. docs/html-report.md describes the page.
#pragma once

#include <string>

#include "model/telemetry.hpp"
#include "report/summary_json.hpp"

namespace traceml::analysis {
struct StepWindow;
}

namespace traceml::report {

struct HtmlOptions {
  /// The run directory as the report names it (TextOptions::run_dir), for
  /// the command of the slow window; empty: "RUN_DIR".
  std::string run_dir;
  /// The diagnosis's alignment of the run's steps (analysis::Summary::
  /// step_window), which the plots reuse; null: they align the steps again.
  const analysis::StepWindow* step_window = nullptr;
};

/// The page of `summary` (a final_summary.json object; every read of it is
/// defensive, as the text report's) with the plots drawn from `run`, the
/// telemetry the summary was made from; with `run` null, the page of a
/// summary alone, which says that the plots need the run directory. Every
/// string from the summary or the run is escaped.
std::string render_html(const Json& summary, const model::Telemetry* run,
                        const HtmlOptions& opts = {});

}  // namespace traceml::report
