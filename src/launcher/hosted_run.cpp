#include "launcher/hosted_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <iostream>

#include "collector/relay.hpp"
#include "launcher/interrupt_signals.hpp"
#include "launcher/live_display.hpp"
#include "launcher/stall_lines.hpp"
#include "model/env_contract.hpp"
#include "store/run_db.hpp"
#include "store/run_dir.hpp"

namespace traceml::launcher {

namespace fs = std::filesystem;

fs::path run_dir_for(const std::string& logs_dir, const std::string& run_name,
                     const std::string& program) {
  if (!run_name.empty()) return fs::path(logs_dir) / run_name;
  return store::first_free_run_dir(logs_dir, store::default_run_name(program, std::time(nullptr)));
}

HostedRun::HostedRun(const HostOptions& options, std::optional<int> world_size)
    : options_(options), run_dir_(options.run_dir) {
  if (const auto taken = holds_a_run(run_dir_)) throw HostError(*taken);
  created_dir_ = !fs::exists(run_dir_);
  collector::CollectorOptions o;
  o.bind_host = options.bind_host;
  o.port = options.port;
  o.token = options.token;
  o.run_dir = run_dir_.string();
  o.run.run_name = run_name();
  o.run.world_size = world_size;
  o.run.strategy = options.strategy.empty() ? model::default_strategy(world_size)
                                            : model::strategy_from_string(options.strategy);
  o.window = options.window;
  o.interval_s = options.interval_s;
  o.nnodes = options.nnodes;
  o.profile_asking = options.profile_asking;
  // The live snapshot is taken only for a reader: the live view, or the
  // metrics endpoint's channel.
  o.snapshots = options.snapshots ? options.snapshots
                : options.live    ? std::make_shared<collector::SnapshotChannel>()
                                  : nullptr;
  try {
    collector_ = std::make_unique<collector::Collector>(o);
  } catch (const std::exception& e) {
    throw HostError(e.what());
  }
  port_ = collector_->port();
  if (options.on_started) options.on_started();
}

HostedRun::~HostedRun() = default;

LiveDisplay* HostedRun::start_live(int world_size) {
  if (options_.live && collector_)
    display_ = std::make_unique<LiveDisplay>(*collector_, run_name(), world_size,
                                             ::isatty(STDOUT_FILENO) == 1);
  return display_.get();
}

void HostedRun::end_live() {
  if (display_) display_->end();
}

void HostedRun::abandon() {
  end_live();
  if (collector_) {
    collector_->finish(std::chrono::steady_clock::now());
    collector_.reset();
  }
  // Only what this command created goes: a directory that was there keeps
  // what it held.
  std::error_code ec;
  if (created_dir_) {
    fs::remove_all(run_dir_, ec);
  } else {
    for (const char* suffix : {"", "-wal", "-shm"})
      fs::remove(run_dir_ / (std::string(store::kRunDbFileName) + suffix), ec);
  }
}

namespace {

/// A rank's black box as it stands (empty without one); the steps the rank
/// completed and the phase it was in are taken from it into `rank`.
/// `whole`: with its steps; else its header, and the box to read them from
/// once the collector knows it needs them (a rank whose telemetry all
/// arrived does not: the end of a run no longer reads 64 boxes of 768 KiB).
store::BlackBoxReading read_box(RankOutcome& rank, bool whole) {
  store::BlackBoxReading box;
  if (rank.black_box) {
    box = whole ? rank.black_box->read() : rank.black_box->read_header();
    if (!whole) box.source = rank.black_box;
  }
  if (box.attached) {
    rank.steps_completed = box.steps_completed();
    rank.phase = box.phase;
  }
  return box;
}

}  // namespace

void HostedRun::recover(LaunchOutcome& outcome) {
  for (RankOutcome& rank : outcome.ranks) {
    if (!rank.black_box) continue;
    store::BlackBoxReading box = read_box(rank, false);
    box.exited_cleanly = rank.exit_code == 0 && !rank.signal;
    collector_->recover(std::move(box));
  }
}

RunEnd HostedRun::end(std::chrono::steady_clock::time_point deadline, int expected_ranks,
                      store::RunOutcome outcome) {
  RunEnd e = end_run(*collector_, run_dir_, options_.window, deadline, expected_ranks,
                     std::move(outcome), options_.page_limits, options_.process_ends_with_run);
  if (options_.process_ends_with_run) {
    // Its threads and database are closed here, as its destructor would.
    try {
      collector_->finish(std::chrono::steady_clock::now());
      keep_until_exit(std::shared_ptr<const void>(std::move(collector_)));
    } catch (const std::exception&) {
      // Not finished: destroyed below, which finishes it.
    }
  }
  collector_.reset();
  return e;
}

void HostedRun::close(const report::Json& manifest, const RunEnd& end) const {
  write_manifest(run_dir_, manifest);
  say_where(run_dir_, end);
}

namespace {

model::RunStatus status_of(const LaunchOutcome& o) {
  if (o.interrupt_signal) return model::RunStatus::Interrupted;
  return o.exit_code == 0 ? model::RunStatus::Completed : model::RunStatus::Failed;
}

store::RunOutcome outcome_of(const LaunchOutcome& o) {
  store::RunOutcome r;
  r.status = status_of(o);
  r.exit_code = o.exit_code;
  r.failed_rank = o.first_failed_rank;
  for (const auto& rank : o.ranks)
    r.ranks.push_back({rank.global_rank, rank.exit_code, rank.signal, rank.stopped_by_launcher,
                       rank.steps_completed, rank.phase, std::nullopt});
  return r;
}

/// What every rank is told: where the collector is, the run, and the
/// launch's shape.
void add_rank_env(LaunchedRunOptions& o, const std::string& run_name, std::uint16_t port) {
  LaunchPlan& plan = o.plan;
  const int world = plan.nnodes * plan.nproc_per_node;
  const bool owner = plan.node_rank == 0;
  const std::string& bind = o.host.bind_host;
  std::string connect_host = o.connect_host;
  if (connect_host.empty())
    connect_host = owner && plan.nnodes == 1 ? "127.0.0.1" : plan.master_addr;
  if (owner && (bind == "127.0.0.1" || bind == "localhost")) connect_host = "127.0.0.1";
  auto& env = plan.extra_env;
  env.emplace_back(model::env::kDisabled, "0");
  env.emplace_back(model::env::kAggregatorHost, connect_host);
  env.emplace_back(model::env::kAggregatorPort, std::to_string(port));
  env.emplace_back(model::env::kRunToken, o.host.token);
  env.emplace_back(model::env::kSessionId, run_name);
  env.emplace_back(model::env::kLogsDir, o.logs_dir);
  env.emplace_back(model::env::kInterval, std::to_string(o.host.interval_s));
  env.emplace_back(model::env::kTraceMaxSteps,
                   o.trace_max_steps ? std::to_string(*o.trace_max_steps) : "");
  if (!o.profile_steps.empty()) {
    env.emplace_back(model::env::kProfileSteps, o.profile_steps);
    env.emplace_back(model::env::kProfileRanks,
                     o.profile_ranks.empty() ? std::string("all") : o.profile_ranks);
  }
  env.emplace_back(model::env::kNnodes, std::to_string(plan.nnodes));
  env.emplace_back(model::env::kNprocPerNode, std::to_string(plan.nproc_per_node));
  env.emplace_back(model::env::kNodeRank, std::to_string(plan.node_rank));
  env.emplace_back(model::env::kExpectedWorldSize, std::to_string(world));
  if (!o.host.strategy.empty()) env.emplace_back(model::env::kStrategy, o.host.strategy);
}

/// Relays nothing; says on stderr when a rank turns silent or stalled, and
/// when it resumes (StallLines), looking twice a second.
class StallHook final : public OutputHook {
 public:
  explicit StallHook(collector::Collector& c)
      : collector_(c), lines_([](const std::string& l) { std::cerr << l << "\n"
                                                                   << std::flush; }) {}
  bool line(bool /*to_stderr*/, std::string_view /*line*/) override { return false; }
  void tick() override {
    const auto now = StallLines::Clock::now();
    if (now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    lines_.update(collector_.stalls(), now);
  }

 private:
  collector::Collector& collector_;
  StallLines lines_;
  StallLines::Clock::time_point last_{};
};

/// Another node than 0: hands its ranks' black boxes to the collector, so
/// that what a rank here completed and had not sent reaches the run.
void relay_black_boxes(LaunchOutcome& outcome, const LaunchedRunOptions& o) {
  const LaunchPlan& plan = o.plan;
  collector::RelayTarget target;
  target.host = o.connect_host.empty() ? plan.master_addr : o.connect_host;
  target.port = o.host.port;
  target.token = o.host.token;
  target.node.global_rank = plan.node_rank * plan.nproc_per_node;
  target.node.local_rank = 0;
  target.node.node_rank = plan.node_rank;
  target.node.local_world_size = plan.nproc_per_node;
  target.node.world_size = plan.nnodes * plan.nproc_per_node;
  std::vector<collector::RelayedRank> ranks;
  for (RankOutcome& rank : outcome.ranks) {
    store::BlackBoxReading box = read_box(rank, true);
    model::RankEnd end = collector::rank_end_of(box, rank.global_rank, rank.exit_code, rank.signal,
                                                rank.stopped_by_launcher);
    ranks.push_back({std::move(end), std::move(box)});
  }
  // Node 0's collector listens from the start of the run: one that cannot
  // be reached for 15 s is gone, and waiting longer (up to the finalize
  // timeout, 60 s by default) would only hold this node's end and its
  // Ctrl-C.
  const auto budget =
      std::chrono::milliseconds(std::int64_t(std::min(o.finalize_timeout_s, 15.0) * 1000));
  if (const auto why = collector::relay_to_collector(target, ranks, budget))
    warn("could not hand this node's black boxes to the collector (" + *why +
         "): what its ranks had not sent is lost");
}

void say_failed_rank(const LaunchOutcome& outcome, const fs::path& run_dir, int nnodes) {
  if (!outcome.first_failed_rank) return;
  std::cerr << "traceml: rank " << *outcome.first_failed_rank << " failed (exit code "
            << outcome.exit_code << ")";
  // Only where there were others to stop (this node's, or other nodes').
  if (outcome.ranks.size() > 1 || nnodes > 1) std::cerr << "; the other ranks were stopped";
  for (const auto& rank : outcome.ranks)
    if (rank.global_rank == *outcome.first_failed_rank && !rank.log.empty())
      std::cerr << "; its output: " << (run_dir / rank.log).string();
  std::cerr << "\n";
}

}  // namespace

int launch_untraced(LaunchPlan plan) {
  plan.extra_env.emplace_back(model::env::kDisabled, "1");
  try {
    return launch_and_wait(plan).exit_code;
  } catch (const LaunchError& e) {
    throw HostError(e.what());
  }
}

int host_launched_run(LaunchedRunOptions o) {
  LaunchPlan& plan = o.plan;
  const fs::path& run_dir = o.host.run_dir;
  const std::string run_name = run_dir.filename().string();
  const bool owner = plan.node_rank == 0;
  const int world = plan.nnodes * plan.nproc_per_node;
  std::optional<HostedRun> host;
  bool created_dir = false;
  std::uint16_t port = o.host.port;
  o.host.nnodes = plan.nnodes;
  if (owner) {
    host.emplace(o.host, world);
    port = host->port();
  }
  add_rank_env(o, run_name, port);
  // Every node's traceml reads its ranks' black boxes after they end: node
  // 0's gives them to its collector, the others relay them to it.
  plan.black_boxes = true;

  // Each rank's output is kept beside the run, so that a crash can be read
  // after the run: every node writes its own ranks' logs into the run
  // directory (node 0's holds the run; on a shared file system, one
  // directory holds every log).
  {
    std::error_code ec;
    if (!owner) created_dir = !fs::exists(run_dir, ec);
    fs::create_directories(run_dir, ec);
    if (ec)
      warn("cannot create " + run_dir.string() + " for the ranks' logs: " + ec.message());
    else
      plan.rank_log_dir = run_dir.string();
  }
  if (owner)
    std::cerr << "traceml: tracing " << world << " rank(s) into " << run_dir.string() << "\n";
  const double started = unix_now();
  // The live view needs the collector: it runs where the collector does.
  // Without it, a stall is a line on stderr while it happens.
  std::optional<StallHook> stall_hook;
  if (host) {
    plan.output_hook = host->start_live(world);
    if (plan.output_hook == nullptr) plan.output_hook = &stall_hook.emplace(host->collector());
  }
  LaunchOutcome outcome;
  // Held until the manifest is written: a hang-up or SIGTERM after the ranks
  // ended must not cost the run its summary (it is written in well under the
  // finalize timeout), and a closed terminal must not SIGPIPE us.
  std::optional<InterruptSignals> signals;
  try {
    signals.emplace();
    outcome = launch_and_wait(plan, *signals);
    if (host) host->end_live();
  } catch (const LaunchError& e) {
    if (host) {
      host->abandon();
    } else if (created_dir) {
      std::error_code ec;
      fs::remove_all(run_dir, ec);
    }
    throw HostError(e.what());
  }
  const double ended = unix_now();
  if (host) host->recover(outcome);
  say_failed_rank(outcome, run_dir, plan.nnodes);
  if (!owner) {
    relay_black_boxes(outcome, o);
    return outcome.exit_code;
  }

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(std::int64_t(o.finalize_timeout_s * 1000));
  const RunEnd end = host->end(deadline, plan.nnodes > 1 ? world : 0, outcome_of(outcome));
  ManifestInput m;
  m.run_name = run_name;
  m.command = plan.command;
  m.plan = plan;
  m.started_at = started;
  m.ended_at = ended;
  m.outcome = outcome;
  // The run's end once the other nodes' ranks are counted (add_other_nodes).
  m.status = end.status;
  if (m.outcome.exit_code == 0) m.outcome.exit_code = end.exit_code;
  if (!m.outcome.first_failed_rank) m.outcome.first_failed_rank = end.failed_rank;
  m.collection = end.collected;
  m.records_dropped = end.records_dropped;
  m.artifacts = end.artifacts;
  for (const auto& rank : outcome.ranks) {
    if (rank.log.empty()) continue;
    m.artifacts.push_back(rank.log);
    if (rank.log_rotated) m.artifacts.push_back(rank.log + ".1");
  }
  host->close(manifest_json(m), end);
  for (int sig : signals->take()) {
    warn(std::string(strsignal(sig)) + " arrived after the ranks ended; the summary was " +
         "finished first");
  }
  // This node's ranks' exit code, or, when they all ended well and a rank
  // of another node failed, that rank's: the run failed.
  return outcome.exit_code != 0 ? outcome.exit_code : end.exit_code;
}

}  // namespace traceml::launcher
