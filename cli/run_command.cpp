// traceml run [options] -- PROGRAM [ARGS...]: a torchrun for C++ binaries that
// also hosts the collector (node 0) and writes the run's diagnosis at the end.
// Here: the options, their checks and defaults; the run is
// launcher::host_launched_run (launcher/hosted_run.hpp).
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

#include "commands.hpp"
#include "hosted_options.hpp"
#include "launcher/free_port.hpp"
#include "launcher/hosted_run.hpp"
#include "launcher/program_path.hpp"
#include "model/env_contract.hpp"
#include "model/env_values.hpp"
#include "model/text.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "page_limits.hpp"
#include "runtime/config.hpp"
#include "transport/hello.hpp"

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
  HostedArgs hosted;  ///< --run-name, --logs-dir, --interval and the report's
  int aggregator_port = kMultiNodeAggregatorPort;
  std::string aggregator_host;
  std::string aggregator_bind_host;
  double finalize_timeout_sec = 60.0;
  std::optional<std::int64_t> trace_max_steps;
  double grace_sec = 5.0;
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
        out_of_range("--grace-period-sec", a.grace_sec, 0, kMaxGraceSec, " seconds")}) {
    if (problem) return problem;
  }
  if (a.trace_max_steps) {
    if (auto p = out_of_range("--trace-max-steps", double(*a.trace_max_steps), 1,
                              double(kMaxTraceSteps)))
      return p;
  }
  if (auto problem = hosted_problem(a.hosted)) return problem;
  std::string why;
  const std::string& profile_steps = a.hosted.profile_steps;
  if (!profile_steps.empty()) {
    const auto steps = model::parse_profile_steps(profile_steps, why);
    if (a.trace_max_steps && steps && steps->last > *a.trace_max_steps)
      return "--profile-steps " + profile_steps + " ends after --trace-max-steps " +
             std::to_string(*a.trace_max_steps) + ", where traceml stops recording";
  }
  if (!a.hosted.profile_ranks.empty()) {
    const auto ranks = model::parse_profile_ranks(a.hosted.profile_ranks, why);
    const std::int64_t world = std::int64_t(a.nnodes) * a.nproc_per_node;
    if (ranks && !ranks->empty() && ranks->back() >= world)
      return "--profile-ranks names rank " + std::to_string(ranks->back()) +
             ", outside the run's " + std::to_string(world) + " ranks (0 to " +
             std::to_string(world - 1) + ")";
  }
  if (std::int64_t(a.nnodes) * a.nproc_per_node > runtime::kMaxWorldSize)
    return "--nnodes x --nproc-per-node must be at most " + std::to_string(runtime::kMaxWorldSize) +
           " ranks (got " + std::to_string(a.nnodes) + " x " + std::to_string(a.nproc_per_node) +
           ")";
  if (a.node_rank >= a.nnodes) return "--node-rank must be less than --nnodes";
  if (const int m = a.hosted.metrics_port.value_or(0); m != 0) {
    for (const auto& [flag, port] : {std::pair<const char*, int>{"--master-port", a.master_port},
                                     {"--aggregator-port", a.aggregator_port}})
      if (m == port)
        return "--metrics-port " + std::to_string(m) + " is the " + flag +
               " too; give the metrics another port (0: a free one)";
  }
  if (a.master_addr.empty()) return "--master-addr cannot be empty";
  if (a.nnodes > 1) {
    if (a.hosted.run_name.empty())
      return "--run-name is required when --nnodes > 1 so every node writes into the same run";
    if (a.aggregator_port == 0)
      return "--aggregator-port 0 (pick a free port) works only with --nnodes 1: other nodes must "
             "know the port; give a fixed one";
    if (a.master_port == 0) return "--master-port 0 works only with --nnodes 1; give a fixed port";
  }
  if (!a.disable) return unwritable_run_dir(a.hosted.logs_dir, a.hosted.run_name);
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
  // A rank prints to a terminal where traceml does: its lines come as it
  // prints them and none waits in its buffer when a Ctrl-C ends it.
  p.terminal = launcher::terminal_like_launcher();
  return p;
}

/// The run token: TRACEML_RUN_TOKEN, else one every rank of this run knows
/// and other programs do not. Nodes other than 0 cannot be told a random one,
/// so a multi-node run derives it from the run name, which anyone who knows
/// the name can compute: it says so, and how to set one. Sets `problem`.
std::string run_token(const RunArgs& a, const std::string& run_name, std::string& problem) {
  if (auto token = run_token_from_environment(problem)) return *token;
  if (!problem.empty() || a.nnodes <= 1) return transport::random_run_token();
  warn(std::string("no ") + model::env::kRunToken +
       ": this multi-node run's token comes from its name, which anyone who can reach the "
       "collector's port and knows the name can compute; set the same random one on every node, "
       "e.g. export " +
       model::env::kRunToken + "=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n')");
  return "run:" + run_name;
}

int run(const RunArgs& a) {
  launcher::LaunchedRunOptions o;
  o.host = host_options_of(a.hosted);
  o.plan = plan_of(a);
  if (a.master_port == 0) {
    // Free now, and not the one the metrics endpoint is about to take.
    std::optional<std::uint16_t> port;
    for (int tries = 0; tries < 8 && (!port || *port == a.hosted.metrics_port); ++tries)
      port = launcher::pick_free_port();
    if (!port || *port == a.hosted.metrics_port)
      return fail("could not find a free --master-port; give one");
    o.plan.master_port = *port;
  }
  try {
    if (a.disable) {
      if (a.hosted.metrics_port)
        std::cerr << "traceml: --metrics-port: nothing to serve with --disable (no collector)\n";
      return launcher::launch_untraced(o.plan);
    }
    // A typo in PROGRAM is reported before any run directory or collector exists.
    launcher::resolve_program(a.command.front());
    const std::string program = fs::path(a.command.front()).filename().string();
    o.host.run_dir = launcher::run_dir_for(a.hosted.logs_dir, a.hosted.run_name, program);
    std::string problem;
    o.host.token = run_token(a, o.host.run_dir.filename().string(), problem);
    if (!problem.empty()) return fail(problem);
    o.host.bind_host = !a.aggregator_bind_host.empty() ? a.aggregator_bind_host
                       : a.nnodes > 1                  ? "0.0.0.0"
                                                       : "127.0.0.1";
    o.host.port = std::uint16_t(a.aggregator_port);
    o.logs_dir = a.hosted.logs_dir;
    o.connect_host = a.aggregator_host;
    o.trace_max_steps = a.trace_max_steps;
    o.profile_steps = a.hosted.profile_steps;
    o.profile_ranks = a.hosted.profile_ranks;
    // --profile-steps goes to the ranks by their environment; auto is the collector's.
    o.host.profile_asking = profile_asking_of(a.hosted, false);
    o.finalize_timeout_s = a.finalize_timeout_sec;
    // Node 0 hosts the collector, and so the metrics; the others' traceml
    // only launch their ranks (the same command line on every node is fine).
    std::unique_ptr<metrics::MetricsEndpoint> endpoint;
    if (a.node_rank == 0)
      endpoint = start_metrics(a.hosted, o.host);
    else if (a.hosted.metrics_port)
      std::cerr << "traceml: --metrics-port: node 0's traceml serves the metrics (it hosts the "
                   "collector); nothing here\n";
    const int code = launcher::host_launched_run(std::move(o));
    keep_serving_until_exit(std::move(endpoint));
    return code;
  } catch (const metrics::MetricsError& e) {
    return fail(e.what());
  } catch (const launcher::LaunchError& e) {
    return fail(e.what());
  } catch (const launcher::HostError& e) {
    return fail(e.what());
  }
}

}  // namespace

/// What run says about the options it shares with serve.
constexpr HostedHelp kHostedHelp{
    "--run-name", "Run directory name (default PROGRAM_TIMESTAMP)", "Sampler period, seconds",
    "ddp, fsdp or single_process (default from world size)",
    "summary (the report at the end) or live (a live view while the run goes, then the report; "
    "cli is the same)"};

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
  add_run_dir_options(cmd, a->hosted, kHostedHelp);
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
  add_profile_options(cmd, a->hosted);
  add_interval_option(cmd, a->hosted, kHostedHelp);
  cmd->add_option("--grace-period-sec", a->grace_sec, "After SIGTERM, seconds before SIGKILL")
      ->capture_default_str();
  add_report_options(cmd, a->hosted, kHostedHelp);
  add_metrics_options(cmd, a->hosted);
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
    // The page's limits, read once; an untraced run draws no page.
    const PageLimitsRead page = read_page_limits();
    a->hosted.page_limits = page.limits;
    action.check = [a, problem, page]() -> std::optional<std::string> {
      if (!problem.empty()) return problem;
      if (auto p = validate(*a)) return p;
      if (!a->disable) return page.problem;
      return std::nullopt;
    };
    action.run = [a] { return run(*a); };
  });
}

}  // namespace traceml::cli
