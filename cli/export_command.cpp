// traceml export RUN_DIR --out FILE.jsonl: the run database as telemetry JSONL
// (docs/telemetry-format.md), so a run can be shared, diffed or re-diagnosed
// with `traceml report --telemetry`; with --format chrome-trace, its steps as
// a timeline for ui.perfetto.dev (docs/timeline.md).
#include <filesystem>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "output_paths.hpp"
#include "report/atomic_file.hpp"
#include "report/chrome_trace.hpp"
#include "report/profile_trace.hpp"
#include "report/run_timeline.hpp"
#include "store/jsonl_writer.hpp"
#include "store/run_db.hpp"
#include "traceml/version.hpp"

namespace traceml::cli {

namespace {

struct ExportArgs {
  std::string run_dir;
  std::string out;
  std::string format = "jsonl";
  std::string steps;  ///< "A:B"; empty: the default range
  std::int64_t window = 10000;
};

/// Steps a timeline shows by default: the latest this many of the analysed
/// window. A timeline takes about 0.9 KB per rank and step, so 64 ranks x
/// 1,000 steps is about 60 MB of JSON; the whole window of a long run
/// would be gigabytes (docs/timeline.md).
constexpr std::int64_t kDefaultTimelineSteps = 1000;

std::string with_commas(std::int64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3)
    s.insert(std::size_t(i), ",");
  return s;
}

/// The timeline of `data`'s steps into `text`, and in `said` what to print
/// once it is written; or an exit code.
int write_timeline(const ExportArgs& a, std::optional<report::StepRange> range,
                   const store::RunData& data, std::ostringstream& text, std::string& said) {
  std::string note;
  if (!range) {
    range = report::default_timeline_steps(data.telemetry, a.window, kDefaultTimelineSteps);
    if (!range)
      return fail(a.run_dir +
                  ": no step that every rank reported, so no window to draw (pass --steps A:B "
                  "to draw a range anyway)");
    note = " (the latest " + with_commas(range->last - range->first + 1) +
           " steps of the analysed window; --steps A:B for others)";
  }
  // The profiles (--profile-steps) whose steps meet the range, drawn under them.
  const std::vector<report::RankProfile> profiles = report::profiles_meeting(a.run_dir, {*range});
  const report::TimelineStats s = report::write_chrome_trace(
      data.telemetry, *range, std::string("traceml ") + traceml::version(), text, profiles);
  if (s.steps == 0)
    return fail(a.run_dir + ": no step between " + std::to_string(range->first) + " and " +
                std::to_string(range->last) + " (choose another --steps A:B)");
  said = "traceml: " + std::to_string(s.ranks) + (s.ranks == 1 ? " rank" : " ranks") + ", steps " +
         std::to_string(range->first) + ".." + std::to_string(range->last) + note + ", " +
         with_commas(s.events) + " events" +
         (s.gpu ? ", GPU-clock steps on a track of their own" : "") +
         (s.threads > 1 ? ", up to " + std::to_string(s.threads) + " traced threads a rank" : "") +
         (s.profile_ops > 0 ? ", " + with_commas(s.profile_ops) +
                                  " LibTorch operators under their steps (profiles/)"
                            : "") +
         "\n";
  if (s.inferred_steps > 0)
    said += "traceml: " + with_commas(s.inferred_steps) + " of " + with_commas(s.steps) +
            " steps were recorded without their phases' begin times (by an older traceml): "
            "their phases are placed back to back (docs/timeline.md)\n";
  return kExitOk;
}

int run_export(const ExportArgs& a) {
  const std::filesystem::path db = std::filesystem::path(a.run_dir) / store::kRunDbFileName;
  if (!std::filesystem::is_directory(a.run_dir))
    return fail(
        a.run_dir +
        ": not a directory (pass the run directory that traceml run wrote, e.g. logs/<run>)");
  std::optional<report::StepRange> asked;
  if (!a.steps.empty()) {
    if (a.format == "jsonl")
      return fail("--steps applies to --format chrome-trace (a JSONL export holds every step)");
    std::string error;
    asked = report::parse_step_range(a.steps, error);
    if (!asked) return fail(error);
  }
  std::ostringstream text;
  std::string said;
  try {
    const store::RunData data = store::read_run_db(db.string());
    if (a.format == "chrome-trace") {
      if (const int rc = write_timeline(a, asked, data, text, said); rc != kExitOk) return rc;
    } else {
      store::write_telemetry_jsonl(data.telemetry, text);
    }
  } catch (const store::RunDbError& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(db.string() + ": cannot export: " + e.what());
  }
  try {
    report::write_file_atomic(a.out, text.str());
  } catch (const report::WriteError& e) {
    return fail(std::string(e.what()) + " (choose a writable --out path)");
  }
  std::cerr << said << "traceml: wrote " << a.out
            << (a.format == "chrome-trace"
                    ? " (open it in https://ui.perfetto.dev or chrome://tracing)"
                    : "")
            << "\n";
  return kExitOk;
}

}  // namespace

void add_export_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd =
      app.add_subcommand("export",
                         "Write a run's telemetry as JSONL (docs/telemetry-format.md), or its "
                         "steps as a Chrome trace (docs/timeline.md).");
  cmd->add_option("run_dir", args->run_dir, "Run directory written by traceml run")->required();
  cmd->add_option("--out", args->out, "File to write (JSONL, or the trace's JSON)")->required();
  cmd->add_option("--format", args->format,
                  "jsonl: the telemetry (default); chrome-trace: the steps as a timeline for "
                  "ui.perfetto.dev and chrome://tracing")
      ->check(CLI::IsMember({"jsonl", "chrome-trace"}));
  cmd->add_option("--steps", args->steps,
                  "chrome-trace: steps A:B to draw (default: the latest 1,000 of the analysed "
                  "window)");
  cmd->add_option("--window", args->window,
                  "chrome-trace: the analysed window whose steps are drawn by default")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
  cmd->callback([args, &action] {
    // Before the run database is read: a command that exits 2 writes nothing.
    action.check = [args] { return unwritable_file("--out", args->out, false); };
    action.run = [args] { return run_export(*args); };
  });
}

}  // namespace traceml::cli
