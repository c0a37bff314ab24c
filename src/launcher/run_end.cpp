#include "launcher/run_end.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "collector/finalize.hpp"
#include "model/env_contract.hpp"
#include "model/text.hpp"
#include "report/atomic_file.hpp"
#include "store/run_db.hpp"

namespace traceml::launcher {

namespace {

/// With TRACEML_DEBUG set, where the end of the run went (docs/performance.md
/// "The end of a run"): one stderr line of phases from the ranks' end.
class EndTimer {
 public:
  EndTimer() : on_(debug_on()), last_(std::chrono::steady_clock::now()) {}
  void lap(const char* name) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    fmt::format_to(std::back_inserter(laps_), "{}{} {:.3f} s", laps_.empty() ? "" : ", ", name,
                   std::chrono::duration<double>(now - last_).count());
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

void warn(const std::string& message) {
  std::cerr << "traceml: warning: " << model::escape_for_terminal(message, true) << "\n";
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void add_other_nodes(store::RunOutcome& outcome, const std::vector<model::RankEnd>& ends) {
  for (const model::RankEnd& e : ends) {
    const bool known =
        std::any_of(outcome.ranks.begin(), outcome.ranks.end(),
                    [&e](const store::RankExit& r) { return r.global_rank == e.global_rank; });
    if (known) continue;
    store::RankExit x;
    x.global_rank = e.global_rank;
    x.exit_code = e.exit_code;
    x.signal = e.signal;
    x.stopped_by_launcher = e.stopped_by_launcher != 0;
    x.steps_completed = e.steps_completed;
    if (e.phase) x.phase = static_cast<model::LoopPhase>(*e.phase);
    outcome.ranks.push_back(x);
  }
  std::sort(outcome.ranks.begin(), outcome.ranks.end(),
            [](const store::RankExit& a, const store::RankExit& b) {
              return a.global_rank < b.global_rank;
            });
  // This node's ranks all ended well, another node's did not: the run failed
  // there (the lowest such rank named; its node's traceml stopped the rest).
  if (outcome.status != model::RunStatus::Completed) return;
  for (const store::RankExit& r : outcome.ranks)
    if (!r.stopped_by_launcher && r.exit_code != 0) {
      outcome.status = model::RunStatus::Failed;
      outcome.failed_rank = r.global_rank;
      outcome.exit_code = r.exit_code;
      return;
    }
}

RunEnd end_run(collector::Collector& collector, const std::filesystem::path& run_dir,
               std::int64_t window, std::chrono::steady_clock::time_point deadline,
               int expected_ranks, store::RunOutcome outcome, const report::PageLimits& page_limits,
               bool process_ends_after) {
  RunEnd end;
  EndTimer timer;
  try {
    collector.stop_ingest(deadline, expected_ranks);
  } catch (const std::exception& e) {
    warn(std::string("the collection did not stop cleanly: ") + e.what());
  }
  timer.lap("ingest");
  add_other_nodes(outcome, collector.relayed_ends());
  end.status = outcome.status;
  end.exit_code = outcome.exit_code;
  end.failed_rank = outcome.failed_rank;
  outcome.stalls = collector.stalls();
  // The end of the run is diagnosed from the run held in memory, not read
  // back from the database (`traceml report RUN_DIR` gives the same bytes),
  // on a thread of its own while the writer stores the rest.
  const auto held = std::make_shared<const store::RunData>(collector.take_run());
  const store::RunData& run_data = *held;
  // The diagnosis starts first: what follows only reads the run beside it.
  std::future<analysis::Summary> summary;
  try {
    summary = std::async(std::launch::async, [&run_data, window] {
      return collector::summarize_run(run_data, window);
    });
  } catch (const std::exception&) {
    // No thread to be had: diagnosed below, after the writer.
  }
  // Each rank's resident memory at its last process sample: what it held
  // when it ended (a rank the OOM killer took shows how close it came).
  for (store::RankExit& e : outcome.ranks) {
    const model::ProcessSample* last = nullptr;
    for (const model::ProcessSample& p : run_data.telemetry.process)
      if (p.global_rank == e.global_rank && p.rss_bytes && (last == nullptr || p.ts >= last->ts))
        last = &p;
    if (last != nullptr) e.rss_bytes = last->rss_bytes;
  }
  end.exits = outcome.ranks;
  {
    const std::set<int> stepped = collector::ranks_with_steps(run_data.telemetry.steps);
    for (const auto& id : run_data.telemetry.ranks)
      if (stepped.count(id.global_rank) == 0) end.ranks_without_steps.push_back(id.global_rank);
    std::sort(end.ranks_without_steps.begin(), end.ranks_without_steps.end());
    for (const auto& d : run_data.deliveries)
      if (d.clean_end) end.said_goodbye.push_back(d.global_rank);
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
        summary.valid() ? summary.get() : collector::summarize_run(run_data, window), page_limits);
    timer.lap("summary");
    end.summary_written = true;
    if (f.html_error) warn(*f.html_error);
    if (f.timeline_error) warn(*f.timeline_error);
    std::cout << report::terminal_text(f) << "\n" << std::flush;
    const auto& total = f.json["tracer"]["records_dropped"];
    if (total.is_number_integer()) end.records_dropped = total.get<std::int64_t>();
    end.artifacts.push_back("final_summary.json");
    end.artifacts.push_back("final_summary.txt");
    if (!f.html_error) end.artifacts.push_back("final_summary.html");
    if (f.json.contains("timeline")) end.artifacts.push_back("timeline.json");
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
  if (process_ends_after) keep_until_exit(held);
  timer.report();
  return end;
}

void keep_until_exit(std::shared_ptr<const void> p) {
  // Never destroyed, on purpose: what it holds stays reachable (no leak to a
  // leak checker) and is never freed.
  static auto* const kept = new std::vector<std::shared_ptr<const void>>();
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  try {
    kept->push_back(std::move(p));
  } catch (const std::bad_alloc&) {
    // Freed here instead: slower, never wrong.
  }
}

void write_manifest(const std::filesystem::path& run_dir, const report::Json& manifest) {
  try {
    report::write_file_atomic((run_dir / "manifest.json").string(),
                              report::dump_json(manifest) + "\n");
  } catch (const std::exception& e) {
    warn(std::string("no manifest written: ") + e.what());
  }
}

namespace {

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  constexpr std::size_t kNamed = 8;
  for (std::size_t i = 0; i < ranks.size() && i < kNamed; ++i)
    s += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kNamed) s += " and " + std::to_string(ranks.size() - kNamed) + " more";
  return s;
}

std::string exit_text(const store::RankExit& e) {
  if (e.signal) {
    const char* abbrev = ::sigabbrev_np(*e.signal);
    return "killed by " + (abbrev != nullptr ? "SIG" + std::string(abbrev)
                                             : "signal " + std::to_string(*e.signal));
  }
  return "exit code " + std::to_string(e.exit_code);
}

const store::RankExit* exit_of(const std::vector<store::RankExit>& exits, int rank) {
  for (const auto& e : exits)
    if (e.global_rank == rank) return &e;
  return nullptr;
}

bool failed(const store::RankExit& e) {
  return !e.stopped_by_launcher && (e.exit_code != 0 || e.signal);
}

}  // namespace

std::vector<std::string> missing_telemetry_lines(const RunEnd& end) {
  std::vector<std::string> lines;
  if (end.collected.ranks_connected == 0) {
    if (end.collected.rejected_connections > 0) {
      lines.push_back("no rank's telemetry was accepted: " +
                      std::to_string(end.collected.rejected_connections) +
                      " connection(s) were refused (manifest.json: telemetry.rejected_by_kind)");
      return lines;
    }
    // A rank that dies within its first moments after traceml::init() may
    // not have connected yet: a failed exit does not say which it was.
    for (const auto& e : end.exits)
      if (failed(e)) {
        lines.push_back("no rank sent telemetry: rank " + std::to_string(e.global_rank) +
                        " died (" + exit_text(e) +
                        ") before it connected (before traceml::init(), or just after it)");
        return lines;
      }
    lines.push_back(end.exits.empty() ? "no rank sent telemetry: do the ranks call "
                                        "traceml::init(), and live until they connect?"
                                      : "no rank sent telemetry: does the program call "
                                        "traceml::init()?");
    return lines;
  }
  // Ranks that connected and recorded no step, grouped by how they ended
  // (a job whose every rank died the same way is one line), lowest rank first.
  std::vector<std::pair<std::string, std::vector<int>>> by_end;
  const auto add = [&by_end](const std::string& how, int rank) {
    for (auto& [h, ranks] : by_end)
      if (h == how) {
        ranks.push_back(rank);
        return;
      }
    by_end.push_back({how, {rank}});
  };
  for (const int rank : end.ranks_without_steps) {
    const store::RankExit* e = exit_of(end.exits, rank);
    if (e != nullptr) {
      if (failed(*e)) add("(" + exit_text(*e) + ")", rank);
    } else if (std::find(end.said_goodbye.begin(), end.said_goodbye.end(), rank) ==
               end.said_goodbye.end()) {
      // Under serve (or on another node) the exit status is not ours to see.
      add("(its connection ended without a goodbye)", rank);
    }
  }
  for (const auto& [how, ranks] : by_end)
    lines.push_back(ranks_text(ranks) + " died before " + (ranks.size() == 1 ? "its" : "their") +
                    " first step " + how + ": traceml::init() ran, no step was recorded");
  return lines;
}

void say_where(const std::filesystem::path& run_dir, const RunEnd& end) {
  for (const std::string& line : missing_telemetry_lines(end))
    warn(line);
  for (const int node : end.collected.nodes_unrelayed)
    warn("node " + std::to_string(node) +
         "'s traceml did not hand over its ranks' black boxes by the end of the run: what they "
         "had not sent is lost (is traceml run still going there, or was it killed?)");
  for (const auto& [rank, steps] : end.collected.steps_recovered)
    std::cerr << "traceml: rank " << rank << "'s last "
              << (steps == 1 ? std::string("step came from its black box: it had not sent it")
                             : std::to_string(steps) +
                                   " steps came from its black box: it had not sent them")
              << "\n";
  if (end.summary_written)
    std::cerr << "traceml: summary: " << (run_dir / "final_summary.txt").string() << "\n";
}

std::optional<std::string> holds_a_run(const std::filesystem::path& run_dir) {
  if (!std::filesystem::exists(run_dir / store::kRunDbFileName)) return std::nullopt;
  return run_dir.string() + " already holds a run (" + store::kRunDbFileName +
         "); pick another --run-name or remove it";
}

}  // namespace traceml::launcher
