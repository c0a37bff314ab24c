// traceml serve: the collector in the foreground for ranks that something else
// starts (torchrun --no-python, srun, mpirun, a job controller). Ranks find it
// through TRACEML_AGGREGATOR_HOST/PORT; the run ends when its world of ranks
// has said goodbye, when they all went quiet (--idle-timeout), or on
// SIGINT/SIGTERM, and always with the summary a `traceml run` writes.
// Here: the options, their checks and the run token; the run is
// launcher::host_served_run (launcher/hosted_run.hpp).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.hpp"
#include "hosted_options.hpp"
#include "launcher/hosted_run.hpp"
#include "model/env_contract.hpp"
#include "model/env_values.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "page_limits.hpp"
#include "runtime/config.hpp"
#include "transport/hello.hpp"

namespace traceml::cli {

namespace {

namespace fs = std::filesystem;

/// TraceML's default collector port: a fixed one, so that a job script can
/// name it on every node before the collector runs.
constexpr int kDefaultPort = 29765;

/// The most a token file may hold.
constexpr std::uintmax_t kMaxTokenFileBytes = 64 * 1024;

constexpr double kMaxIdleTimeoutSec = 30.0 * 86400.0;

struct ServeArgs {
  int port = kDefaultPort;
  std::string bind_host = "127.0.0.1";
  std::string connect_host;
  HostedArgs hosted;  ///< --run-name, --logs-dir, --interval and the report's
  std::optional<int> world_size;
  double idle_timeout_sec = 300.0;
  std::string token_file;
  std::string env_file;
};

std::optional<std::string> validate(const ServeArgs& a) {
  for (const auto& problem :
       {out_of_range("--port", a.port, 0, 65535),
        out_of_range("--world-size", a.world_size.value_or(1), 1, double(runtime::kMaxWorldSize)),
        out_of_range("--idle-timeout", a.idle_timeout_sec, 0, kMaxIdleTimeoutSec, " seconds")}) {
    if (problem) return problem;
  }
  if (auto problem = hosted_problem(a.hosted)) return problem;
  if (a.world_size && !a.hosted.profile_ranks.empty()) {
    std::string why;
    const auto ranks = model::parse_profile_ranks(a.hosted.profile_ranks, why);
    if (ranks && !ranks->empty() && ranks->back() >= *a.world_size)
      return "--profile-ranks names rank " + std::to_string(ranks->back()) +
             ", outside --world-size " + std::to_string(*a.world_size);
  }
  if (a.hosted.metrics_port.value_or(0) != 0 && *a.hosted.metrics_port == a.port)
    return "--metrics-port " + std::to_string(a.port) +
           " is the --port too; give the metrics another port (0: a free one)";
  if (a.bind_host.empty()) return "--bind-host cannot be empty";
  if (auto why = unwritable_file("--env-file", a.env_file, false)) return why;
  return unwritable_run_dir(a.hosted.logs_dir, a.hosted.run_name);
}

/// The run token from --token-file (its first line), else TRACEML_RUN_TOKEN,
/// else none (any rank that can reach the port is taken). Sets `problem`.
std::string read_token(const ServeArgs& a, std::string& problem) {
  if (!a.token_file.empty()) {
    std::error_code ec;
    const auto size = fs::file_size(a.token_file, ec);
    if (ec) {
      problem = "cannot read --token-file " + a.token_file + ": " + ec.message();
      return "";
    }
    if (size > kMaxTokenFileBytes) {
      problem = "--token-file " + a.token_file + " is " + std::to_string(size) +
                " bytes; a token file holds one line (at most " +
                std::to_string(transport::kMaxStringBytes) + " bytes)";
      return "";
    }
    std::ifstream in(a.token_file, std::ios::binary);
    std::string token;
    if (!in || !std::getline(in, token)) {
      problem = "cannot read --token-file " + a.token_file + " (or it is empty)";
      return "";
    }
    if (!token.empty() && token.back() == '\r') token.pop_back();
    if (const auto bad = model::token_problem(token))
      problem = "the token in " + a.token_file + " " + *bad;
    return token;
  }
  return run_token_from_environment(problem).value_or("");
}

int serve(const ServeArgs& a) {
  launcher::ServedRunOptions o;
  o.host = host_options_of(a.hosted);
  // The ranks torchrun, srun or mpirun start are asked over their connection.
  o.host.profile_asking = profile_asking_of(a.hosted, true);
  std::string problem;
  o.host.token = read_token(a, problem);
  if (!problem.empty()) return fail(problem);
  o.host.run_dir = launcher::run_dir_for(a.hosted.logs_dir, a.hosted.run_name, "serve");
  o.host.bind_host = a.bind_host;
  // No open door: a collector that other machines can reach takes only the
  // ranks that present the run's token, one it makes when given none.
  if (o.host.token.empty() && !launcher::loopback(o.host.bind_host)) {
    o.host.token = transport::random_run_token();
    o.token_made = true;
  }
  o.host.port = std::uint16_t(a.port);
  o.world_size = a.world_size;
  o.connect_host = a.connect_host;
  o.idle_timeout_s = a.idle_timeout_sec;
  o.env_file = a.env_file;
  o.token_file = a.token_file;
  try {
    std::unique_ptr<metrics::MetricsEndpoint> endpoint = start_metrics(a.hosted, o.host);
    const int code = launcher::host_served_run(o);
    keep_serving_until_exit(std::move(endpoint));
    return code;
  } catch (const metrics::MetricsError& e) {
    return fail(e.what());
  } catch (const launcher::HostError& e) {
    return fail(e.what());
  }
}

}  // namespace

/// What serve says about the options it shares with run.
constexpr HostedHelp kHostedHelp{
    "--run-name,--session-id", "Run directory name (default serve_TIMESTAMP)",
    "The ranks' sampler period, seconds (stall rules)",
    "ddp, fsdp or single_process (default ddp, or from --world-size 1)",
    "summary (the report at the end) or live (a live view while the run goes)"};

void add_serve_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Host the collector for ranks started by another launcher (torchrun, srun, mpirun); "
      "write the run's diagnosis when they end.");
  cmd->add_option("--port,--aggregator-port", a->port,
                  "TCP port the ranks connect to (0: a free port, printed)")
      ->capture_default_str();
  cmd->add_option("--bind-host,--aggregator-bind-host", a->bind_host,
                  "Address to listen on (0.0.0.0: every interface, for ranks on other nodes)")
      ->capture_default_str();
  cmd->add_option("--aggregator-host", a->connect_host,
                  "Address the ranks are told to connect to (default: --bind-host, or this "
                  "machine's name when it binds every interface)");
  add_run_dir_options(cmd, a->hosted, kHostedHelp);
  cmd->add_option("--world-size", a->world_size,
                  "Ranks in the job: the run ends when all have said goodbye (default: the "
                  "WORLD_SIZE the first rank reports)");
  cmd->add_option("--idle-timeout", a->idle_timeout_sec,
                  "End the run when nothing arrived from any rank for this many seconds once one "
                  "connected (0: never)")
      ->capture_default_str();
  cmd->add_option("--token-file", a->token_file,
                  "File whose first line is the run token ranks must present (default: "
                  "TRACEML_RUN_TOKEN, else none)");
  cmd->add_option("--env-file", a->env_file,
                  "Also write TRACEML_AGGREGATOR_HOST/PORT to this file (for job scripts)");
  add_interval_option(cmd, a->hosted, kHostedHelp);
  add_report_options(cmd, a->hosted, kHostedHelp);
  add_profile_options(cmd, a->hosted);
  add_metrics_options(cmd, a->hosted);
  cmd->callback([a, &action] {
    const PageLimitsRead page = read_page_limits();
    a->hosted.page_limits = page.limits;
    action.check = [a, page]() -> std::optional<std::string> {
      if (auto p = validate(*a)) return p;
      return page.problem;
    };
    action.run = [a] { return serve(*a); };
  });
}

}  // namespace traceml::cli
