// One hosted run: the collector, the live view, the end of the run, the
// manifest and the exit code, shared by `traceml run` (node 0 hosts the
// collector; other nodes only launch their ranks) and `traceml serve` (the
// collector alone, for ranks another launcher starts). The CLI reads and
// checks the options and calls host_launched_run or host_served_run; how a
// run and its ranks ended are the enums of model/run_end_state.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "collector/collector.hpp"
#include "launcher/launch.hpp"
#include "launcher/manifest.hpp"
#include "launcher/run_end.hpp"
#include "model/run_end_state.hpp"

namespace traceml::launcher {

class LiveDisplay;

/// The run could not start (or its ranks could not be launched): one line
/// for "traceml: error: ", and nothing of the run left behind.
class HostError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// LOGS_DIR/RUN_NAME, or, with no name given, a free LOGS_DIR/PROGRAM_TIMESTAMP
/// (a generated name never collides; a given one is refused if it holds a run).
std::filesystem::path run_dir_for(const std::string& logs_dir, const std::string& run_name,
                                  const std::string& program);

/// What both commands give the run's host.
struct HostOptions {
  std::filesystem::path run_dir;
  std::string bind_host = "127.0.0.1";
  std::uint16_t port = 0;  ///< 0: a free one
  std::string token;       ///< empty: any peer is taken
  std::string strategy;    ///< empty: model::default_strategy of the world size
  std::int64_t window = 10000;
  double interval_s = 1.0;
  bool live = false;  ///< --mode live
  /// The nodes of a `traceml run`; the end of the run waits for the other
  /// nodes' traceml to relay their ranks' black boxes (CollectorOptions::nnodes).
  int nnodes = 1;
  /// How long and in how much memory final_summary.html may draw
  /// (TRACEML_PAGE_TIMEOUT_S, TRACEML_PAGE_MEMORY_MB, read by the CLI).
  report::PageLimits page_limits;
  /// The process exits when the run ends (the CLI's run and serve): the
  /// collector and the run in memory are kept, not freed (keep_until_exit).
  bool process_ends_with_run = false;
  /// What the collector asks of the ranks' profilers (protocol 7).
  collector::ProfileAsking profile_asking;
  /// Where the collector publishes its live snapshot for a reader that
  /// outlives it (the CLI's metrics endpoint); null: nowhere else.
  std::shared_ptr<collector::SnapshotChannel> snapshots;
  /// Called once the collector listens (the run has started): what the
  /// command says then (where its metrics are).
  std::function<void()> on_started;
};

/// The collector of a run, its live view and its end. Both commands' flows
/// (hosted_run.cpp, served_run.cpp) are made of it.
class HostedRun {
 public:
  /// Refuses a run directory that holds a run, then starts the collector,
  /// which creates the directory and the database. Throws HostError.
  HostedRun(const HostOptions& options, std::optional<int> world_size);
  ~HostedRun();
  HostedRun(const HostedRun&) = delete;
  HostedRun& operator=(const HostedRun&) = delete;

  collector::Collector& collector() { return *collector_; }
  std::uint16_t port() const { return port_; }
  const std::filesystem::path& run_dir() const { return run_dir_; }
  std::string run_name() const { return run_dir_.filename().string(); }

  /// Starts the live view when the options ask for one (`world_size` 0: the
  /// one the collector learns); returns it, or null.
  LiveDisplay* start_live(int world_size);
  LiveDisplay* live() { return display_.get(); }
  /// Erases the live view (the summary follows).
  void end_live();

  /// Nothing was run: the collector stops and what this run created goes
  /// (the directory it made; in one that was there, only the database).
  void abandon();

  /// Hands the collector what the ranks' black boxes hold, once they have
  /// ended: the steps they completed and had not sent. Before end().
  /// Also notes where each rank was (RankOutcome::steps_completed, phase).
  void recover(LaunchOutcome& outcome);

  /// The end of the run: end_run (run_end.hpp) with `outcome`; the
  /// collector is gone after it.
  RunEnd end(std::chrono::steady_clock::time_point deadline, int expected_ranks,
             store::RunOutcome outcome);
  /// Writes manifest.json and says where the summary is.
  void close(const report::Json& manifest, const RunEnd& end) const;

 private:
  HostOptions options_;
  std::filesystem::path run_dir_;
  bool created_dir_ = false;
  std::unique_ptr<collector::Collector> collector_;
  std::uint16_t port_ = 0;
  std::unique_ptr<LiveDisplay> display_;
};

/// `traceml run`: this node's ranks of `plan`, traced into `host.run_dir`.
struct LaunchedRunOptions {
  HostOptions host;
  /// The ranks; the master port resolved (not 0).
  LaunchPlan plan;
  std::string logs_dir;
  /// Address the ranks connect to; empty: 127.0.0.1 on one node, else the
  /// master address.
  std::string connect_host;
  std::optional<std::int64_t> trace_max_steps;
  /// --profile-steps and --profile-ranks, checked (empty: not given).
  std::string profile_steps;
  std::string profile_ranks;
  double finalize_timeout_s = 60.0;
};

/// Runs the ranks and, on node 0, hosts the collector and ends the run with
/// its summary and manifest. Returns the ranks' exit code (as torchrun
/// does); throws HostError when the run cannot start.
int host_launched_run(LaunchedRunOptions options);

/// The ranks of `plan` with tracing off (`traceml run --disable`).
int launch_untraced(LaunchPlan plan);

/// `traceml serve`.
struct ServedRunOptions {
  HostOptions host;
  std::optional<int> world_size;
  /// Address the ranks are told; empty: the bind host, or this machine's
  /// name when it binds every interface.
  std::string connect_host;
  double idle_timeout_s = 300.0;
  std::string env_file;    ///< also write the ranks' variables here
  std::string token_file;  ///< where the token came from, for the hint
  /// host.token was made for this run (none was given and serve listens
  /// beyond loopback): the ranks are told it (the paste line, --env-file at
  /// 0600).
  bool token_made = false;
};

/// Only this machine's processes can reach this address: "localhost", or an
/// IPv4 127.x.x.x, ::1 or ::ffff:127.x.x.x address (brackets allowed). A
/// name other than localhost is not known to be.
bool loopback(const std::string& host);

/// Hosts the collector until the world ended, a signal, or --idle-timeout;
/// then ends the run with its summary and manifest. Returns the exit code
/// of the run's status (model::exit_code), 1 when no summary was written;
/// throws HostError when the run cannot start.
int host_served_run(const ServedRunOptions& options);

/// How a served run ended, from how its ranks ended and why it was ended.
struct ServedEnd {
  model::RunStatus status = model::RunStatus::Completed;
  std::optional<int> failed_rank;  ///< the first rank whose connection was lost
  int exit_code = 0;
};
ServedEnd served_end(const std::vector<ServedRank>& ranks, model::EndReason reason,
                     std::optional<int> signal);

}  // namespace traceml::launcher
