// traceml compare (spec §6): two final_summary.json objects in, one compare
// result out — common-clock step time, phase and memory deltas, diagnosis
// changes and the verdict. Pure functions of the two JSON objects, so that
// TraceML's summaries and ours compare alike and the result is reproducible.
// The result is computed as a CompareReport (compare_result.hpp), then
// written as JSON and as text.
#pragma once

#include <string>
#include <utility>

#include "report/compare/compare_result.hpp"

namespace traceml::report {

struct CompareInputs {
  CompareSide lhs;  ///< run A, the baseline
  CompareSide rhs;  ///< run B, the candidate
};

struct CompareResult {
  /// What was decided; the gate reads this.
  CompareReport report;
  /// The compare JSON of spec §6.2 (schema_version 2), `text` included.
  Json json;
  /// verdict.status: IMPROVEMENT, REGRESSION, EQUIVALENT, MIXED or INCONCLUSIVE.
  std::string status;
};

/// How the verdict is decided (DECISIONS 11, 12).
struct CompareOptions {
  /// TraceML's raw rule: a step-time change of 3 % or more counts whatever
  /// the run-to-run noise. Off: it counts only beyond noise (compare_noise.hpp).
  bool strict = false;
};

/// Compares run B (`rhs`) against run A (`lhs`). Never throws on a missing,
/// null or mistyped part of a summary: that part is null and the verdict says
/// how comparable the runs were. `generated_at` is the newer of the two inputs'
/// `generated_at` (not the wall clock), so equal inputs give equal output.
CompareResult compare_summaries(const Json& lhs, const Json& rhs, const CompareInputs& meta,
                                const CompareOptions& options = {});

/// The decisions of compare_summaries(), not yet written.
CompareReport compute_compare(const Json& lhs, const Json& rhs, const CompareInputs& meta,
                              const CompareOptions& options = {});

/// The verdict of a report whose sections are computed (spec §6.3,
/// DECISIONS 11, 12): the findings by priority, the first one deciding.
CompareVerdict decide_verdict(const CompareReport& report, const CompareOptions& options);

/// The compare JSON of a report, with `text` as its text.
Json compare_json(const CompareReport& report, const std::string& text);

/// The compare text (spec §6.4): an 88-column box, no trailing newline.
std::string render_compare_text(const CompareReport& report);

/// Spec §6.1 label sanitizing: trim, spaces -> '_', runs outside
/// [A-Za-z0-9._-] -> '_', collapse '_', strip leading/trailing "._-",
/// empty -> "run".
std::string sanitize_label(const std::string& s);

/// The two labels for absolute paths `lhs` and `rhs` (spec §6.1): the file stem,
/// or the parent directory's name for generic stems (final_summary, summary,
/// run, output); equal labels get their parent prefixed, then "lhs_"/"rhs_".
std::pair<std::string, std::string> compare_labels(const std::string& lhs, const std::string& rhs);

/// CompareSide for an absolute path with the given label.
CompareSide compare_side(const std::string& abs_path, const std::string& label);

}  // namespace traceml::report
