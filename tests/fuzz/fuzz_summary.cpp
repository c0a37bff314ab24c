// fuzz_summary: the final_summary.json boundary of `traceml view` and
// `traceml compare`. The input is a whole file: loaded by the checks of both
// commands (report/summary_file.hpp), then put through what each command does
// with a summary it accepted: view renders its text; compare compares it with
// itself and, both ways and with and without --strict, with a reference CPU
// run that carries a step-time distribution sketch (so that the rank test
// meets hostile quantiles on one side), renders the compare text, evaluates
// every gate and writes the JSON and JUnit outputs. The report code is documented never to throw on
// a missing, null or mistyped part, so any exception is a bug, as is a self-comparison that finds a
// change.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "report/compare/compare.hpp"
#include "report/compare/compare_gate.hpp"
#include "report/summary_file.hpp"
#include "report/summary_json.hpp"
#include "report/text/text_report.hpp"

namespace {

using namespace traceml::report;

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "fuzz_summary: %s\n", why.c_str());
  std::abort();
}

void check_problem(const SummaryParse& p) {
  if (p.json) return;
  if (p.problem.empty() || p.problem.find('\n') != std::string::npos)
    broken("a rejected summary without a one-line problem: '" + p.problem + "'");
}

void view(const Json& summary) {
  (void)summary_text(summary);
  if (render_text(summary).empty()) broken("render_text gave nothing");
  TextOptions color;
  color.color = true;
  color.evidence_hint = "runs/fuzz/final_summary.json";
  (void)render_text(summary, color);
}

void compare(const Json& summary) {
  const CompareInputs meta{compare_side("/runs/a/final_summary.json", "a"),
                           compare_side("/runs/b/final_summary.json", "b")};
  const CompareResult r = compare_summaries(summary, summary, meta);
  // A run compared with itself has changed in nothing.
  if (r.status != "EQUIVALENT" && r.status != "INCONCLUSIVE")
    broken("a summary compared with itself gives " + r.status);
  const auto text = r.json.find("text");
  if (text == r.json.end() || !text->is_string() || text->get<std::string>().empty())
    broken("the compare JSON has no text");
  (void)render_compare_text(r.report);
  GateOptions gates;
  gates.fail_on_regression = true;
  gates.fail_on_diagnosis_change = true;
  gates.max_step_time_regression_pct = 0.0;
  gates.max_memory_regression_pct = 0.0;
  const std::vector<GateCheck> checks = evaluate_gates(r.report, gates);
  // A threshold gate may fail only for a metric that cannot be compared.
  for (const GateCheck& c : checks) {
    if (!c.passed && c.message.find("not comparable") == std::string::npos)
      broken("a self-comparison fails the gate " + c.name + ": " + c.message);
  }
  (void)gate_line(checks);
  Json out = r.json;
  out["gate"] = gate_json(checks);
  (void)dump_json(out);
  (void)junit_xml(checks, "traceml compare a vs b");

  // Against a reference, both ways: no invariant on the verdict, but every
  // step must run without throwing and give a text.
  static const Json reference = Json::parse(R"({"schema_version": 1.7,
    "primary_diagnosis": {"status": "INPUT-BOUND"},
    "system": {"global": {"average": {"cpu_percent": 50.0}}},
    "process": {"global": {"average": {"cpu_percent": 100.0, "cpu_capacity_percent": 50.0}}},
    "step_memory": {"diagnosis": {"status": "NO GPU"}},
    "step_time": {"diagnosis": {"status": "INPUT-BOUND"},
      "global": {"window": {"diagnosis_clock": "cpu"},
        "average": {"step_time_ms": 9.0, "step_time_cpu_ms": 9.0, "input_wait_ms": 7.0},
        "spread": {"step_time_cpu_ms": {"basis": "per_step", "steps": 300, "p25": 8.4,
          "median": 8.8, "p75": 9.1, "lag1_autocorrelation": 0.25, "quantiles": [7.9, 8.0,
          8.1, 8.2, 8.3, 8.4, 8.5, 8.6, 8.7, 8.75, 8.8, 8.85, 8.9, 8.95, 9.0, 9.1, 9.2, 9.4,
          9.6, 10.0, 14.0]}}}}})");
  GateOptions all = gates;
  all.require_memory = true;
  for (const bool strict : {false, true}) {
    all.strict = strict;
    CompareOptions options;
    options.strict = strict;
    for (const bool first : {true, false}) {
      const CompareResult x = first ? compare_summaries(summary, reference, meta, options)
                                    : compare_summaries(reference, summary, meta, options);
      if (x.json["text"].get<std::string>().empty()) broken("a compare without text");
      const std::vector<GateCheck> c = evaluate_gates(x.report, all);
      (void)gate_check_lines(c);
      (void)junit_xml(c, "traceml compare a vs ref");
      (void)dump_json(gate_json(c));
    }
  }
}

template <class Step>
void guarded(const char* what, Step step) {
  try {
    step();
  } catch (const std::exception& e) {
    broken(std::string(what) + " threw: " + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  SummaryParse to_view;
  SummaryParse to_compare;
  guarded("parse_summary_to_view", [&] { to_view = parse_summary_to_view(text); });
  guarded("parse_summary_to_compare", [&] { to_compare = parse_summary_to_compare(text); });
  check_problem(to_view);
  check_problem(to_compare);
  // compare is the stricter of the two.
  if (to_compare.json && !to_view.json) broken("compare accepts a summary view rejects");
  if (to_view.json) guarded("view", [&] { view(*to_view.json); });
  if (to_compare.json) guarded("compare", [&] { compare(*to_compare.json); });
  return 0;
}
