// traceml report RUN_DIR            (rebuild a run's summary from its database)
// traceml report --telemetry FILE.jsonl --out DIR [--window N]
#include <filesystem>
#include <iostream>

#include "analysis/summary.hpp"
#include "collector/finalize.hpp"
#include "commands.hpp"
#include "report/atomic_file.hpp"
#include "report/final_summary.hpp"
#include "store/jsonl_reader.hpp"
#include "store/run_db.hpp"

namespace traceml::cli {

namespace {

struct ReportArgs {
  std::string run_dir;
  std::string telemetry;
  std::string out;
  std::int64_t window = 10000;
};

int report_run_dir(const ReportArgs& a) {
  if (!std::filesystem::is_directory(a.run_dir))
    return fail(
        a.run_dir +
        ": not a directory (pass the run directory that traceml run wrote, e.g. logs/<run>)");
  if (!a.out.empty())
    return fail("--out goes with --telemetry; a run directory's summary is written into it");
  try {
    const report::FinalSummary f = collector::finalize_run(a.run_dir, a.window);
    if (f.html_error) warn(*f.html_error);
    std::cout << f.text << "\n";
  } catch (const store::RunDbError& e) {
    return fail(e.what());
  } catch (const report::WriteError& e) {
    return fail(std::string(e.what()) + " (is the run directory writable?)");
  }
  return kExitOk;
}

int run_report(const ReportArgs& a) {
  if (!a.run_dir.empty()) {
    if (!a.telemetry.empty()) return fail("give either RUN_DIR or --telemetry, not both");
    return report_run_dir(a);
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
    report::write_run_report(f, a.out, &in.telemetry);
  } catch (const report::WriteError& e) {
    return fail(std::string(e.what()) + " (choose a writable --out directory)");
  }
  if (f.html_error) warn(*f.html_error);
  std::cout << f.text << "\n";
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Rebuild final_summary.json/.txt/.html of a run directory, or diagnose a telemetry JSONL "
      "file.");
  cmd->add_option("run_dir", args->run_dir,
                  "Run directory written by traceml run (holds telemetry.db)");
  cmd->add_option("--telemetry", args->telemetry,
                  "Telemetry JSONL file (docs/telemetry-format.md)");
  cmd->add_option("--out", args->out,
                  "With --telemetry: directory for final_summary.json, .txt and .html");
  cmd->add_option("--window", args->window, "Latest aligned steps/samples to analyse per rank")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40))
      ->capture_default_str();
  cmd->callback([args, &action] { action = [args] { return run_report(*args); }; });
}

}  // namespace traceml::cli
