// The end-of-run artifacts: final_summary.json (with its `text`),
// final_summary.txt and final_summary.html, written atomically into a run
// directory, the page last.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "analysis/summary.hpp"
#include "model/telemetry.hpp"
#include "report/html/page_process.hpp"
#include "report/summary_json.hpp"
#include "report/text/text_report.hpp"

namespace traceml::report {

struct FinalSummary {
  Json json;                 ///< the complete final_summary.json, `text` included
  std::string text;          ///< the text report (final_summary.txt without its last newline)
  TextOptions text_options;  ///< how `text` was rendered
  /// Why final_summary.html was not written (one line), for a warning;
  /// absent when it was, or when none was asked for.
  std::optional<std::string> html_error;
  /// Why timeline.json was not written (one line), for a warning; absent
  /// when it was, or when none was asked for (report/run_timeline.hpp).
  std::optional<std::string> timeline_error;
  /// The diagnosis's aligned steps (analysis::Summary::step_window), which
  /// the page's plots draw from.
  std::shared_ptr<const analysis::StepWindow> step_window;
};

/// Builds the summary JSON and its text. `generated_at` as for summary_json;
/// `evidence_hint` is the path the text report names as full evidence.
/// `tracer` and `run` are the added blocks of DECISIONS 9: the tracer's own
/// counters and cost, and how the traced program ended (`traceml run` only).
/// `run_dir` names the run directory in commands the text gives (TextOptions::run_dir).
/// `html_hint` names the HTML report the text's last line points to, and
/// asks write_run_report for it (TextOptions::html_hint); empty: no page.
/// `partial`: the run holds only some of its world's ranks
/// (collector::partial_block); the text then says so before the verdict.
/// `profiles`: the run's profiles (profiles_json, an added key), which the
/// text and the page name after the verdict's Next line.
/// `timeline`: the run's timeline.json (timeline_json, an added key), which
/// the text names before its last line.
FinalSummary build_final_summary(const analysis::Summary& s, const std::string& generated_at,
                                 const std::string& evidence_hint,
                                 const std::optional<Json>& tracer = std::nullopt,
                                 const std::optional<Json>& run = std::nullopt,
                                 const std::string& run_dir = {}, const std::string& html_hint = {},
                                 const std::optional<Json>& partial = std::nullopt,
                                 const std::optional<Json>& profiles = std::nullopt,
                                 const std::optional<Json>& timeline = std::nullopt);

/// Writes DIR/final_summary.json and DIR/final_summary.txt (creating DIR).
/// Throws WriteError; an existing good file is never left half-written.
void write_final_summary(const FinalSummary& f, const std::string& dir);

/// write_final_summary, then DIR/final_summary.html when `f` names one (its
/// html_hint): the page of f.json with the plots of `telemetry`, which must
/// be the run the summary was made from (its f.step_window points into it);
/// nullptr: no plots. The JSON and the text are written first, naming no
/// page; the page is drawn in a child process within `page_limits`
/// (report/html/page_process.hpp) and written by this one; once it exists, the JSON
/// and text are written again, naming it. The page is an extra and never
/// costs the summary: when it cannot be drawn or written, f keeps the text
/// that does not name it, the reason goes to f.html_error (one line), and no
/// page is left (not even an earlier report's). Throws WriteError only for
/// the JSON and the text.
/// Writes an extra artifact while the page draws; the one-line reason when
/// it could not (report/run_timeline.hpp's write_run_timeline).
using ExtraWriter = std::function<std::optional<std::string>()>;

/// `timeline`: when `f` names a timeline (its `timeline` key), writes it,
/// while the page's child draws; the summary names it only once it exists,
/// and not at all when it could not be written (f.timeline_error says why).
void write_run_report(FinalSummary& f, const std::string& dir, const model::Telemetry* telemetry,
                      const PageLimits& page_limits, const ExtraWriter& timeline = {});

/// The paths a summary names (decided for issue 47, docs/quickstart.md "Paths
/// in the report"): the files name the run directory by its absolute path
/// (symbolic links resolved), so that every path and command in them works
/// wherever it is pasted, and `traceml report RUN_DIR` writes the same bytes
/// from any working directory; what is printed on the terminal names it
/// relative to the working directory when it lies below it (terminal_text).
std::string absolute_path(const std::string& path);
/// `path` (absolute) relative to the working directory when it lies below it
/// ("logs/run/final_summary.json"), else unchanged.
std::string path_for_terminal(const std::string& path);
/// The absolute "<run dir>/final_summary.json", as the summary names it.
std::string evidence_hint_for(const std::string& dir);
/// The absolute "<run dir>/final_summary.html", as the summary names it.
std::string html_hint_for(const std::string& dir);
/// The run directory as the summary's commands name it: its absolute path.
std::string run_dir_hint_for(const std::string& dir);
/// The text report as printed on the terminal: `f.text` with its paths
/// relative to the working directory where they lie below it.
std::string terminal_text(const FinalSummary& f);

}  // namespace traceml::report
