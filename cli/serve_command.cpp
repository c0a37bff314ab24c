// traceml serve: the collector in the foreground for ranks that something else
// starts (torchrun --no-python, srun, mpirun, a job controller). Ranks find it
// through TRACEML_AGGREGATOR_HOST/PORT; the run ends when its world of ranks
// has said goodbye, when they all went quiet (--idle-timeout), or on
// SIGINT/SIGTERM, and always with the summary a `traceml run` writes.
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "collector/collector.hpp"
#include "commands.hpp"
#include "launcher/interrupt_signals.hpp"
#include "launcher/manifest.hpp"
#include "live_display.hpp"
#include "model/env_contract.hpp"
#include "model/env_values.hpp"
#include "model/text.hpp"
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "report/atomic_file.hpp"
#include "run_end.hpp"
#include "runtime/config.hpp"
#include "store/run_db.hpp"
#include "store/run_dir.hpp"
#include "transport/hello.hpp"

namespace traceml::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

/// TraceML's default collector port: a fixed one, so that a job script can
/// name it on every node before the collector runs.
constexpr int kDefaultPort = 29765;

/// A rank whose connection closed without a goodbye may be reconnecting (its
/// sender retries with a backoff of at most 5 s): the run waits this long
/// for it before counting it as lost.
constexpr double kReconnectGraceSec = 10.0;

/// How long the end of a run waits for telemetry still in flight when it
/// was ended by a signal or by --idle-timeout (a world that ended has none).
constexpr auto kFlushWait = std::chrono::seconds(2);

/// How often the loop looks at the collection (and the live view ticks).
constexpr int kPollMs = 200;

/// Ranks named one by one as they connect; past this, only counts.
constexpr int kRanksNamed = 32;

/// Ranks of the world listed as never connected in the manifest, at most.
constexpr int kMaxNeverConnectedListed = 4096;

/// The most a token file may hold.
constexpr std::uintmax_t kMaxTokenFileBytes = 64 * 1024;

constexpr double kMaxIdleTimeoutSec = 30.0 * 86400.0;

struct ServeArgs {
  int port = kDefaultPort;
  std::string bind_host = "127.0.0.1";
  std::string connect_host;
  std::string run_name;
  std::string logs_dir = "./logs";
  std::optional<int> world_size;
  double idle_timeout_sec = 300.0;
  std::string token_file;
  std::string env_file;
  double interval = 1.0;
  std::int64_t window = 10000;
  std::string strategy;
  std::string mode = "summary";
};

std::optional<std::string> validate(const ServeArgs& a) {
  for (const auto& problem :
       {out_of_range("--port", a.port, 0, 65535),
        out_of_range("--world-size", a.world_size.value_or(1), 1, double(runtime::kMaxWorldSize)),
        out_of_range("--idle-timeout", a.idle_timeout_sec, 0, kMaxIdleTimeoutSec, " seconds"),
        out_of_range("--interval", a.interval, runtime::kMinIntervalSec, runtime::kMaxIntervalSec,
                     " seconds")}) {
    if (problem) return problem;
  }
  for (const auto& problem :
       {bad_mode(a.mode), bad_name("--run-name", a.run_name, model::run_name_problem),
        bad_name("--strategy", a.strategy, model::strategy_problem)})
    if (problem) return problem;
  if (a.bind_host.empty()) return "--bind-host cannot be empty";
  if (auto why = unwritable_file("--env-file", a.env_file, false)) return why;
  return unwritable_run_dir(a.logs_dir, a.run_name);
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
  const char* env = std::getenv(model::env::kRunToken);
  if (env == nullptr || *env == '\0') return "";
  const std::string token = env;
  if (const auto bad = model::token_problem(token))
    problem = std::string(model::env::kRunToken) + " " + *bad + "; fix or unset it";
  return token;
}

/// `v` as one shell word.
std::string shell_word(const std::string& v) {
  if (!v.empty() && std::regex_match(v, std::regex("^[A-Za-z0-9_./:@%+=,-]+$"))) return v;
  std::string out = "'";
  for (const char c : v)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string this_host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "127.0.0.1";
  return buf;
}

bool binds_everywhere(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host == "[::]";
}

/// Decides when the run has ended, from the collector's progress, and says
/// on stderr (or above the live view) what a user waiting for ranks wants to
/// know: who connected, who went away without a goodbye, what was refused.
class Watch {
 public:
  Watch(collector::Collector& c, std::optional<int> world, LiveDisplay* display)
      : collector_(c), given_world_(world), display_(display) {}

  /// True when every rank of the world has ended (a rank that left without
  /// a goodbye, after kReconnectGraceSec).
  bool world_ended() const {
    const auto w = world();
    if (!w || *w <= 0) return false;
    int ended = 0;  // ranks 0..w-1 that have ended
    for (const collector::RankProgress& r : p_.ranks) {
      if (r.open) return false;
      if (!r.said_bye && r.closed_s < kReconnectGraceSec) return false;
      if (r.global_rank < *w) ++ended;
    }
    return ended == *w;
  }
  bool quiet_for(double seconds) const {
    return seconds > 0 && p_.quiet_s && *p_.quiet_s >= seconds;
  }
  std::optional<int> world() const { return p_.world_size ? p_.world_size : given_world_; }
  const collector::Progress& progress() const { return p_; }

  void poll() {
    p_ = collector_.progress();
    for (const collector::Refusal& r : p_.first_refusals) {
      if (!told_refusals_.insert(r.kind).second) continue;
      std::string line = "refused a connection from " + r.peer + ": " + r.reason;
      if (r.kind == "wrong_token")
        line += " (ranks need this run's " + std::string(model::env::kRunToken) + ")";
      say("traceml: warning: " + model::escape_for_terminal(line, true));
    }
    const auto w = world();
    const std::string of = w ? " of " + std::to_string(*w) : "";
    for (const collector::RankProgress& r : p_.ranks) {
      const bool named = told_connected_.size() < std::size_t(kRanksNamed);
      if (told_connected_.insert(r.global_rank).second && named)
        say("traceml: rank " + std::to_string(r.global_rank) + " connected (" +
            std::to_string(told_connected_.size()) + of + ")");
      if (r.open) {
        told_ended_.erase(r.global_rank);
        continue;
      }
      if (!told_ended_.insert(r.global_rank).second) continue;
      if (!r.said_bye) {
        say("traceml: warning: rank " + std::to_string(r.global_rank) +
            " closed its connection without a goodbye (crashed or killed?)");
      } else if (named) {
        say("traceml: rank " + std::to_string(r.global_rank) + " ended (" +
            std::to_string(told_ended_.size()) + of + ")");
      }
    }
    if (w && !told_all_ && int(told_connected_.size()) >= *w) {
      told_all_ = true;
      if (*w > kRanksNamed) say("traceml: all " + std::to_string(*w) + " ranks connected");
    }
  }

  void say(const std::string& line) {
    if (display_ != nullptr && display_->line(true, line + "\n")) return;
    std::cerr << line << "\n" << std::flush;
  }

  /// How each rank of the world ended, as far as the collector saw it.
  std::vector<launcher::ServedRank> ranks() const {
    std::vector<launcher::ServedRank> out;
    std::set<int> seen;
    for (const collector::RankProgress& r : p_.ranks) {
      seen.insert(r.global_rank);
      out.push_back({r.global_rank, r.open       ? "still_connected"
                                    : r.said_bye ? "goodbye"
                                                 : "connection_lost"});
    }
    const int w = world().value_or(0);
    for (int rank = 0; rank < w && rank < kMaxNeverConnectedListed; ++rank)
      if (!seen.count(rank)) out.push_back({rank, "never_connected"});
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.global_rank < b.global_rank; });
    return out;
  }

 private:
  collector::Collector& collector_;
  std::optional<int> given_world_;
  LiveDisplay* display_;
  collector::Progress p_;
  std::set<std::string> told_refusals_;
  std::set<int> told_connected_;
  std::set<int> told_ended_;
  bool told_all_ = false;
};

int serve(const ServeArgs& a) {
  std::string problem;
  const std::string token = read_token(a, problem);
  if (!problem.empty()) return fail(problem);

  const fs::path run_dir =
      a.run_name.empty() ? store::first_free_run_dir(
                               a.logs_dir, store::default_run_name("serve", std::time(nullptr)))
                         : fs::path(a.logs_dir) / a.run_name;
  const std::string run_name = run_dir.filename().string();
  if (const auto taken = holds_a_run(run_dir)) return fail(*taken);
  const bool created_dir = !fs::exists(run_dir);
  collector::CollectorOptions o;
  o.bind_host = a.bind_host;
  o.port = std::uint16_t(a.port);
  o.token = token;
  o.run_dir = run_dir.string();
  o.run.run_name = run_name;
  o.run.world_size = a.world_size;
  o.run.strategy = model::strategy_from_string(
      !a.strategy.empty() ? a.strategy : (a.world_size == 1 ? "single_process" : "ddp"));
  o.window = a.window;
  o.interval_s = a.interval;
  // Signals are caught before the collector listens: from the moment a rank
  // can connect, Ctrl+C ends the run with its summary.
  std::optional<launcher::InterruptSignals> signals;
  try {
    signals.emplace();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  std::unique_ptr<collector::Collector> collector;
  try {
    collector = std::make_unique<collector::Collector>(o);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  const std::uint16_t port = collector->port();
  const std::string host = !a.connect_host.empty()         ? a.connect_host
                           : binds_everywhere(a.bind_host) ? this_host_name()
                                                           : a.bind_host;
  if (!a.env_file.empty()) {
    try {
      report::write_file_atomic(
          a.env_file, std::string(model::env::kAggregatorHost) + "=" + shell_word(host) + "\n" +
                          model::env::kAggregatorPort + "=" + std::to_string(port) + "\n");
    } catch (const std::exception& e) {
      collector->finish(Clock::now());
      collector.reset();
      // Only what this command created goes: a directory that was there
      // keeps what it held.
      std::error_code ec;
      if (created_dir) {
        fs::remove_all(run_dir, ec);
      } else {
        for (const char* suffix : {"", "-wal", "-shm"})
          fs::remove(run_dir / (std::string(store::kRunDbFileName) + suffix), ec);
      }
      return fail(std::string("cannot write --env-file: ") + e.what());
    }
  }
  const double started = unix_now();
  std::cerr << "traceml: serving run " << run_name << " on " << a.bind_host << ":" << port
            << " into " << run_dir.string() << "; waiting for "
            << (a.world_size ? std::to_string(*a.world_size) + " rank(s)" : std::string("ranks"))
            << ". Ctrl+C ends the run and writes its summary.\n";
  std::string paste = "export " + std::string(model::env::kAggregatorHost) + "=" +
                      shell_word(host) + " " + model::env::kAggregatorPort + "=" +
                      std::to_string(port);
  if (!token.empty())
    paste += std::string(" ") + model::env::kRunToken + "=" +
             (a.token_file.empty()
                  ? "\"$" + std::string(model::env::kRunToken) + "\""
                  : "\"$(cat " + shell_word(fs::absolute(a.token_file).string()) + ")\"");
  std::cerr << "traceml: ranks need: " << paste << "\n";
  if (token.empty() && !(a.bind_host == "127.0.0.1" || a.bind_host == "localhost"))
    warn("no run token: anyone who can reach port " + std::to_string(port) +
         " can send telemetry into this run; set " + model::env::kRunToken +
         " (or --token-file) for serve and the ranks");
  std::cerr << std::flush;

  std::optional<LiveDisplay> display;
  if (a.mode != "summary")
    display.emplace(*collector, run_name, a.world_size.value_or(0), ::isatty(STDOUT_FILENO) == 1);
  Watch watch(*collector, a.world_size, display ? &*display : nullptr);
  std::optional<int> stop_signal;
  std::string end_reason;
  for (;;) {
    pollfd pfd{signals->fd(), POLLIN, 0};
    ::poll(&pfd, 1, kPollMs);
    for (const int sig : signals->take())
      if (launcher::InterruptSignals::ends_run(sig) && !stop_signal) stop_signal = sig;
    watch.poll();
    if (display) display->tick();
    if (watch.world_ended()) {
      end_reason = "world_ended";
      break;
    }
    if (stop_signal) {
      end_reason = "signal";
      break;
    }
    if (watch.quiet_for(a.idle_timeout_sec)) {
      end_reason = "idle_timeout";
      break;
    }
  }
  if (display) display->end();
  if (end_reason == "signal")
    std::cerr << "traceml: " << strsignal(*stop_signal) << ": ending the run\n";
  if (end_reason == "idle_timeout")
    std::cerr << "traceml: nothing arrived from any rank for " << number_text(a.idle_timeout_sec)
              << " s (--idle-timeout): ending the run\n";
  const double ended = unix_now();

  // How the run ended, as the collector saw it: ranks still connected are
  // given the flush wait to say goodbye; the server then closes the rest.
  const auto deadline =
      Clock::now() + (end_reason == "world_ended" ? std::chrono::seconds(0) : kFlushWait);
  std::vector<launcher::ServedRank> ranks = watch.ranks();
  try {
    collector->stop_ingest(deadline);
  } catch (const std::exception&) {
    // end_run below tries again and says what failed.
  }
  watch.poll();
  for (const launcher::ServedRank& late : watch.ranks()) {
    if (late.ended != "goodbye") continue;
    for (launcher::ServedRank& r : ranks)
      if (r.global_rank == late.global_rank) r.ended = late.ended;
  }
  store::RunOutcome outcome;
  std::optional<int> lost;
  bool all_ended = !ranks.empty();
  for (const auto& r : ranks) {
    if (r.ended == "connection_lost" && !lost) lost = r.global_rank;
    if (r.ended != "goodbye") all_ended = false;
  }
  if (all_ended) {
    outcome.status = "completed";
  } else if (lost && end_reason == "world_ended") {
    outcome.status = "failed";
    outcome.failed_rank = lost;
  } else if (end_reason == "signal") {
    outcome.status = "interrupted";
  } else {
    outcome.status = "timed_out";
    outcome.failed_rank = lost;
  }
  int code = 0;
  if (outcome.status == "interrupted")
    code = 128 + *stop_signal;
  else if (outcome.status != "completed")
    code = 1;
  outcome.exit_code = code;
  const RunEnd end = end_run(*collector, run_dir, a.window, deadline, 0, outcome);
  collector.reset();
  if (!end.summary_written) code = 1;
  launcher::ServeManifestInput m;
  m.run_name = run_name;
  m.status = outcome.status;
  m.exit_code = code;
  m.end_reason = end_reason;
  m.started_at = started;
  m.ended_at = ended;
  m.world_size = watch.world();
  m.listen = a.bind_host + ":" + std::to_string(port);
  m.ranks = ranks;
  m.collection = end.collected;
  m.records_dropped = end.records_dropped;
  m.artifacts = end.artifacts;
  write_manifest(run_dir, launcher::serve_manifest_json(m));
  say_where(run_dir, end);
  return code;
}

}  // namespace

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
  cmd->add_option("--run-name,--session-id", a->run_name,
                  "Run directory name (default serve_TIMESTAMP)");
  cmd->add_option("--logs-dir", a->logs_dir, "Where run directories go")->capture_default_str();
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
  cmd->add_option("--interval", a->interval, "The ranks' sampler period, seconds (stall rules)")
      ->capture_default_str();
  cmd->add_option("--summary-window-rows", a->window, "Latest aligned steps analysed per rank")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40))
      ->capture_default_str();
  cmd->add_option("--strategy", a->strategy,
                  "ddp, fsdp or single_process (default ddp, or from --world-size 1)");
  cmd->add_option("--mode", a->mode,
                  "summary (the report at the end) or live (a live view while the run goes)")
      ->capture_default_str();
  cmd->callback([a, &action] {
    action.check = [a] { return validate(*a); };
    action.run = [a] { return serve(*a); };
  });
}

}  // namespace traceml::cli
