// traceml report RUN_DIR            (rebuild a run's summary from its database)
// traceml report --telemetry FILE.jsonl --out DIR [--window N]
// traceml report PIECE PIECE... --out DIR   (merge the pieces of one job:
//   run directories of ranks traced on their own, or telemetry JSONL files)
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "analysis/summary.hpp"
#include "collector/finalize.hpp"
#include "collector/merge.hpp"
#include "commands.hpp"
#include "output_paths.hpp"
#include "page_limits.hpp"
#include "report/atomic_file.hpp"
#include "report/final_summary.hpp"
#include "store/jsonl_reader.hpp"
#include "store/run_db.hpp"

namespace traceml::cli {

namespace {

struct ReportArgs {
  std::vector<std::string> inputs;
  std::string telemetry;
  std::string out;
  std::int64_t window = 10000;
  /// TRACEML_PAGE_TIMEOUT_S and TRACEML_PAGE_MEMORY_MB.
  PageLimitsRead page;
};

/// The files a report writes into its directory.
constexpr const char* kReportFiles[] = {"final_summary.json", "final_summary.txt",
                                        "final_summary.html", "timeline.json"};

/// Notes the report's files in `dir` that are about to be written.
void before_report(CreatedOutputs& created, const std::string& dir) {
  for (const char* name : kReportFiles)
    created.before_writing(std::filesystem::path(dir) / name);
}

int report_run_dir(const std::string& run_dir, std::int64_t window,
                   const report::PageLimits& page_limits) {
  if (!std::filesystem::is_directory(run_dir))
    return fail(
        run_dir +
        ": not a directory (pass the run directory that traceml run wrote, e.g. logs/<run>)");
  try {
    CreatedOutputs created;
    before_report(created, run_dir);
    const report::FinalSummary f = collector::finalize_run(run_dir, window, page_limits);
    created.keep();
    if (f.html_error) warn(*f.html_error);
    if (f.timeline_error) warn(*f.timeline_error);
    std::cout << report::terminal_text(f) << "\n";
  } catch (const store::RunDbError& e) {
    return fail(e.what());
  } catch (const report::WriteError& e) {
    return fail(std::string(e.what()) + " (is the run directory writable?)");
  }
  return kExitOk;
}

/// The pieces of one job merged into a new run directory, then reported
/// from it as `traceml report OUT` would.
int report_merged(const ReportArgs& a) {
  if (a.out.empty())
    return fail("merging " + std::to_string(a.inputs.size()) +
                " runs needs --out DIR (where the merged run goes)");
  // The merged run goes if its report cannot be written (exit 2 leaves
  // nothing behind); merge_runs refuses a directory that holds a run.
  CreatedOutputs created;
  created.before_making(a.out);
  created.before_writing(std::filesystem::path(a.out) / store::kRunDbFileName);
  collector::MergeResult merged;
  try {
    merged = collector::merge_runs(a.inputs, a.out);
  } catch (const collector::MergeError& e) {
    return fail(e.what());
  }
  for (const auto& w : merged.warnings)
    warn(w);
  std::cerr << "traceml: merged " << a.inputs.size() << " input(s), " << merged.ranks << " rank(s)"
            << (merged.world_size ? " of " + std::to_string(*merged.world_size) : std::string())
            << ", into " << a.out << "\n";
  if (merged.world_size && merged.ranks < *merged.world_size)
    warn("ranks are missing: the merged run still holds " + std::to_string(merged.ranks) +
         " of the job's " + std::to_string(*merged.world_size));
  const int rc = report_run_dir(a.out, a.window, a.page.limits);
  if (rc == kExitOk) created.keep();
  return rc;
}

int run_report(const ReportArgs& a) {
  if (!a.inputs.empty()) {
    if (!a.telemetry.empty()) return fail("give either run directories or --telemetry, not both");
    if (a.inputs.size() == 1 && a.out.empty())
      return report_run_dir(a.inputs.front(), a.window, a.page.limits);
    return report_merged(a);
  }
  if (a.telemetry.empty() || a.out.empty())
    return fail(
        "give a run directory (traceml report logs/<run>) or --telemetry FILE.jsonl --out DIR");
  store::ReadResult in;
  try {
    in = store::read_telemetry_jsonl(a.telemetry);
  } catch (const store::TelemetryError& e) {
    return fail(e.what());
  }
  for (const auto& w : in.warnings)
    warn(w);
  analysis::Options opts;
  opts.window = a.window;
  const analysis::Summary s = analysis::summarize(in.telemetry, opts);
  // The page's plots come from the telemetry read, as a run directory's do.
  report::FinalSummary f = report::build_final_summary(
      s, report::iso8601_utc(collector::end_of_run(in.telemetry)), report::evidence_hint_for(a.out),
      std::nullopt, std::nullopt, {}, report::html_hint_for(a.out));
  try {
    CreatedOutputs created;
    created.make_dirs(a.out);
    before_report(created, a.out);
    report::write_run_report(f, a.out, &in.telemetry, a.page.limits);
    created.keep();
  } catch (const report::WriteError& e) {
    return fail(std::string(e.what()) + " (choose a writable --out directory)");
  }
  if (f.html_error) warn(*f.html_error);
  std::cout << report::terminal_text(f) << "\n";
  return kExitOk;
}

/// Every output directory, checked before anything is read or written.
std::optional<std::string> check_report(const ReportArgs& a) {
  if (a.page.problem) return a.page.problem;
  if (!a.out.empty()) return unwritable_dir("--out", a.out);
  if (a.inputs.size() == 1 && a.telemetry.empty()) {
    const std::string& dir = a.inputs.front();
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec) && ::access(dir.c_str(), W_OK | X_OK) != 0)
      return dir + ": cannot write the run's summary into it: " + std::strerror(errno) +
             " (is the run directory writable?)";
  }
  return std::nullopt;
}

}  // namespace

void add_report_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Rebuild final_summary.json/.txt/.html of a run directory, or diagnose a telemetry JSONL "
      "file.");
  cmd->add_option("runs", args->inputs,
                  "Run directory (holds telemetry.db); several, with --out: the pieces of one "
                  "job to merge (run directories or telemetry JSONL files)");
  cmd->add_option("--telemetry", args->telemetry,
                  "Telemetry JSONL file (docs/telemetry-format.md)");
  cmd->add_option("--out", args->out,
                  "Where the report goes: with --telemetry, final_summary.json, .txt and .html; "
                  "with run directories, the merged run (a new run directory)");
  cmd->add_option("--window", args->window, "Latest aligned steps/samples to analyse per rank")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40))
      ->capture_default_str();
  cmd->callback([args, &action] {
    args->page = read_page_limits();
    action.check = [args] { return check_report(*args); };
    action.run = [args] { return run_report(*args); };
  });
}

}  // namespace traceml::cli
