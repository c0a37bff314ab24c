#include "report/compare_gate.hpp"

#include <cmath>

#include "analysis/number_format.hpp"

namespace traceml::report {

namespace {

using analysis::fixed;

/// The value at a JSON pointer, or nullptr when any step is missing.
const Json* at(const Json& j, const std::string& pointer) {
  const Json::json_pointer p(pointer);
  return j.contains(p) ? &j[p] : nullptr;
}

std::optional<double> pct_change(const Json& compare, const char* section, const char* metric) {
  const Json* v =
      at(compare, std::string("/sections/") + section + "/metrics/" + metric + "/pct_change");
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::string text_at(const Json& compare, const std::string& pointer, const std::string& fallback) {
  const Json* v = at(compare, pointer);
  return v != nullptr && v->is_string() ? v->get<std::string>() : fallback;
}

bool changed(const Json& compare, const std::string& pointer) {
  const Json* v = at(compare, pointer);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}

std::string status_pair(const Json& compare, const std::string& pointer) {
  return text_at(compare, pointer + "/lhs", "n/a") + " -> " +
         text_at(compare, pointer + "/rhs", "n/a");
}

GateCheck threshold_gate(const Json& compare, const char* name, const char* section,
                         const char* metric, const std::string& what, double limit) {
  GateCheck c{name, true, ""};
  const auto pct = pct_change(compare, section, metric);
  const std::string limit_text = fixed(limit, 1) + "%";
  if (!pct) {
    c.passed = false;
    c.message = what + " is not comparable between A and B, so the " + limit_text +
                " limit cannot be checked";
    return c;
  }
  c.passed = !(*pct > limit);
  const std::string sign = *pct >= 0 ? "+" : "";
  c.message = what + " changed by " + sign + fixed(*pct, 1) + "% (limit +" + limit_text + ")";
  return c;
}

}  // namespace

std::vector<GateCheck> evaluate_gates(const Json& compare, const GateOptions& options) {
  std::vector<GateCheck> out;
  if (options.fail_on_regression) {
    const std::string status = text_at(compare, "/verdict/status", "n/a");
    const std::string why = text_at(compare, "/verdict/why", "");
    GateCheck c{"fail-on-regression", status != "REGRESSION" && status != "MIXED", ""};
    c.message = "verdict " + status + (why.empty() ? "" : ": " + why);
    out.push_back(c);
  }
  if (options.max_step_time_regression_pct) {
    out.push_back(threshold_gate(compare, "max-step-time-regression", "step_time", "step_time_ms",
                                 "step time", *options.max_step_time_regression_pct));
  }
  if (options.max_memory_regression_pct) {
    out.push_back(threshold_gate(compare, "max-memory-regression", "step_memory",
                                 "peak_reserved_bytes", "peak reserved memory",
                                 *options.max_memory_regression_pct));
  }
  if (options.fail_on_diagnosis_change) {
    std::vector<std::string> what;
    if (changed(compare, "/overview/primary_diagnosis/changed"))
      what.push_back("primary diagnosis " + status_pair(compare, "/overview/primary_diagnosis"));
    if (changed(compare, "/sections/step_time/diagnosis/changed"))
      what.push_back("step time diagnosis " +
                     status_pair(compare, "/sections/step_time/diagnosis"));
    if (changed(compare, "/sections/step_memory/diagnosis/changed"))
      what.push_back("step memory diagnosis " +
                     status_pair(compare, "/sections/step_memory/diagnosis"));
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
  for (const GateCheck& c : checks) {
    if (c.passed) continue;
    reasons += (reasons.empty() ? "" : "; ") + c.message;
  }
  return reasons.empty() ? "gate: PASS" : "gate: FAIL (" + reasons + ")";
}

Json gate_json(const std::vector<GateCheck>& checks) {
  Json checks_json = Json::array();
  bool passed = true;
  for (const GateCheck& c : checks) {
    passed = passed && c.passed;
    checks_json.push_back(Json{{"name", c.name}, {"passed", c.passed}, {"message", c.message}});
  }
  return Json{{"status", passed ? "PASS" : "FAIL"}, {"checks", checks_json}};
}

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 forbids most control characters even when escaped.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t' && ch != '\r')
          out += ' ';
        else
          out += ch;
    }
  }
  return out;
}

std::string junit_xml(const std::vector<GateCheck>& checks, const std::string& suite) {
  std::size_t failures = 0;
  for (const GateCheck& c : checks)
    failures += c.passed ? 0 : 1;
  const std::string counts = " tests=\"" + std::to_string(checks.size()) + "\" failures=\"" +
                             std::to_string(failures) + "\" errors=\"0\"";
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"traceml compare\"" + counts + ">\n";
  x += "  <testsuite name=\"" + xml_escape(suite) + "\"" + counts + " skipped=\"0\">\n";
  for (const GateCheck& c : checks) {
    x += "    <testcase classname=\"traceml.compare\" name=\"" + xml_escape(c.name) + "\"";
    if (c.passed) {
      x += ">\n      <system-out>" + xml_escape(c.message) + "</system-out>\n    </testcase>\n";
    } else {
      x += ">\n      <failure type=\"gate\" message=\"" + xml_escape(c.message) + "\">" +
           xml_escape(c.message) + "</failure>\n    </testcase>\n";
    }
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

}  // namespace traceml::report
