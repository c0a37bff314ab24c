// traceml run [options] -- PROGRAM [ARGS...]: a torchrun for C++ binaries that
// also hosts the collector (node 0) and writes the run's diagnosis at the end.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <system_error>

#include <unistd.h>

#include "collector/collector.hpp"
#include "commands.hpp"
#include "launcher/free_port.hpp"
#include "launcher/interrupt_signals.hpp"
#include "launcher/launch.hpp"
#include "launcher/manifest.hpp"
#include "launcher/program_path.hpp"
#include "live_display.hpp"
#include "model/env_contract.hpp"
#include "model/env_values.hpp"
#include "model/text.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "run_end.hpp"
#include "runtime/config.hpp"
#include "store/run_db.hpp"
#include "store/run_dir.hpp"
#include "store/run_outcome.hpp"
#include "transport/hello.hpp"
#include "transport/record_codec.hpp"

namespace traceml::cli {

namespace {

namespace fs = std::filesystem;

/// The ports every node of a multi-node run must agree on when none is
/// given (torchrun's and TraceML's defaults). On one node a run that names
/// no port takes free ones, so that two runs on one machine never collide.
constexpr int kMultiNodeMasterPort = 29500;
constexpr int kMultiNodeAggregatorPort = 29765;

struct RunArgs {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kMultiNodeMasterPort;
  std::string run_name;
  std::string logs_dir = "./logs";
  int aggregator_port = kMultiNodeAggregatorPort;
  std::string aggregator_host;
  std::string aggregator_bind_host;
  double finalize_timeout_sec = 60.0;
  std::optional<std::int64_t> trace_max_steps;
  double interval = 1.0;
  double grace_sec = 5.0;
  std::int64_t window = 10000;
  std::string strategy;
  std::string mode = "summary";
  bool disable = false;
  std::vector<std::string> command;
};

// The ranges of the numeric options. Each bound says where a value stops
// making sense (and, for durations, stays far from overflowing a wait).
constexpr int kMaxProcPerNode = 1024;        // more processes than any node has cores
constexpr double kMaxGraceSec = 3600.0;      // an hour between SIGTERM and SIGKILL
constexpr double kMaxFinalizeSec = 86400.0;  // a day of waiting for the last telemetry
constexpr std::int64_t kMaxTraceSteps = std::int64_t{1} << 62;

/// The checks of spec §1.1 that apply to us, and a range for every number;
/// a message to print, or none.
std::optional<std::string> validate(const RunArgs& a) {
  if (a.command.empty())
    return "no program to run (usage: traceml run [options] -- PROGRAM [ARGS...])";
  const double max_world = double(runtime::kMaxWorldSize);
  for (const auto& problem :
       {out_of_range("--nproc-per-node", a.nproc_per_node, 1, kMaxProcPerNode),
        out_of_range("--nnodes", a.nnodes, 1, max_world),
        out_of_range("--node-rank", a.node_rank, 0, max_world - 1),
        out_of_range("--master-port", a.master_port, 0, 65535),
        out_of_range("--aggregator-port", a.aggregator_port, 0, 65535),
        out_of_range("--finalize-timeout-sec", a.finalize_timeout_sec, 0.001, kMaxFinalizeSec,
                     " seconds"),
        out_of_range("--interval", a.interval, runtime::kMinIntervalSec, runtime::kMaxIntervalSec,
                     " seconds"),
        out_of_range("--grace-period-sec", a.grace_sec, 0, kMaxGraceSec, " seconds")}) {
    if (problem) return problem;
  }
  if (a.trace_max_steps) {
    if (auto p = out_of_range("--trace-max-steps", double(*a.trace_max_steps), 1,
                              double(kMaxTraceSteps)))
      return p;
  }
  if (std::int64_t(a.nnodes) * a.nproc_per_node > runtime::kMaxWorldSize)
    return "--nnodes x --nproc-per-node must be at most " + std::to_string(runtime::kMaxWorldSize) +
           " ranks (got " + std::to_string(a.nnodes) + " x " + std::to_string(a.nproc_per_node) +
           ")";
  if (a.node_rank >= a.nnodes) return "--node-rank must be less than --nnodes";
  if (a.master_addr.empty()) return "--master-addr cannot be empty";
  for (const auto& problem :
       {bad_mode(a.mode), bad_name("--run-name", a.run_name, model::run_name_problem),
        bad_name("--strategy", a.strategy, model::strategy_problem)})
    if (problem) return problem;
  if (a.nnodes > 1) {
    if (a.run_name.empty())
      return "--run-name is required when --nnodes > 1 so every node writes into the same run";
    if (a.aggregator_port == 0)
      return "--aggregator-port 0 (pick a free port) works only with --nnodes 1: other nodes must "
             "know the port; give a fixed one";
    if (a.master_port == 0) return "--master-port 0 works only with --nnodes 1; give a fixed port";
  }
  if (!a.disable) return unwritable_run_dir(a.logs_dir, a.run_name);
  return std::nullopt;
}

/// A Slurm variable as an int in [lo, kMaxWorldSize]; std::nullopt when
/// unset. A set but unusable value is an error (`problem`), not ignored: the
/// node count decides the world size every rank is told.
std::optional<int> slurm_int(const char* name, int lo, std::string& problem) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || n < lo || n > runtime::kMaxWorldSize) {
    problem = std::string(name) + "='" + model::escape_for_terminal(v) +
              "' is not an integer in [" + std::to_string(lo) + ", " +
              std::to_string(runtime::kMaxWorldSize) + "]; fix or unset it, or pass the flag";
    return std::nullopt;
  }
  return int(n);
}

launcher::LaunchPlan plan_of(const RunArgs& a) {
  launcher::LaunchPlan p;
  p.nproc_per_node = a.nproc_per_node;
  p.nnodes = a.nnodes;
  p.node_rank = a.node_rank;
  p.master_addr = a.master_addr;
  p.master_port = a.master_port;
  p.command = a.command;
  p.grace = std::chrono::milliseconds(std::int64_t(a.grace_sec * 1000));
  return p;
}

int launch_untraced(launcher::LaunchPlan plan) {
  plan.extra_env.emplace_back(model::env::kDisabled, "1");
  try {
    return launcher::launch_and_wait(plan).exit_code;
  } catch (const launcher::LaunchError& e) {
    return fail(e.what());
  }
}

std::string status_of(const launcher::LaunchOutcome& o) {
  if (o.interrupt_signal) return "interrupted";
  return o.exit_code == 0 ? "completed" : "failed";
}

store::RunOutcome outcome_of(const launcher::LaunchOutcome& o) {
  store::RunOutcome r;
  r.status = status_of(o);
  r.exit_code = o.exit_code;
  r.failed_rank = o.first_failed_rank;
  for (const auto& rank : o.ranks)
    r.ranks.push_back({rank.global_rank, rank.exit_code, rank.signal, rank.stopped_by_launcher});
  return r;
}

int run(RunArgs a) {
  launcher::LaunchPlan plan = plan_of(a);
  if (a.master_port == 0) {
    const auto port = launcher::pick_free_port();
    if (!port) return fail("could not find a free --master-port; give one");
    plan.master_port = *port;
  }
  if (a.disable) return launch_untraced(plan);
  // A typo in PROGRAM is reported before any run directory or collector exists.
  try {
    launcher::resolve_program(a.command.front());
  } catch (const launcher::LaunchError& e) {
    return fail(e.what());
  }

  const std::string program = fs::path(a.command.front()).filename().string();
  // A name the user gave is used as is (an existing run is refused below); a
  // generated one never collides.
  const fs::path run_dir =
      a.run_name.empty() ? store::first_free_run_dir(
                               a.logs_dir, store::default_run_name(program, std::time(nullptr)))
                         : fs::path(a.logs_dir) / a.run_name;
  const std::string run_name = run_dir.filename().string();
  const bool owner = a.node_rank == 0;
  const int world = a.nnodes * a.nproc_per_node;
  const std::string bind_host = !a.aggregator_bind_host.empty()
                                    ? a.aggregator_bind_host
                                    : (a.nnodes > 1 ? "0.0.0.0" : "127.0.0.1");
  // A token every rank of this run knows and other programs do not. Nodes
  // other than 0 cannot be told a random one, so multi-node runs take
  // TRACEML_RUN_TOKEN from the environment, else derive it from the run name.
  std::string token;
  if (const char* env = std::getenv(model::env::kRunToken); env != nullptr && *env != '\0') {
    token = env;
    if (const auto why = model::token_problem(token))
      return fail(std::string(model::env::kRunToken) + " " + *why);
  } else {
    token = a.nnodes > 1 ? "run:" + run_name : transport::random_run_token();
  }

  std::unique_ptr<collector::Collector> collector;
  bool created_dir = false;
  std::uint16_t port = std::uint16_t(a.aggregator_port);
  if (owner) {
    if (const auto taken = holds_a_run(run_dir)) return fail(*taken);
    created_dir = !fs::exists(run_dir);
    collector::CollectorOptions o;
    o.bind_host = bind_host;
    o.port = port;
    o.token = token;
    o.run_dir = run_dir.string();
    o.run.run_name = run_name;
    o.run.world_size = world;
    o.run.strategy = model::strategy_from_string(
        !a.strategy.empty() ? a.strategy : (world > 1 ? "ddp" : "single_process"));
    o.window = a.window;
    o.interval_s = a.interval;
    try {
      collector = std::make_unique<collector::Collector>(o);
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    port = collector->port();
  }
  std::string connect_host = a.aggregator_host;
  if (connect_host.empty()) connect_host = owner && a.nnodes == 1 ? "127.0.0.1" : a.master_addr;
  if (owner && (bind_host == "127.0.0.1" || bind_host == "localhost")) connect_host = "127.0.0.1";

  auto& env = plan.extra_env;
  env.emplace_back(model::env::kDisabled, "0");
  env.emplace_back(model::env::kAggregatorHost, connect_host);
  env.emplace_back(model::env::kAggregatorPort, std::to_string(port));
  env.emplace_back(model::env::kRunToken, token);
  env.emplace_back(model::env::kSessionId, run_name);
  env.emplace_back(model::env::kLogsDir, a.logs_dir);
  env.emplace_back(model::env::kInterval, std::to_string(a.interval));
  env.emplace_back(model::env::kTraceMaxSteps,
                   a.trace_max_steps ? std::to_string(*a.trace_max_steps) : "");
  env.emplace_back(model::env::kNnodes, std::to_string(a.nnodes));
  env.emplace_back(model::env::kNprocPerNode, std::to_string(a.nproc_per_node));
  env.emplace_back(model::env::kNodeRank, std::to_string(a.node_rank));
  env.emplace_back(model::env::kExpectedWorldSize, std::to_string(world));
  if (!a.strategy.empty()) env.emplace_back(model::env::kStrategy, a.strategy);

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
  std::optional<LiveDisplay> display;
  if (a.mode != "summary" && collector) {
    display.emplace(*collector, run_name, world, ::isatty(STDOUT_FILENO) == 1);
    plan.output_hook = &*display;
  }
  launcher::LaunchOutcome outcome;
  // Held until the manifest is written: a hang-up or SIGTERM after the ranks
  // ended must not cost the run its summary (it is written in well under the
  // finalize timeout), and a closed terminal must not SIGPIPE us.
  std::optional<launcher::InterruptSignals> signals;
  try {
    signals.emplace();
    outcome = launcher::launch_and_wait(plan, *signals);
    if (display) display->end();
  } catch (const launcher::LaunchError& e) {
    if (display) display->end();
    if (collector) collector->finish(std::chrono::steady_clock::now());
    collector.reset();
    if (created_dir) {
      std::error_code ec;
      fs::remove_all(run_dir, ec);
    }
    return fail(e.what());
  }
  const double ended = unix_now();
  if (outcome.first_failed_rank) {
    std::cerr << "traceml: rank " << *outcome.first_failed_rank << " failed (exit code "
              << outcome.exit_code << "); the other ranks were stopped";
    for (const auto& rank : outcome.ranks)
      if (rank.global_rank == *outcome.first_failed_rank && !rank.log.empty())
        std::cerr << "; its output: " << (run_dir / rank.log).string();
    std::cerr << "\n";
  }
  if (!owner) return outcome.exit_code;

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(std::int64_t(a.finalize_timeout_sec * 1000));
  const RunEnd end = end_run(*collector, run_dir, a.window, deadline, a.nnodes > 1 ? world : 0,
                             outcome_of(outcome));
  collector.reset();
  launcher::ManifestInput m;
  m.run_name = run_name;
  m.command = a.command;
  m.plan = plan;
  m.started_at = started;
  m.ended_at = ended;
  m.outcome = outcome;
  m.status = status_of(outcome);
  m.collection = end.collected;
  m.records_dropped = end.records_dropped;
  m.artifacts = end.artifacts;
  for (const auto& rank : outcome.ranks) {
    if (rank.log.empty()) continue;
    m.artifacts.push_back(rank.log);
    if (rank.log_rotated) m.artifacts.push_back(rank.log + ".1");
  }
  write_manifest(run_dir, launcher::manifest_json(m));
  say_where(run_dir, end);
  for (int sig : signals->take()) {
    warn(std::string(strsignal(sig)) + " arrived after the ranks ended; the summary was " +
         "finished first");
  }
  return outcome.exit_code;
}

}  // namespace

void add_run_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Launch PROGRAM on N ranks (like torchrun), trace it, and write the run's diagnosis.");
  cmd->add_option("--nproc-per-node", a->nproc_per_node, "Ranks on this node")
      ->capture_default_str();
  cmd->add_option("--nnodes", a->nnodes, "Nodes in the job")->capture_default_str();
  cmd->add_option("--node-rank", a->node_rank, "This node's rank (0 hosts the collector)")
      ->capture_default_str();
  cmd->add_option("--master-addr", a->master_addr, "MASTER_ADDR given to the ranks")
      ->capture_default_str();
  cmd->add_option("--master-port", a->master_port,
                  "MASTER_PORT given to the ranks (0: a free port; default: a free port on one "
                  "node, 29500 with --nnodes > 1)");
  cmd->add_option("--run-name", a->run_name, "Run directory name (default PROGRAM_TIMESTAMP)");
  cmd->add_option("--logs-dir", a->logs_dir, "Where run directories go")->capture_default_str();
  cmd->add_option("--aggregator-port", a->aggregator_port,
                  "Collector TCP port (0: a free port; default: a free port on one node, 29765 "
                  "with --nnodes > 1)");
  cmd->add_option("--aggregator-host", a->aggregator_host,
                  "Address ranks connect to (default: --master-addr; 127.0.0.1 on one node)");
  cmd->add_option(
      "--aggregator-bind-host", a->aggregator_bind_host,
      "Address the collector binds (default 0.0.0.0 with --nnodes > 1, else 127.0.0.1)");
  cmd->add_option("--finalize-timeout-sec", a->finalize_timeout_sec,
                  "Longest wait for the last telemetry after the ranks ended")
      ->capture_default_str();
  cmd->add_option("--trace-max-steps", a->trace_max_steps, "Record only the first N steps");
  cmd->add_option("--interval", a->interval, "Sampler period, seconds")->capture_default_str();
  cmd->add_option("--grace-period-sec", a->grace_sec, "After SIGTERM, seconds before SIGKILL")
      ->capture_default_str();
  cmd->add_option("--summary-window-rows", a->window, "Latest aligned steps analysed per rank")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40))
      ->capture_default_str();
  cmd->add_option("--strategy", a->strategy,
                  "ddp, fsdp or single_process (default from world size)");
  cmd->add_option("--mode", a->mode,
                  "summary (the report at the end) or live (a live view while the run goes, "
                  "then the report; cli is the same)")
      ->capture_default_str();
  cmd->add_flag("--disable", a->disable, "Run untraced (no collector, tracing off in the ranks)");
  cmd->add_option("command", a->command, "-- PROGRAM [ARGS...]")->required();
  cmd->callback([a, cmd, &action] {
    // Under Slurm (`srun traceml run ...`, one launcher per node) the node
    // count and this node's rank come from Slurm unless given.
    std::string problem;
    if (cmd->count("--nnodes") == 0) {
      if (const auto n = slurm_int("SLURM_NNODES", 1, problem)) a->nnodes = *n;
    }
    if (cmd->count("--node-rank") == 0) {
      if (const auto n = slurm_int("SLURM_NODEID", 0, problem)) a->node_rank = *n;
    }
    // One node: ports nobody gave are free ones (0), picked when the run
    // starts. Several nodes keep the fixed defaults every node knows.
    if (a->nnodes == 1) {
      if (cmd->count("--master-port") == 0) a->master_port = 0;
      if (cmd->count("--aggregator-port") == 0) a->aggregator_port = 0;
    }
    action.check = [a, problem]() -> std::optional<std::string> {
      if (!problem.empty()) return problem;
      return validate(*a);
    };
    action.run = [a] { return run(*a); };
  });
}

}  // namespace traceml::cli
