#include "report/compare/compare_gate.hpp"

#include <cmath>
#include <utility>

#include "analysis/number_format.hpp"
#include "analysis/summary_keys.hpp"
#include "report/compare/compare_noise.hpp"
#include "report/html/html_text.hpp"
#include "report/json_read.hpp"
#include "report/text/text_format.hpp"

namespace traceml::report {

namespace {

using analysis::fixed;

namespace key = analysis::summary_keys;

std::optional<double> pct_change(const CompareSection& section, const char* metric) {
  return section.metric(metric).pct_change;
}

/// "A -> B" of a diagnosis.
std::string status_pair(const DiagnosisChange& d) {
  return d.lhs.value_or("n/a") + " -> " + d.rhs.value_or("n/a");
}

std::string signed_pct(double pct) {
  return signed_fixed(pct) + "%";
}

/// The change of a metric against a limit; a missing number fails.
GateCheck threshold_gate(const CompareSection& section, const char* name, const char* metric,
                         const std::string& what, double limit) {
  GateCheck c{name, true, ""};
  const auto pct = pct_change(section, metric);
  const std::string limit_text = fixed(limit, 1) + "%";
  c.statistics = Json{{"limit_pct", limit}, {"pct_change", pct ? Json(*pct) : Json(nullptr)}};
  if (!pct) {
    c.passed = false;
    c.message = what + " is not comparable between A and B, so the " + limit_text +
                " limit cannot be checked";
    return c;
  }
  c.passed = !(*pct > limit);
  c.message = what + " changed by " + signed_pct(*pct) + " (limit +" + limit_text + ")";
  return c;
}

/// DECISIONS 12: over the limit fails only beyond run-to-run noise.
GateCheck step_time_gate(const CompareReport& compare, double limit, bool strict) {
  const StepTimeCompare& sec = compare.step_time;
  GateCheck c =
      threshold_gate(sec, "max-step-time-regression", key::kStepTimeMs, "step time", limit);
  const NoiseDecision& noise = sec.noise;
  c.statistics["strict"] = strict;
  c.statistics["noise"] = noise.available ? noise_json(noise) : Json(nullptr);
  const auto pct = pct_change(sec, key::kStepTimeMs);
  if (!pct || !noise.available) return c;
  const std::string evidence = noise_evidence(noise);
  const bool over = *pct > limit;
  if (strict) {
    if (over) c.message += ", --strict: noise not considered (" + evidence + ")";
    return c;
  }
  if (!over) {
    c.message += "; " + evidence;
  } else if (change_counts(noise, true)) {
    c.message += ", beyond run-to-run noise (" + evidence + ")";
  } else {
    c.passed = true;
    c.message += " but within run-to-run noise (" + evidence + ")";
    c.pass_note = "passed: " + signed_pct(*pct) + " is within run-to-run noise (" + evidence + ")";
  }
  return c;
}

GateCheck memory_gate(const CompareReport& compare, double limit, bool require_memory) {
  const CompareSection& sec = compare.step_memory;
  GateCheck c = threshold_gate(sec, "max-memory-regression", key::kPeakReservedBytes,
                               "peak reserved memory", limit);
  const MetricDelta& peak = sec.metric(key::kPeakReservedBytes);
  if (peak.state() != MetricState::MissingBoth) return c;
  c.statistics["measured"] = false;
  if (require_memory) {
    c.passed = false;
    c.message = "neither run measured step memory, and --require-memory asks for it";
  } else {
    c.passed = true;
    c.skipped = true;
    c.message =
        "neither run measured step memory (CPU runs have none; --require-memory fails instead)";
  }
  return c;
}

}  // namespace

std::vector<GateCheck> evaluate_gates(const CompareReport& compare, const GateOptions& options) {
  std::vector<GateCheck> out;
  if (options.fail_on_regression) {
    const CompareVerdict& verdict = compare.verdict;
    const VerdictStatus status = verdict.status;
    const std::string why = json_read::trimmed(verdict.why);
    GateCheck c{"fail-on-regression",
                status != VerdictStatus::Regression && status != VerdictStatus::Mixed, ""};
    c.message = std::string("verdict ") + verdict_name(status) + (why.empty() ? "" : ": " + why);
    // An EQUIVALENT whose primary finding is the step time is a change over
    // 3 % that the noise test kept out (compare_verdict.cpp): said on the gate line.
    if (status == VerdictStatus::Equivalent && verdict.primary_metric == key::kStepTimeMs)
      c.pass_note =
          "passed: " + (!why.empty() && why.back() == '.' ? why.substr(0, why.size() - 1) : why);
    c.statistics = Json{{"status", verdict_name(status)},
                        {"noise_aware", verdict.noise_aware},
                        {"noise", noise_json(compare.step_time.noise)}};
    out.push_back(c);
  }
  if (options.max_step_time_regression_pct) {
    out.push_back(step_time_gate(compare, *options.max_step_time_regression_pct, options.strict));
  }
  if (options.max_memory_regression_pct) {
    out.push_back(memory_gate(compare, *options.max_memory_regression_pct, options.require_memory));
  }
  if (options.fail_on_diagnosis_change) {
    std::vector<std::string> what;
    const std::pair<const char*, const DiagnosisChange*> kPairs[] = {
        {"primary diagnosis ", &compare.primary_diagnosis},
        {"step time diagnosis ", &compare.step_time.diagnosis},
        {"step memory diagnosis ", &compare.step_memory.diagnosis}};
    for (const auto& [name, pair] : kPairs) {
      if (pair->changed()) what.push_back(name + status_pair(*pair));
    }
    GateCheck c{"fail-on-diagnosis-change", what.empty(), ""};
    if (what.empty()) {
      c.message = "diagnoses unchanged";
    } else {
      for (std::size_t i = 0; i < what.size(); ++i)
        c.message += (i ? ", " : "") + what[i];
      c.message += " changed";
    }
    out.push_back(c);
  }
  return out;
}

std::string gate_line(const std::vector<GateCheck>& checks) {
  std::string reasons;
  std::string notes;  // passes that rest on the noise test, or skips
  for (const GateCheck& c : checks) {
    if (!c.passed) {
      reasons += (reasons.empty() ? "" : "; ") + c.message;
    } else if (c.skipped || !c.pass_note.empty()) {
      notes += (notes.empty() ? "" : "; ") + c.name + " " +
               (c.skipped ? "skipped: " + c.message : c.pass_note);
    }
  }
  if (!reasons.empty()) return "gate: FAIL (" + reasons + ")";
  return notes.empty() ? "gate: PASS" : "gate: PASS (" + notes + ")";
}

const char* check_status(const GateCheck& c) {
  return c.skipped ? "SKIPPED" : c.passed ? "PASS" : "FAIL";
}

std::vector<std::string> gate_check_lines(const std::vector<GateCheck>& checks) {
  std::vector<std::string> out;
  for (const GateCheck& c : checks)
    out.push_back("gate check " + c.name + ": " + check_status(c) + ": " + c.message);
  return out;
}

Json gate_json(const std::vector<GateCheck>& checks) {
  Json checks_json = Json::array();
  bool passed = true;
  for (const GateCheck& c : checks) {
    passed = passed && c.passed;
    checks_json.push_back(Json{{"name", c.name},
                               {"status", check_status(c)},
                               {"passed", c.passed},
                               {"skipped", c.skipped},
                               {"message", c.message},
                               {"statistics", c.statistics}});
  }
  return Json{{"status", passed ? "PASS" : "FAIL"}, {"checks", checks_json}};
}

std::string xml_escape(const std::string& s) {
  // XML 1.0 forbids most control characters even when escaped.
  std::string clean = s;
  for (char& ch : clean)
    if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t' && ch != '\r') ch = ' ';
  return escape_markup(clean, "&apos;");
}

std::string junit_xml(const std::vector<GateCheck>& checks, const std::string& suite) {
  std::size_t failures = 0;
  std::size_t skipped = 0;
  for (const GateCheck& c : checks) {
    failures += c.passed ? 0 : 1;
    skipped += c.skipped ? 1 : 0;
  }
  const std::string counts = " tests=\"" + std::to_string(checks.size()) + "\" failures=\"" +
                             std::to_string(failures) + "\" errors=\"0\"";
  const std::string skip_count = " skipped=\"" + std::to_string(skipped) + "\"";
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"traceml compare\"" + counts + skip_count + ">\n";
  x += "  <testsuite name=\"" + xml_escape(suite) + "\"" + counts + skip_count + ">\n";
  for (const GateCheck& c : checks) {
    const std::string message = xml_escape(c.message);
    x += "    <testcase classname=\"traceml.compare\" name=\"" + xml_escape(c.name) + "\">\n";
    if (c.skipped) {
      x += "      <skipped message=\"" + message + "\"/>\n";
    } else if (!c.passed) {
      x += "      <failure type=\"gate\" message=\"" + message + "\">" + message + "</failure>\n";
    }
    x += "      <system-out>" + message + "</system-out>\n    </testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

}  // namespace traceml::report
