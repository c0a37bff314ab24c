#include "hosted_options.hpp"

#include <cstdlib>
#include <iostream>

#include "launcher/run_end.hpp"
#include "model/env_contract.hpp"
#include "model/env_values.hpp"
#include "option_checks.hpp"
#include "runtime/config.hpp"
#include "traceml/version.hpp"

namespace traceml::cli {

void add_run_dir_options(CLI::App* cmd, HostedArgs& a, const HostedHelp& help) {
  cmd->add_option(help.run_name_flags, a.run_name, help.run_name);
  cmd->add_option("--logs-dir", a.logs_dir, "Where run directories go")->capture_default_str();
}

void add_interval_option(CLI::App* cmd, HostedArgs& a, const HostedHelp& help) {
  cmd->add_option("--interval", a.interval, help.interval)->capture_default_str();
}

void add_report_options(CLI::App* cmd, HostedArgs& a, const HostedHelp& help) {
  cmd->add_option("--summary-window-rows", a.window, "Latest aligned steps analysed per rank")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40))
      ->capture_default_str();
  cmd->add_option("--strategy", a.strategy, help.strategy);
  cmd->add_option("--mode", a.mode, help.mode)->capture_default_str();
}

void add_profile_options(CLI::App* cmd, HostedArgs& a) {
  cmd->add_option("--profile-steps", a.profile_steps,
                  "A:B: LibTorch's profiler on for steps A to B of each rank; the run directory "
                  "gets profiles/rank<R>_steps<A>-<B>.json (docs/profiling.md)");
  cmd->add_option("--profile-ranks", a.profile_ranks,
                  "Ranks that profile with --profile-steps: 'all' (default) or 0,3,...");
  cmd->add_option("--profile", a.profile,
                  "auto[:N]: when a rank's steps turn slow, or it resumes after a stall, ask it "
                  "for a profile of its next N steps (default 10); at most once a rank every 5 "
                  "minutes, 16 a run (docs/profiling.md)");
}

void add_metrics_options(CLI::App* cmd, HostedArgs& a) {
  cmd->add_option("--metrics-port", a.metrics_port,
                  "Serve the run's live metrics for Prometheus on this port, GET /metrics (0: a "
                  "free port, printed); docs/metrics.md");
  cmd->add_option("--metrics-bind", a.metrics_bind,
                  "Address the metrics endpoint listens on (0.0.0.0: every interface, for a "
                  "Prometheus on another machine)")
      ->capture_default_str();
}

std::optional<std::string> hosted_problem(const HostedArgs& a) {
  for (const auto& problem :
       {out_of_range("--interval", a.interval, runtime::kMinIntervalSec, runtime::kMaxIntervalSec,
                     " seconds"),
        bad_mode(a.mode), bad_name("--run-name", a.run_name, model::run_name_problem),
        bad_name("--strategy", a.strategy, model::strategy_problem)})
    if (problem) return problem;
  std::string why;
  if (!a.profile_steps.empty() && !model::parse_profile_steps(a.profile_steps, why))
    return "--profile-steps " + why;
  if (!a.profile_ranks.empty()) {
    if (a.profile_steps.empty()) return "--profile-ranks needs --profile-steps A:B";
    if (!model::parse_profile_ranks(a.profile_ranks, why)) return "--profile-ranks " + why;
  }
  if (!a.profile.empty() && !model::parse_profile_auto(a.profile, why)) return "--profile " + why;
  if (a.metrics_port) {
    if (auto p = out_of_range("--metrics-port", *a.metrics_port, 0, 65535)) return p;
    if (auto p = metrics::bind_problem(a.metrics_bind)) return p;
  } else if (a.metrics_bind != HostedArgs{}.metrics_bind) {
    return "--metrics-bind needs --metrics-port P (0: a free port)";
  }
  return std::nullopt;
}

std::unique_ptr<metrics::MetricsEndpoint> start_metrics(const HostedArgs& a,
                                                        launcher::HostOptions& host) {
  if (!a.metrics_port) return nullptr;
  host.snapshots = std::make_shared<collector::SnapshotChannel>();
  auto endpoint = std::make_unique<metrics::MetricsEndpoint>(
      a.metrics_bind, std::uint16_t(*a.metrics_port), host.snapshots,
      metrics::RunLabels{host.run_dir.filename().string(), traceml::version()});
  // Said once the run has started: an error before it stays one line.
  host.on_started = [url = endpoint->url()] {
    std::cerr << "traceml: metrics for Prometheus at " << url << "\n";
  };
  return endpoint;
}

collector::ProfileAsking profile_asking_of(const HostedArgs& a, bool by_request) {
  collector::ProfileAsking asking;
  std::string why;
  if (by_request && !a.profile_steps.empty()) {
    if (const auto steps = model::parse_profile_steps(a.profile_steps, why))
      asking.steps = std::make_pair(steps->first, steps->last);
    if (!a.profile_ranks.empty())
      asking.ranks = model::parse_profile_ranks(a.profile_ranks, why).value_or(std::vector<int>{});
  }
  if (!a.profile.empty()) asking.auto_steps = model::parse_profile_auto(a.profile, why).value_or(0);
  return asking;
}

std::optional<std::string> run_token_from_environment(std::string& problem) {
  const char* env = std::getenv(model::env::kRunToken);
  if (env == nullptr || *env == '\0') return std::nullopt;
  if (const auto why = model::token_problem(env))
    problem = std::string(model::env::kRunToken) + " " + *why + "; fix or unset it";
  return std::string(env);
}

void keep_serving_until_exit(std::unique_ptr<metrics::MetricsEndpoint> endpoint) {
  if (endpoint) launcher::keep_until_exit(std::shared_ptr<const void>(std::move(endpoint)));
}

launcher::HostOptions host_options_of(const HostedArgs& a) {
  launcher::HostOptions o;
  o.strategy = a.strategy;
  o.window = a.window;
  o.interval_s = a.interval;
  o.live = a.mode != "summary";
  o.page_limits = a.page_limits;
  o.process_ends_with_run = true;  // the command returns to main() after the run
  return o;
}

}  // namespace traceml::cli
