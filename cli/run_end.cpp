#include "run_end.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>

#include "collector/finalize.hpp"
#include "commands.hpp"
#include "model/env_contract.hpp"
#include "report/atomic_file.hpp"
#include "store/run_db.hpp"

namespace traceml::cli {

namespace {

/// With TRACEML_DEBUG set, where the end of the run went (docs/performance.md
/// "The end of a run"): one stderr line of phases from the ranks' end.
class EndTimer {
 public:
  EndTimer() : on_(debug_on()), last_(std::chrono::steady_clock::now()) {}
  void lap(const char* name) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.3f s", laps_.empty() ? "" : ", ", name,
                  std::chrono::duration<double>(now - last_).count());
    laps_ += buf;
    last_ = now;
  }
  void report() const {
    if (on_) std::cerr << "traceml: debug: end of run: " << laps_ << "\n";
  }

 private:
  static bool debug_on() {
    const char* v = std::getenv(model::env::kDebug);
    return v != nullptr && std::strcmp(v, "1") == 0;
  }
  bool on_;
  std::chrono::steady_clock::time_point last_;
  std::string laps_;
};

}  // namespace

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

RunEnd end_run(collector::Collector& collector, const std::filesystem::path& run_dir,
               std::int64_t window, std::chrono::steady_clock::time_point deadline,
               int expected_ranks, store::RunOutcome outcome) {
  RunEnd end;
  EndTimer timer;
  try {
    collector.stop_ingest(deadline, expected_ranks);
  } catch (const std::exception& e) {
    warn(std::string("the collection did not stop cleanly: ") + e.what());
  }
  timer.lap("ingest");
  outcome.stalls = collector.stalls();
  // The end of the run is diagnosed from the run held in memory, not read
  // back from the database (`traceml report RUN_DIR` gives the same bytes),
  // on a thread of its own while the writer stores the rest.
  const store::RunData run_data = collector.take_run();
  std::future<analysis::Summary> summary;
  try {
    summary = std::async(std::launch::async, [&run_data, window] {
      return collector::summarize_run(run_data, window);
    });
  } catch (const std::exception&) {
    // No thread to be had: diagnosed below, after the writer.
  }
  try {
    end.collected = collector.finish(deadline, expected_ranks);
  } catch (const std::exception& e) {
    end.collected.write_error = e.what();
  }
  timer.lap("store");
  end.artifacts = {store::kRunDbFileName};
  if (end.collected.write_error)
    warn(*end.collected.write_error + "; " + std::to_string(end.collected.records) +
         " records were stored, telemetry that arrived later was lost");
  try {
    store::write_run_outcome((run_dir / store::kRunDbFileName).string(), outcome);
    const report::FinalSummary f = collector::finalize_run(
        run_dir.string(), run_data,
        summary.valid() ? summary.get() : collector::summarize_run(run_data, window));
    timer.lap("summary");
    end.summary_written = true;
    if (f.html_error) warn(*f.html_error);
    std::cout << f.text << "\n" << std::flush;
    const auto& total = f.json["tracer"]["records_dropped"];
    if (total.is_number_integer()) end.records_dropped = total.get<std::int64_t>();
    end.artifacts.push_back("final_summary.json");
    end.artifacts.push_back("final_summary.txt");
    if (!f.html_error) end.artifacts.push_back("final_summary.html");
  } catch (const std::exception& e) {
    // A summary thread still running must end before run_data goes.
    if (summary.valid()) {
      try {
        summary.get();
      } catch (const std::exception&) {
      }
    }
    warn(std::string("no summary written: ") + e.what());
  }
  end.artifacts.push_back("manifest.json");
  timer.report();
  return end;
}

void write_manifest(const std::filesystem::path& run_dir, const report::Json& manifest) {
  try {
    report::write_file_atomic((run_dir / "manifest.json").string(),
                              report::dump_json(manifest) + "\n");
  } catch (const std::exception& e) {
    warn(std::string("no manifest written: ") + e.what());
  }
}

void say_where(const std::filesystem::path& run_dir, const RunEnd& end) {
  if (end.collected.ranks_connected == 0) {
    if (end.collected.rejected_connections > 0)
      warn("no rank's telemetry was accepted: " +
           std::to_string(end.collected.rejected_connections) +
           " connection(s) were refused (manifest.json: telemetry.rejected_by_kind)");
    else
      warn("no rank sent telemetry: does the program call traceml::init()?");
  }
  if (end.summary_written)
    std::cerr << "traceml: summary: " << (run_dir / "final_summary.txt").string() << "\n";
}

std::optional<std::string> holds_a_run(const std::filesystem::path& run_dir) {
  if (!std::filesystem::exists(run_dir / store::kRunDbFileName)) return std::nullopt;
  return run_dir.string() + " already holds a run (" + store::kRunDbFileName +
         "); pick another --run-name or remove it";
}

}  // namespace traceml::cli
