// The CI gate of traceml compare (DECISIONS 5): thresholds checked against a
// compare result, and the JUnit XML that shows them in a CI system. TraceML's
// compare has no gate; this is our extension, documented in docs/compare.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/compare/compare.hpp"

namespace traceml::report {

/// The gates a user asked for; an unset option is not checked.
struct GateOptions {
  /// Fail when verdict.status is REGRESSION or MIXED.
  bool fail_on_regression = false;
  /// Fail when common-clock step time grew by more than this many percent.
  std::optional<double> max_step_time_regression_pct;
  /// Fail when peak reserved step memory grew by more than this many percent.
  std::optional<double> max_memory_regression_pct;
  /// Fail when the primary, Step Time or Step Memory diagnosis changed.
  bool fail_on_diagnosis_change = false;
  /// The step-time limit applies to the raw change, whatever the noise
  /// (DECISIONS 12); the verdict then follows TraceML's raw rule too.
  bool strict = false;
  /// A memory gate on runs that measured no step memory fails instead of
  /// being skipped.
  bool require_memory = false;

  [[nodiscard]] bool any() const {
    return fail_on_regression || max_step_time_regression_pct || max_memory_regression_pct ||
           fail_on_diagnosis_change;
  }
};

/// One gate's outcome; `name` is the command-line option that asked for it.
struct GateCheck {
  std::string name;
  bool passed = true;
  /// Why it failed, or what was checked when it passed (one sentence, with
  /// the statistics it rests on).
  std::string message;
  /// Not checked (passed stays true): a memory gate on runs without memory.
  bool skipped = false;
  /// The numbers behind the decision (threshold, change, noise test), or null.
  Json statistics = nullptr;
  /// For gate_line(): why a check passed that would fail on the raw number
  /// (a change over the limit but within run-to-run noise); empty otherwise.
  std::string pass_note = std::string();
};

/// The checks in a fixed order (the order of GateOptions' fields). A
/// threshold gate whose metric is not comparable fails: a gate that cannot
/// see the number must not pass silently. Two exceptions, both said in the
/// message: the step-time limit passes a change within run-to-run noise
/// (unless `strict`), and the memory limit is skipped when neither run
/// measured step memory (unless `require_memory`).
std::vector<GateCheck> evaluate_gates(const CompareReport& compare, const GateOptions& options);

/// "gate: FAIL (<failed messages joined by "; ">)", or "gate: PASS", with
/// "(<name> skipped: ...; <name> passed: ... within run-to-run noise (...))"
/// when a check was skipped or passed only because of the noise test.
std::string gate_line(const std::vector<GateCheck>& checks);

/// One line per check, printed above gate_line():
/// "gate check <name>: PASS|FAIL|SKIPPED: <message>".
std::vector<std::string> gate_check_lines(const std::vector<GateCheck>& checks);

/// The checks as JSON: {"status": "PASS"|"FAIL", "checks": [{name, status,
/// passed, skipped, message, statistics}]}.
Json gate_json(const std::vector<GateCheck>& checks);

/// A JUnit XML report: one <testcase> per check, a <failure> for failed ones,
/// a <skipped> for skipped ones; every testcase's system-out has its message.
/// `suite` names the test suite (e.g. "traceml compare run_a vs run_b").
std::string junit_xml(const std::vector<GateCheck>& checks, const std::string& suite);

/// Escapes & < > " ' for XML text and attribute values.
std::string xml_escape(const std::string& s);

}  // namespace traceml::report
