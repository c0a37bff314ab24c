// The text report (final_summary.txt), rendered from final_summary.json alone.
//
// Layout: the seed guide's "Example excerpt" (find-pytorch-input-pipeline-
// bottlenecks), wording: spec §5.8 (the v0.3.7 card) wherever the guide is silent.
// The decisions taken where neither says it exactly:
//
// * Line order: title, meta line, blank, Verdict, Why, Next (right after Why,
//   as in the guide), then the §5.8 "after Next" line (Supporting:, or the
//   all-normal line), Scope (always printed), blank, the
//   STEP TIMING || STEP MEMORY block, blank, the SYSTEM || PROCESS block, blank,
//   the Also block, Full evidence. §5.8's "Peak step memory" line is not printed:
//   the STEP MEMORY block carries the same numbers.
// * Prose (meta, Why, Next, Supporting, Also, Observed anyway) wraps greedily at
//   120 columns (kProseWidth, the widest the blocks get with typical values),
//   never inside a word; continuation lines are indented under the text after
//   the label ("Why: " -> 5 spaces, "Next: " -> 6, "! " -> 2).
// * Side-by-side blocks: the left side is padded to a minimum width (50 for
//   STEP TIMING, 52 for SYSTEM, the guide's columns), widened to its longest
//   line when a value does not fit, so every `||` of a block is in one column.
//   Separators are " || " and " ||  " as in the guide. Trailing blanks are
//   stripped, so a row with an empty right side ends in "||". A block whose
//   partner section is absent from the JSON is printed alone, without `||`;
//   its summary text then wraps at the full width instead of the column's.
//   SYSTEM and PROCESS heads (title, Evidence, blank) are padded to the same
//   height so that their tables start on the same row.
// * Table columns (label, median, worst) have the guide's widths and grow to
//   the longest cell plus one space. "worst" cells name where: `, N{node}` for
//   System, `, R{rank}/N{node}` for Process and Step Memory, from the group
//   row the JSON's worst point names (the percent in "16.0 GB (27%)" is read
//   from that same row, so both numbers describe one node or rank). A row
//   whose median and worst are both null is left out; one null cell is "n/a".
// * STEP TIMING header: multi-rank (step_time.metadata.global_ranks_used > 1)
//   shows `(Median R{r}/N{n})` for the representative rank of step time
//   (global.median.step_time_ms.idx) and the tree shows that rank's own group
//   row, one real rank as the guide asks; when that row is missing the
//   per-metric global medians are used and the header says `(Median)`.
//   Single rank: `(R{r}/N{n})` of the only group row, else `(Average)`; values
//   are global.average. Clock: `GPU Clock` / `CPU Clock` from the window's
//   diagnosis_clock, omitted when absent.
// * Tree: Step Time; Input Wait, Compute (Forward, Backward, Optimizer under
//   it), H2D, Residual. Null rows are skipped; Compute's children are skipped
//   with it (they would have no parent). No tree when Step Time is null or
//   <= 0: the row then reads "n/a". Row: label+glyph padded to 19, value
//   right-aligned in 7 (so values end at column 26), " ms  ", share in 4.
// * Multi-rank worst-rank cells (§5.8 rule): a depth>0 row gets
//   `{worst:>6.1f} ms (R{r})` when it is the straggler's compared metric or
//   its skew is material; the median the rule compares with is the value the
//   row shows. If any row has one, Step Time gets one too, the header gets
//   "worst rank" above them, and the block widens to hold them.
// * Culprit marker `◀ cause` / `◀ {ratio}x` (one space, as the brief shows)
//   is the last thing on its row, so it points at the worst-rank cell when
//   there is one (as §5.8 places it).
// * Straggler Why/Next use the guide's notation: `R0/N0` (node from the rank's
//   group row), `the slow rank` when the rank is unknown, and
//   `All {world_size} ranks then advance at R0's pace.`
// * Degraded verdicts (INSUFFICIENT_STEP_TIME_DATA): no tree; the §5.8
//   "Observed anyway:" line stands alone after Scope, then STEP MEMORY alone,
//   then SYSTEM || PROCESS. No Also block (§5.8 prints it only beside a
//   verdict, and "not the cause of slow steps" needs one).
// * CPU-only runs (gpus_observed == 0): `H2D and step memory not measured (no
//   GPU).` under the tree. The Also block is printed on them too.
// * GPU activity (issue 5; only when the JSON has the added Step Time metrics):
//   under the tree, for the tree's rank, `Collective (NCCL): {ms} per step`,
//   `H2D copies: {n} per step, {bytes}, {p}% pageable` and `GPU idle in
//   steps: {p}%`; a `GPU idle in steps` row under `GPU util` in SYSTEM. Why /
//   Next add the pin-memory advice (H2D-BOUND, H2D STRAGGLER) and the
//   collective sentence (RANK STRAGGLER, RESIDUAL-HEAVY) from the Step Time
//   finding's evidence, at the thresholds the analysis uses.
// * SYSTEM Evidence: LOW/MODERATE GPU util -> `GPU utilization averaged
//   {u:.0f}%.` (u from the diagnosis evidence, else the cluster average);
//   otherwise the diagnosis summary. PROCESS shows its summary as Evidence only
//   for a warn/crit finding (NORMAL would repeat boilerplate).
// * No primary_diagnosis: `Verdict: n/a`. Unknown kinds: the status label,
//   with the primary summary/action as Why/Next.
// * Colour (opt-in): verdict label and severity words by severity, the
//   section status values by their own severity, the culprit marker, the
//   title and the "Next:" label in bold, Scope and Full evidence dim. Colour
//   codes wrap only unpadded tokens, and widths are measured without them,
//   so the visible text never changes.
#include "report/text/text_report.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "analysis/number_format.hpp"
#include "model/text.hpp"
#include "report/summary_json.hpp"
#include "report/summary_view.hpp"
#include "report/text/text_format.hpp"
#include "report/text/text_layout.hpp"
#include "report/text/text_metric_tables.hpp"
#include "report/text/text_run_context.hpp"
#include "report/text/text_step_timing.hpp"
#include "report/text/text_timeline.hpp"
#include "report/text/text_verdict.hpp"

namespace traceml::report {

namespace {

/// The guide's left column widths: STEP TIMING, then SYSTEM METRICS.
constexpr std::size_t kStepLeftMin = 50;
constexpr std::size_t kMetricsLeftMin = 52;
constexpr const char* kStepSep = " || ";
constexpr const char* kMetricsSep = " ||  ";

}  // namespace

std::string render_text(const nlohmann::ordered_json& untrusted, const TextOptions& opts) {
  const TerminalSafeJson safe(untrusted);
  const Json& summary = safe.get();
  const Painter p(opts.color);
  const SummaryView run = view_summary(summary);
  const Verdict verdict = read_verdict(run);
  const Severity severity = severity_of(run.severity);
  std::vector<std::string> out;

  out.push_back(p.paint("TraceML Run Summary", ansi::kBold));
  append(out, meta_lines(run));
  const Partial partial = partial_lines(run);
  append(out, partial.lines);
  out.emplace_back();

  // A run that ended while a rank hung opens with the hang (DECISIONS 15);
  // the step verdict follows as what the steps showed before it.
  const std::optional<HangHeadline> hang = hang_headline(run);
  if (hang) {
    out.push_back("Verdict: " + p.by_severity("HANG", Severity::Critical) + "  " +
                  p.by_severity("(critical)", Severity::Critical));
    append(out, wrap("Why: ", hang->why, kProseWidth, 5));
    append(out, wrap(p.paint("Next:", ansi::kBold) + " ", hang->next, kProseWidth, 6));
  }
  std::string verdict_line = std::string(hang ? "Before the hang" : "Verdict") +
                             partial.verdict_scope + ": " +
                             p.by_severity(verdict.display, severity);
  if (const std::string sev = severity_word(run.severity); !sev.empty())
    verdict_line += "  " + p.by_severity("(" + sev + ")", severity);
  out.push_back(verdict_line);
  if (!json_read::trimmed(verdict.why).empty())
    append(out, wrap("Why: ", verdict.why, kProseWidth, 5));
  const std::optional<SlowWindowNext> slow =
      verdict.degraded ? std::nullopt : slow_window_next(run, opts.run_dir);
  if (!json_read::trimmed(verdict.next).empty() || slow) {
    std::string next = verdict.next;
    if (slow) next += (json_read::trimmed(next).empty() ? "" : " ") + slow->sentence;
    append(out, wrap(p.paint("Next:", ansi::kBold) + " ", next, kProseWidth, 6));
    // The command on a line of its own, never wrapped, so that it copies whole.
    if (slow) out.push_back(std::string(6, ' ') + slow->command);
    if (slow && !slow->profile.empty()) out.push_back(std::string(6, ' ') + slow->profile);
  }
  append(out, after_next_lines(run));
  append(out, profile_lines(run, opts.run_dir));
  out.push_back(p.paint("Scope: N = node · R = global rank · G = GPU index", ansi::kDim));
  out.emplace_back();

  if (verdict.degraded) {
    const auto observed = observed_anyway_lines(run);
    if (!observed.empty()) {
      append(out, observed);
      out.emplace_back();
    }
  }

  std::optional<std::vector<std::string>> timing, memory;
  if (run.step_time != nullptr && !verdict.degraded) timing = step_timing_block(run, verdict, p);
  if (run.step_memory != nullptr)
    memory = step_memory_block(run, p, timing ? kRightWrap : kProseWidth);
  if (timing || memory) {
    append_side_by_side(out, timing, memory, kStepLeftMin, kStepSep);
    out.emplace_back();
  }

  std::optional<std::vector<std::string>> sys, proc;
  if (run.system != nullptr && run.process != nullptr) {
    Block s = system_block(run, p, kMetricsLeftMin);
    Block q = process_block(run, p, kRightWrap);
    // Both tables start on the same row.
    const std::size_t head = std::max(s.head.size(), q.head.size());
    s.head.resize(head);
    q.head.resize(head);
    sys = flatten(s);
    proc = flatten(q);
  } else if (run.system != nullptr) {
    sys = flatten(system_block(run, p, kProseWidth));
  } else if (run.process != nullptr) {
    proc = flatten(process_block(run, p, kProseWidth));
  }
  if (sys || proc) {
    append_side_by_side(out, sys, proc, kMetricsLeftMin, kMetricsSep);
    out.emplace_back();
  }

  if (!verdict.degraded) {
    const auto also = also_lines(run, p);
    if (!also.empty()) {
      append(out, also);
      out.emplace_back();
    }
  }

  const auto tail = run_lines(run);
  if (!tail.empty()) {
    for (const auto& line : tail)
      out.push_back(p.paint(line, ansi::kDim));
    out.emplace_back();
  }
  for (const auto& line : timeline_lines(run, opts.run_dir, kProseWidth))
    out.push_back(p.paint(line, ansi::kDim));
  const std::string hint = opts.evidence_hint.empty() ? "final_summary.json" : opts.evidence_hint;
  const std::string html = opts.html_hint.empty() ? "" : " · " + opts.html_hint;
  out.push_back(p.paint("Full evidence: " + hint + html, ansi::kDim));

  std::string result;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i > 0) result += '\n';
    result += rstrip(out[i]);
  }
  return result;
}

std::string summary_text(const nlohmann::ordered_json& summary) {
  if (summary.is_object()) {
    const auto it = summary.find("text");
    if (it != summary.end() && it->is_string() && !it->get<std::string>().empty())
      return model::escape_for_terminal(it->get<std::string>());
  }
  return render_text(summary);
}

}  // namespace traceml::report
