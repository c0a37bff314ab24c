// The end of a run hosted by this process (`traceml run` on node 0,
// `traceml serve`): the collection stops, the run is diagnosed from memory
// while the writer stores the rest, the outcome and the summary are written
// and the text report printed. Shared so that both commands end a run the
// same way, with the same artifacts.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collector/collector.hpp"
#include "report/html/page_process.hpp"
#include "report/summary_json.hpp"
#include "store/run_outcome.hpp"

namespace traceml::launcher {

struct RunEnd {
  collector::CollectionReport collected;
  /// Records the ranks dropped (their own count, from the summary's tracer
  /// block); absent when no summary was written.
  std::optional<std::int64_t> records_dropped;
  /// File names written in the run directory; manifest.json is the caller's.
  std::vector<std::string> artifacts;
  bool summary_written = false;
  /// Ranks that passed the handshake (traceml::init() ran and its sender
  /// connected) but recorded no step, by rank.
  std::vector<int> ranks_without_steps;
  /// Of those, the ones whose last connection ended with a goodbye.
  std::vector<int> said_goodbye;
  /// How this node's ranks exited, as the launcher saw it (`traceml run`);
  /// empty under `traceml serve`, which does not see the ranks' processes.
  std::vector<store::RankExit> exits;
  /// How the run ended once the other nodes' ranks are counted
  /// (add_other_nodes): what the summary says and `traceml run` returns.
  model::RunStatus status = model::RunStatus::Completed;
  int exit_code = 0;
  std::optional<int> failed_rank;
};

/// Adds the other nodes' ranks, as their traceml relayed how they ended
/// (Collector::relayed_ends), to this node's; a run whose ranks here all
/// ended well then failed when a rank there failed on its own (not stopped
/// by its launcher): its status, exit code and failed rank become that
/// rank's.
void add_other_nodes(store::RunOutcome& outcome, const std::vector<model::RankEnd>& ends);

/// Ends the collection (waiting for the ranks until `deadline`, and for
/// `expected_ranks` of them when > 0), stores `outcome` with the run's stalls,
/// writes final_summary.{json,txt,html} (the page within `page_limits`) and
/// prints the text report on stdout.
/// Never throws: what fails is a warning on stderr. With TRACEML_DEBUG=1 one
/// stderr line says where the time went.
/// `process_ends_after`: the run's memory is kept (keep_until_exit), not
/// freed, when the process ends with the run.
RunEnd end_run(collector::Collector& collector, const std::filesystem::path& run_dir,
               std::int64_t window, std::chrono::steady_clock::time_point deadline,
               int expected_ranks, store::RunOutcome outcome, const report::PageLimits& page_limits,
               bool process_ends_after = false);

/// Keeps `p`'s object, reachable, until the process exits, instead of
/// destroying it (clang's -disable-free). For what a command holds at its
/// end: freeing a run held in memory costs the end of a run ~0.1 s of CPU
/// and page faults (the heap is copy-on-write since the page's child was
/// forked) and gives the kernel nothing it would not take back at the exit.
void keep_until_exit(std::shared_ptr<const void> p);

/// Writes RUN_DIR/manifest.json atomically; a failure is a warning.
void write_manifest(const std::filesystem::path& run_dir, const report::Json& manifest);

/// Prints "traceml: summary: RUN_DIR/final_summary.txt" and the lines of
/// missing_telemetry_lines as warnings.
void say_where(const std::filesystem::path& run_dir, const RunEnd& end);

/// Why ranks sent no telemetry, or no step, one line each (without
/// "traceml: warning: "): no rank connected at all (the program does not call
/// traceml::init(), or a rank died before it connected: with its exit status
/// where the launcher knows it), or ranks connected and died before their
/// first step.
std::vector<std::string> missing_telemetry_lines(const RunEnd& end);

double unix_now();

/// Prints "traceml: warning: <message>" on stderr, the message made safe for
/// a terminal (the CLI's own warnings look the same).
void warn(const std::string& message);

/// "RUN_DIR already holds a run (telemetry.db); pick another --run-name or
/// remove it" when it does: a named run never writes over another.
std::optional<std::string> holds_a_run(const std::filesystem::path& run_dir);

}  // namespace traceml::launcher
