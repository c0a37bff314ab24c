// Turns a run database into the run's artifacts: final_summary.json (with the
// `tracer` block), final_summary.txt and final_summary.html. Used at the end
// of `traceml run`, at the exit of a standalone program, and by
// `traceml report RUN_DIR`.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "analysis/summary.hpp"
#include "report/final_summary.hpp"
#include "store/rejection_counts.hpp"
#include "store/run_db.hpp"
#include "store/run_outcome.hpp"

namespace traceml::collector {

/// The `tracer` block of final_summary.json (DECISIONS 9): per rank, records
/// sent (by the rank), received (by the collector) and dropped, and the
/// tracer's measured cost per step (a rank without a clean end: its own
/// counters as of its last report, raised to what the collector holds of it,
/// and `counters_partial`); plus totals and refused connections:
/// their total from `rejections` when the file has the counts (then also
/// `rejected_by_kind`, when some were refused), else the detailed rows.
report::Json tracer_block(const store::RunData& data,
                          const std::optional<store::RejectionCounts>& rejections = std::nullopt);

/// The ranks that have step rows, in one pass over them.
std::set<int> ranks_with_steps(const model::StepLog& steps);

/// The end of the run as recorded: the latest timestamp of any record. The
/// summaries' `generated_at` uses it, not the wall clock, so that artifacts
/// are a pure function of their input (the run database or a JSONL file).
double end_of_run(const model::Telemetry& t);

/// The `run` block: how the traced program ended, as `traceml run` stored it.
report::Json run_block(const store::RunOutcome& outcome);

/// The `partial` block when the run names a world larger than the ranks it
/// holds (a rank traced on its own, a rank that never reached the
/// collector): the world size, the ranks held, how many are missing and, for
/// a rank's own run directory (<name>_rank<N>), the command that merges the
/// job's pieces; `refused`: connections the collector refused (a reason
/// ranks may be missing). Absent when the run is whole.
std::optional<report::Json> partial_block(const store::RunData& data, const std::string& run_dir,
                                          std::int64_t refused = 0);

/// Reads RUN_DIR/telemetry.db into a RunState (only what the analysis reads is
/// kept) and finalizes from it as below. Throws store::RunDbError (bad
/// database) or report::WriteError.
/// `page_limits`: how long and in how much memory the page may draw (its
/// caller read them: report::page_limits_from).
report::FinalSummary finalize_run(const std::string& run_dir, std::int64_t window = 10000,
                                  const report::PageLimits& page_limits = {});

/// Runs the analysis on `data` (`window`: latest aligned steps per rank; a run
/// as RunState gives it, or a whole run) and writes RUN_DIR/final_summary.json
/// and .txt atomically, with the run outcome and refusal counts the run
/// database holds, and final_summary.html with the plots of `data`
/// (report::write_run_report: a page that cannot be written is said in the
/// result's html_error, for a warning, and costs nothing else). Returns what
/// was written. The end of `traceml run` passes
/// the collector's RunState; `traceml report RUN_DIR` reads the database into
/// one: the two give the same bytes. Throws report::WriteError.
report::FinalSummary finalize_run(const std::string& run_dir, const store::RunData& data,
                                  std::int64_t window, const report::PageLimits& page_limits = {});

/// The analysis finalize_run runs (analysis::summarize with `window`), for a
/// caller that runs it ahead, on another thread.
analysis::Summary summarize_run(const store::RunData& data, std::int64_t window);
/// finalize_run with the analysis done ahead: `summary` is
/// summarize_run(data, window). The same bytes.
report::FinalSummary finalize_run(const std::string& run_dir, const store::RunData& data,
                                  const analysis::Summary& summary,
                                  const report::PageLimits& page_limits = {});

}  // namespace traceml::collector
