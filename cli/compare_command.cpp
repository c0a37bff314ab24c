// traceml compare A.json B.json [--output BASE] [--format text|json] [gates…]
// [--junit FILE] — compares run B against baseline A (spec §6) and, with gate
// options, fails a CI job on a regression (DECISIONS 5; docs/compare.md).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "report/atomic_file.hpp"
#include "report/compare.hpp"
#include "report/compare_gate.hpp"
#include "report/summary_file.hpp"
#include "report/summary_json.hpp"

namespace traceml::cli {

namespace {

namespace fs = std::filesystem;
using report::Json;

struct CompareArgs {
  std::string lhs;
  std::string rhs;
  std::string output;
  std::string format = "text";
  std::string junit;
  report::GateOptions gates;
  report::CompareOptions compare;
  double max_step_pct = 0.0;
  double max_memory_pct = 0.0;
};

struct Loaded {
  std::optional<Json> json;
  std::string error;
};

constexpr const char* kHint = "; pass the final_summary.json of a traceml or TraceML run";

/// Spec §6.1 strict loading, with our one-line errors (exit 2).
Loaded load_summary(const std::string& abs) {
  std::error_code ec;
  if (!fs::exists(abs, ec)) return {std::nullopt, abs + ": summary file not found" + kHint};
  if (!fs::is_regular_file(abs, ec)) return {std::nullopt, abs + ": not a file" + kHint};
  std::ifstream in(abs, std::ios::binary);
  if (!in) return {std::nullopt, abs + ": cannot open file" + kHint};
  std::stringstream buf;
  buf << in.rdbuf();
  report::SummaryParse summary = report::parse_summary_to_compare(buf.str());
  if (!summary.json) return {std::nullopt, abs + ": " + summary.problem + kHint};
  return {std::move(summary.json), ""};
}

/// `--output` with a trailing .json/.txt removed, else <cwd>/compare/{A}_vs_{B}.
std::string output_base(const std::string& output, const std::string& a, const std::string& b) {
  const auto first = output.find_first_not_of(" \t");
  if (first == std::string::npos)
    return (fs::current_path() / "compare" / (a + "_vs_" + b)).string();
  std::string base = output.substr(first, output.find_last_not_of(" \t") - first + 1);
  for (const char* suffix : {".json", ".txt"}) {
    const std::string s = suffix;
    if (base.size() > s.size() && base.compare(base.size() - s.size(), s.size(), s) == 0) {
      base.resize(base.size() - s.size());
      break;
    }
  }
  return base;
}

int run_compare(const CompareArgs& args) {
  report::GateOptions gates = args.gates;
  const SummaryPath lhs_path = resolve_summary_path(args.lhs);
  if (!lhs_path.error.empty()) return fail(lhs_path.error);
  const SummaryPath rhs_path = resolve_summary_path(args.rhs);
  if (!rhs_path.error.empty()) return fail(rhs_path.error);
  const std::string lhs_abs = fs::absolute(lhs_path.path).lexically_normal().string();
  const std::string rhs_abs = fs::absolute(rhs_path.path).lexically_normal().string();
  const Loaded lhs = load_summary(lhs_abs);
  if (!lhs.json) return fail(lhs.error);
  const Loaded rhs = load_summary(rhs_abs);
  if (!rhs.json) return fail(rhs.error);

  const auto [la, lb] = report::compare_labels(lhs_abs, rhs_abs);
  const report::CompareInputs meta{report::compare_side(lhs_abs, la),
                                   report::compare_side(rhs_abs, lb)};
  const report::CompareResult result =
      report::compare_summaries(*lhs.json, *rhs.json, meta, args.compare);
  const std::string text = result.json["text"].get<std::string>();

  const std::string base = output_base(args.output, la, lb);
  const std::string json_path = base + ".json";
  const std::string txt_path = base + ".txt";
  const std::vector<report::GateCheck> checks = report::evaluate_gates(result.json, gates);
  try {
    const fs::path parent = fs::path(base).parent_path();
    std::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);
    report::write_file_atomic(json_path, report::dump_json(result.json) + "\n");
    report::write_file_atomic(txt_path, text + "\n");
    if (!args.junit.empty()) {
      report::write_file_atomic(args.junit,
                                report::junit_xml(checks, "traceml compare " + la + " vs " + lb));
    }
  } catch (const report::WriteError& e) {
    return fail(std::string(e.what()) + " (choose a writable --output or --junit path)");
  }

  if (args.format == "json") {
    Json out = result.json;
    if (gates.any()) out["gate"] = report::gate_json(checks);
    std::cout << report::dump_json(out) << "\n";
  } else {
    std::cout << text << "\n";
    std::cout << "Compare JSON: " << json_path << "\n";
    std::cout << "Compare TXT:  " << txt_path << "\n";
  }
  if (!gates.any()) return kExitOk;
  // In JSON mode stdout stays one parseable document; the gate line goes to stderr.
  std::ostream& gate_out = args.format == "json" ? std::cerr : std::cout;
  for (const std::string& l : report::gate_check_lines(checks))
    gate_out << l << "\n";
  gate_out << report::gate_line(checks) << std::endl;
  for (const report::GateCheck& c : checks)
    if (!c.passed) return kExitGateFailed;
  return kExitOk;
}

}  // namespace

void add_compare_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Compare run B against baseline run A; optionally gate CI on regressions.");
  cmd->add_option("A", args->lhs, "Baseline final_summary.json (or its run directory)")->required();
  cmd->add_option("B", args->rhs, "Candidate final_summary.json (or its run directory)")
      ->required();
  cmd->add_option("--output", args->output,
                  "Base path for BASE.json and BASE.txt (default: ./compare/A_vs_B)");
  cmd->add_option("--format", args->format, "What to print: text, or the compare JSON")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--junit", args->junit, "Also write the gate results as JUnit XML to FILE");
  cmd->add_flag("--fail-on-regression", args->gates.fail_on_regression,
                "Exit 1 when the verdict is REGRESSION or MIXED");
  CLI::Option* step =
      cmd->add_option(
             "--max-step-time-regression", args->max_step_pct,
             "Exit 1 when step time grew by more than PCT percent, beyond run-to-run noise")
          ->check(CLI::NonNegativeNumber);
  CLI::Option* memory = cmd->add_option("--max-memory-regression", args->max_memory_pct,
                                        "Exit 1 when peak reserved memory grew by more than PCT %")
                            ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--fail-on-diagnosis-change", args->gates.fail_on_diagnosis_change,
                "Exit 1 when the primary, Step Time or Step Memory diagnosis changed");
  cmd->add_flag("--strict", args->compare.strict,
                "Judge step time on the raw percentage, ignoring run-to-run noise (TraceML's "
                "rule), in the verdict and in --max-step-time-regression");
  cmd->add_flag("--require-memory", args->gates.require_memory,
                "Fail --max-memory-regression when neither run measured step memory (default: "
                "skipped)");
  cmd->callback([args, step, memory, &action] {
    args->gates.strict = args->compare.strict;
    if (step->count() > 0) args->gates.max_step_time_regression_pct = args->max_step_pct;
    if (memory->count() > 0) args->gates.max_memory_regression_pct = args->max_memory_pct;
    action.run = [args] { return run_compare(*args); };
  });
}

}  // namespace traceml::cli
