// The options `traceml run` and `traceml serve` share: they both host a run
// (launcher/hosted_run.hpp), so the run directory, the sampler period the
// stall rules assume, the diagnosis window, the strategy and the live view
// are registered, checked and handed to the host here, once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "launcher/hosted_run.hpp"
#include "metrics/metrics_endpoint.hpp"
#include "report/html/page_process.hpp"

namespace traceml::cli {

struct HostedArgs {
  std::string run_name;
  std::string logs_dir = "./logs";
  double interval = 1.0;
  std::int64_t window = 10000;
  std::string strategy;
  std::string mode = "summary";
  /// TRACEML_PAGE_TIMEOUT_S and TRACEML_PAGE_MEMORY_MB (cli/page_limits.hpp).
  report::PageLimits page_limits;
  std::string profile_steps;               ///< "A:B"; empty: no profile
  std::string profile_ranks;               ///< "all" or "0,3"; empty: all
  std::string profile;                     ///< "auto" or "auto:N"; empty: off
  std::optional<int> metrics_port;         ///< --metrics-port (0: a free one); none: no endpoint
  std::string metrics_bind = "127.0.0.1";  ///< --metrics-bind
};

/// What each command says about the shared options: their help differs
/// where the commands differ (where a name comes from, what --mode shows).
struct HostedHelp {
  const char* run_name_flags;  ///< "--run-name", or with an alias
  const char* run_name;
  const char* interval;
  const char* strategy;
  const char* mode;
};

/// --run-name and --logs-dir.
void add_run_dir_options(CLI::App* cmd, HostedArgs& a, const HostedHelp& help);
/// --interval.
void add_interval_option(CLI::App* cmd, HostedArgs& a, const HostedHelp& help);
/// --summary-window-rows, --strategy and --mode.
void add_report_options(CLI::App* cmd, HostedArgs& a, const HostedHelp& help);

/// --profile-steps, --profile-ranks and --profile.
void add_profile_options(CLI::App* cmd, HostedArgs& a);

/// --metrics-port and --metrics-bind.
void add_metrics_options(CLI::App* cmd, HostedArgs& a);

/// The checks of the shared options but the run directory's (a command
/// checks that last, and `run --disable` writes none); a message, or none.
std::optional<std::string> hosted_problem(const HostedArgs& a);

/// TRACEML_RUN_TOKEN, read for both commands with one message: the value
/// when it is set and not empty, else std::nullopt. An unusable value sets
/// `problem` ("TRACEML_RUN_TOKEN is 2000 bytes; ...; fix or unset it").
std::optional<std::string> run_token_from_environment(std::string& problem);

/// What the collector asks of the ranks' profilers from --profile-steps,
/// --profile-ranks (when `by_request`: serve's; run's go to the ranks by
/// their environment) and --profile; the options checked before.
collector::ProfileAsking profile_asking_of(const HostedArgs& a, bool by_request);

/// Starts the metrics endpoint when --metrics-port asks for one, before the
/// run: a port in use throws metrics::MetricsError here, when nothing of the
/// run exists yet. Gives
/// `host` the channel the collector publishes its snapshots to, and the
/// line that says where the metrics are, once the run has started. Null
/// when none was asked.
std::unique_ptr<metrics::MetricsEndpoint> start_metrics(const HostedArgs& a,
                                                        launcher::HostOptions& host);

/// The run has ended: the endpoint answers (with the run's last snapshot)
/// until the process exits, instead of stopping here (civetweb's stop
/// costs 2 s once a client came: launcher::keep_until_exit).
void keep_serving_until_exit(std::unique_ptr<metrics::MetricsEndpoint> endpoint);

/// The host's options from the shared ones; the run directory, the address
/// and the token are the command's.
launcher::HostOptions host_options_of(const HostedArgs& a);

}  // namespace traceml::cli
