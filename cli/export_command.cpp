// traceml export RUN_DIR --out FILE.jsonl: the run database as telemetry JSONL
// (docs/telemetry-format.md), so a run can be shared, diffed or re-diagnosed
// with `traceml report --telemetry`.
#include <filesystem>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "report/atomic_file.hpp"
#include "store/jsonl_writer.hpp"
#include "store/run_db.hpp"

namespace traceml::cli {

namespace {

struct ExportArgs {
  std::string run_dir;
  std::string out;
};

int run_export(const ExportArgs& a) {
  const std::filesystem::path db = std::filesystem::path(a.run_dir) / store::kRunDbFileName;
  if (!std::filesystem::is_directory(a.run_dir))
    return fail(
        a.run_dir +
        ": not a directory (pass the run directory that traceml run wrote, e.g. logs/<run>)");
  std::ostringstream text;
  try {
    const store::RunData data = store::read_run_db(db.string());
    store::write_telemetry_jsonl(data.telemetry, text);
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
  std::cerr << "traceml: wrote " << a.out << "\n";
  return kExitOk;
}

}  // namespace

void add_export_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd =
      app.add_subcommand("export", "Write a run's telemetry as JSONL (docs/telemetry-format.md).");
  cmd->add_option("run_dir", args->run_dir, "Run directory written by traceml run")->required();
  cmd->add_option("--out", args->out, "Telemetry JSONL file to write")->required();
  cmd->callback([args, &action] { action = [args] { return run_export(*args); }; });
}

}  // namespace traceml::cli
