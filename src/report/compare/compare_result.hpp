// The typed compare result (spec §6.2): what compare decides, computed once
// from the two summaries (compare_compute.cpp) and then written as JSON
// (compare_json.cpp) and as text (compare_text.cpp), the way Google
// Benchmark's get_difference_report and print_difference_report are
// separate. The verdict, the gate and JUnit read these fields, never the
// JSON they are written as.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace traceml::report {

using Json = nlohmann::ordered_json;

/// Where one input came from (the `lhs`/`rhs` blocks of the compare JSON).
struct CompareSide {
  std::string path;         ///< absolute path of the summary file
  std::string label;        ///< display label, see compare_labels()
  std::string file_name;    ///< e.g. "final_summary.json"
  std::string parent_name;  ///< name of the directory holding the file
};

/// Whether a metric has a number on both sides. compare_verdict.cpp maps
/// it to Comparability by index: a new value goes there too.
enum class MetricState { Comparable, MissingOneSide, MissingBoth };

/// How comparable a section, or the runs, are: a metric's state, or the
/// verdict's partial / insufficient. Its names are a table indexed by it.
enum class Comparability { Comparable, MissingOneSide, MissingBoth, Partial, Insufficient };

Comparability comparability_of(MetricState s);
const char* comparability_name(Comparability c);

/// One row of a compare section: B - A of a number, or A and B of a text.
/// Every number is finite: what cannot be computed is absent.
struct MetricDelta {
  const char* key = "";  ///< its key in the section's metrics
  std::string label;
  const char* unit = "";  ///< ms, percent, gb, bytes, or text
  std::optional<double> lhs;
  std::optional<double> rhs;
  std::optional<std::string> lhs_text;  ///< unit "text" only
  std::optional<std::string> rhs_text;  ///< unit "text" only
  std::optional<double> delta;
  std::optional<double> pct_change;
  const char* delta_unit = "";
  const char* direction = "";  ///< higher_is_worse or context

  [[nodiscard]] bool is_text() const;
  /// Of the numbers; a text metric is missing on both sides.
  [[nodiscard]] MetricState state() const;
};

/// A diagnosis status of run A and of run B.
struct DiagnosisChange {
  std::optional<std::string> lhs;
  std::optional<std::string> rhs;
  [[nodiscard]] bool changed() const { return lhs != rhs; }
};

/// The rank test of the noise decision (compare_noise.hpp).
struct RankTest {
  double alpha = 0.0;
  double p_value = 1.0;
  double z = 0.0;
  double prob_b_slower = 0.5;
  std::int64_t n_lhs = 0;
  std::int64_t n_rhs = 0;
  double n_eff_lhs = 0.0;
  double n_eff_rhs = 0.0;
  bool significant = false;
};

/// Which way a step-time change is beyond noise, if it is.
enum class NoiseDirection { None, Slower, Faster };

/// Is the step-time change beyond run-to-run noise (DECISIONS 12)? When not
/// `available`, the other fields are unset and the raw percentage decides.
struct NoiseDecision {
  bool available = false;
  const char* basis = "iqr";  ///< iqr, std or iqr_std
  double delta_ms = 0.0;
  double threshold_ms = 0.0;  ///< the band; may be non-finite (written as null)
  bool beyond_noise = false;
  std::optional<double> median_delta_ms;
  bool beyond_band = false;
  std::optional<RankTest> rank_test;
  std::string rank_test_unavailable;  ///< why there is no rank test
  NoiseDirection direction = NoiseDirection::None;
};

/// A section of the compare (step_time, step_memory, process, system).
struct CompareSection {
  bool available = false;  ///< either summary has the section
  DiagnosisChange diagnosis;
  std::vector<MetricDelta> metrics;  ///< in the order they are written
  std::vector<std::string> notes;

  /// The metric `key`; a section always holds the metrics compare_compute names.
  [[nodiscard]] const MetricDelta& metric(const char* key) const;
};

/// A run's stalls: the few steps that hold most of its step-time finding's
/// share (the finding's `stalls` evidence, DECISIONS 23).
struct StallsSeen {
  std::string kind;    ///< the finding they hold, e.g. INPUT_BOUND
  std::string metric;  ///< input_wait_ms, h2d_ms or residual_ms
  std::optional<std::int64_t> rank;
  std::vector<std::pair<std::int64_t, double>>
      steps;                   ///< step id and its value (ms), largest first
  double share = 0.0;          ///< the finding's share with them
  double share_without = 0.0;  ///< and without them
};

/// The step-time section adds the comparison clock and the noise decision.
struct StepTimeCompare : CompareSection {
  std::optional<std::string> comparison_clock;  ///< "gpu" or "cpu"
  NoiseDecision noise;
  /// Each run's stalls, when its summary names some (ours; TraceML's never).
  std::optional<StallsSeen> stalls_lhs;
  std::optional<StallsSeen> stalls_rhs;
};

/// In the order of the name tables in compare_verdict.cpp and compare_json.cpp.
enum class VerdictStatus { Improvement, Regression, Equivalent, Mixed, Inconclusive };

/// IMPROVEMENT, REGRESSION, EQUIVALENT, MIXED or INCONCLUSIVE.
const char* verdict_name(VerdictStatus s);

/// One finding of the verdict; the first by priority is the verdict.
struct Finding {
  VerdictStatus status = VerdictStatus::Inconclusive;
  int priority = 0;
  std::string domain;
  std::optional<std::string> metric;
  std::string severity;
  std::string why;
};

/// A finding as the verdict's top_changes show it.
struct TopChange {
  std::string domain;
  std::optional<std::string> metric;
  std::string summary;
  const char* significance = "context";  ///< material or context
};

/// (Not `Verdict`: report/text/text_verdict.hpp has one, and two types of one
/// name in one namespace break the one-definition rule; ASan caught it.)
struct CompareVerdict {
  VerdictStatus status = VerdictStatus::Inconclusive;
  std::string severity;
  std::string summary;
  std::string why;
  std::string action;
  std::string primary_domain;
  std::optional<std::string> primary_metric;
  std::vector<Finding> findings;  ///< by priority
  Comparability overall = Comparability::Insufficient;
  std::optional<std::string> overall_reason;  ///< absent when comparable
  Comparability step_time = Comparability::MissingBoth;
  Comparability step_memory = Comparability::MissingBoth;
  /// False when neither run measured step memory and step time compared
  /// (DECISIONS 11); absent otherwise.
  std::optional<bool> step_memory_measured;
  bool noise_aware = false;
  std::vector<TopChange> top_changes;
};

/// One input as the compare result names it.
struct CompareRun {
  CompareSide side;
  Json schema_version;  ///< as the summary wrote it (any JSON), null when absent
  std::optional<double> duration_s;
};

/// Everything compare decided about run B against run A.
struct CompareReport {
  std::string generated_at;
  CompareRun lhs;
  CompareRun rhs;
  std::vector<std::string> warnings;
  StepTimeCompare step_time;
  CompareSection step_memory;
  CompareSection process;
  CompareSection system;
  DiagnosisChange primary_diagnosis;
  CompareVerdict verdict;
};

}  // namespace traceml::report
