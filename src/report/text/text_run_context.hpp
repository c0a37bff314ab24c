// The lines of the text report around its blocks: the meta line under the
// title, the Also block (findings that are not the cause of slow steps), and
// the Run / Tracer lines (how the traced program ended, what tracing cost).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/summary_view.hpp"
#include "report/text/text_layout.hpp"

namespace traceml::report {

/// "run1 · 2 GPUs · 1 node · 100 steps analyzed · 1m 5s", wrapped.
std::vector<std::string> meta_lines(const SummaryView& run);

/// What the text says of a run that holds only some of its world's ranks
/// (the summary's `partial` block): lines under the meta line, and the
/// Verdict's scope (" (R0 only)"). Empty when the run is whole.
struct Partial {
  std::vector<std::string> lines;
  std::string verdict_scope;
};
Partial partial_lines(const SummaryView& run);

/// "Also, not the cause of slow steps:" and up to two warning/critical
/// findings of System, Process and Step Memory; empty when there are none.
std::vector<std::string> also_lines(const SummaryView& run, const Painter& p);

/// One line each for the `run` block `traceml run` adds (unless it
/// completed), each of its stalls (a few, then a count), and the `tracer`
/// block, only when present.
std::vector<std::string> run_lines(const SummaryView& run);

/// The headline of a run that ended while a rank hung (DECISIONS 15), from
/// the `run.hang` that `traceml run` and `serve` add: why ("R1 was silent
/// for 12.3 s at step 812, backward, when the run was stopped; 1 rank waited
/// for it.") and what to do next. Absent when nothing hung.
struct HangHeadline {
  std::string why;
  std::string next;
};
std::optional<HangHeadline> hang_headline(const SummaryView& run);

}  // namespace traceml::report
