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
#include <tuple>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "report/atomic_file.hpp"
#include "report/compare/compare.hpp"
#include "report/compare/compare_gate.hpp"
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

/// `--output` with a trailing .json/.txt removed, else ./compare/{A}_vs_{B}.
std::string output_base(const std::string& output, const std::string& a, const std::string& b) {
  const auto first = output.find_first_not_of(" \t");
  if (first == std::string::npos) {
    std::error_code ec;
    const fs::path here = fs::current_path(ec);
    return ((ec ? fs::path(".") : here) / "compare" / (a + "_vs_" + b)).string();
  }
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

/// The inputs and outputs of one compare: both found (as absolute paths)
/// before anything is read or written, or an error.
struct ComparePaths {
  std::string lhs_abs;
  std::string rhs_abs;
  std::string la;
  std::string lb;
  std::string json;
  std::string txt;
  std::string error;
};

ComparePaths compare_paths(const CompareArgs& args) {
  ComparePaths p;
  const SummaryPath lhs_path = resolve_summary_path(args.lhs);
  const SummaryPath rhs_path = resolve_summary_path(args.rhs);
  if (!lhs_path.error.empty() || !rhs_path.error.empty()) {
    p.error = !lhs_path.error.empty() ? lhs_path.error : rhs_path.error;
    return p;
  }
  std::error_code ec;
  p.lhs_abs = fs::absolute(lhs_path.path, ec).lexically_normal().string();
  if (!ec) p.rhs_abs = fs::absolute(rhs_path.path, ec).lexically_normal().string();
  if (ec) {
    p.error = "cannot resolve the summaries' paths: " + ec.message();
    return p;
  }
  std::tie(p.la, p.lb) = report::compare_labels(p.lhs_abs, p.rhs_abs);
  const std::string base = output_base(args.output, p.la, p.lb);
  p.json = base + ".json";
  p.txt = base + ".txt";
  return p;
}

/// Every output path, checked before anything is read or written: a
/// command that exits 2 leaves no file behind.
std::optional<std::string> check_compare(const CompareArgs& args) {
  const ComparePaths p = compare_paths(args);
  if (!p.error.empty()) return p.error;
  for (const std::string& out : {p.json, p.txt})
    if (auto why = unwritable_file("--output", out, true)) return why;
  if (auto why = unwritable_file("--junit", args.junit, false)) return why;
  if (!args.junit.empty()) {
    std::error_code ec;
    const fs::path junit = fs::absolute(args.junit, ec).lexically_normal();
    for (const std::string& other : {p.json, p.txt})
      if (junit == fs::path(other).lexically_normal())
        return "--junit " + args.junit + ": is also " + other + "; choose another --junit path";
  }
  return std::nullopt;
}

/// An output that would replace a summary being compared; checked once
/// both were read, so that a file that is no summary says so first.
std::optional<std::string> replaces_an_input(const ComparePaths& p, const std::string& junit) {
  std::error_code ec;
  for (const std::string& in : {p.lhs_abs, p.rhs_abs}) {
    for (const std::string& out : {p.json, p.txt})
      if (fs::equivalent(out, in, ec))
        return "--output " + out + ": is one of the summaries compared; choose another --output";
    if (!junit.empty() && fs::equivalent(junit, in, ec))
      return "--junit " + junit + ": is one of the summaries compared; choose another --junit path";
  }
  return std::nullopt;
}

int run_compare(const CompareArgs& args) {
  report::GateOptions gates = args.gates;
  // Checked again: the files may have changed since the check.
  if (const auto why = check_compare(args)) return fail(*why);
  const ComparePaths paths = compare_paths(args);
  const std::string& lhs_abs = paths.lhs_abs;
  const std::string& rhs_abs = paths.rhs_abs;
  const Loaded lhs = load_summary(lhs_abs);
  if (!lhs.json) return fail(lhs.error);
  const Loaded rhs = load_summary(rhs_abs);
  if (!rhs.json) return fail(rhs.error);
  if (const auto why = replaces_an_input(paths, args.junit)) return fail(*why);

  const std::string& la = paths.la;
  const std::string& lb = paths.lb;
  const report::CompareInputs meta{report::compare_side(lhs_abs, la),
                                   report::compare_side(rhs_abs, lb)};
  const report::CompareResult result =
      report::compare_summaries(*lhs.json, *rhs.json, meta, args.compare);
  const std::string text = result.json["text"].get<std::string>();

  const std::string& json_path = paths.json;
  const std::string& txt_path = paths.txt;
  const std::vector<report::GateCheck> checks = report::evaluate_gates(result.report, gates);
  try {
    // A failure on a later file takes back what this call created before it.
    CreatedOutputs created;
    created.make_dirs(fs::path(json_path).parent_path());
    created.before_writing(json_path);
    report::write_file_atomic(json_path, report::dump_json(result.json) + "\n");
    created.before_writing(txt_path);
    report::write_file_atomic(txt_path, text + "\n");
    if (!args.junit.empty()) {
      created.before_writing(args.junit);
      report::write_file_atomic(args.junit,
                                report::junit_xml(checks, "traceml compare " + la + " vs " + lb));
    }
    created.keep();
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
          ->check(percentage_limit());
  CLI::Option* memory = cmd->add_option("--max-memory-regression", args->max_memory_pct,
                                        "Exit 1 when peak reserved memory grew by more than PCT %")
                            ->check(percentage_limit());
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
    action.check = [args] { return check_compare(*args); };
    action.run = [args] { return run_compare(*args); };
  });
}

}  // namespace traceml::cli
