// `traceml serve`'s half of the hosted run: the collector in the foreground
// for ranks that something else starts; the run ends when its world of ranks
// has said goodbye, when they all went quiet (--idle-timeout), or on
// SIGINT/SIGTERM, and always with the summary a `traceml run` writes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <iostream>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "launcher/hosted_run.hpp"
#include "launcher/interrupt_signals.hpp"
#include "launcher/live_display.hpp"
#include "launcher/stall_lines.hpp"
#include "model/env_contract.hpp"
#include "model/text.hpp"
#include "report/atomic_file.hpp"

namespace traceml::launcher {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using model::EndReason;
using model::RankEnding;
using model::RunStatus;

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

/// Seconds as the option's own messages show them (cli/option_checks.hpp).
std::string seconds_text(double s) {
  return fmt::format("{:.12g}", s);
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
      // Not yet: a rank whose connection broke is given the time to come
      // back before it is called crashed (a starved collector, a network blip).
      if (!r.said_bye && r.closed_s < kReconnectGraceSec) continue;
      if (!told_ended_.insert(r.global_rank).second) continue;
      if (!r.said_bye) {
        say("traceml: warning: rank " + std::to_string(r.global_rank) +
            " closed its connection without a goodbye (crashed or killed?)");
      } else if (r.exit_status && *r.exit_status != 0) {
        say("traceml: warning: rank " + std::to_string(r.global_rank) + " exited with code " +
            std::to_string(*r.exit_status));
      } else if (named) {
        say("traceml: rank " + std::to_string(r.global_rank) + " ended (" +
            std::to_string(told_ended_.size()) + of + ")");
      }
    }
    if (w && !told_all_ && int(told_connected_.size()) >= *w) {
      told_all_ = true;
      if (*w > kRanksNamed) say("traceml: all " + std::to_string(*w) + " ranks connected");
    }
    // The live view draws its stalls; otherwise each is a line while it lasts.
    if (display_ == nullptr) stall_lines_.update(collector_.stalls(), StallLines::Clock::now());
  }

  void say(const std::string& line) {
    if (display_ != nullptr && display_->line(true, line + "\n")) return;
    std::cerr << line << "\n" << std::flush;
  }

  /// How each rank of the world ended, as far as the collector saw it.
  std::vector<ServedRank> ranks() const {
    std::vector<ServedRank> out;
    std::set<int> seen;
    for (const collector::RankProgress& r : p_.ranks) {
      seen.insert(r.global_rank);
      out.push_back({r.global_rank,
                     r.open       ? RankEnding::StillConnected
                     : r.said_bye ? RankEnding::Goodbye
                                  : RankEnding::ConnectionLost,
                     r.exit_status});
    }
    const int w = world().value_or(0);
    for (int rank = 0; rank < w && rank < kMaxNeverConnectedListed; ++rank)
      if (!seen.count(rank)) out.push_back({rank, RankEnding::NeverConnected});
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
  StallLines stall_lines_{[](const std::string& l) { std::cerr << l << "\n" << std::flush; }};
  std::set<int> told_connected_;
  std::set<int> told_ended_;
  bool told_all_ = false;
};

/// Tells the ranks where the collector is: --env-file, and the line to
/// paste. A token serve made itself is in both (the file then readable by
/// its owner only). Throws what writing the file threw.
std::string announce(const ServedRunOptions& o, const HostedRun& host, bool made_token) {
  const std::string& bind = o.host.bind_host;
  const std::string connect = !o.connect_host.empty()  ? o.connect_host
                              : binds_everywhere(bind) ? this_host_name()
                                                       : bind;
  const std::string port = std::to_string(host.port());
  const std::string token =
      made_token ? std::string(" ") + model::env::kRunToken + "=" + o.host.token : "";
  if (!o.env_file.empty())
    report::write_file_atomic(
        o.env_file,
        std::string(model::env::kAggregatorHost) + "=" + shell_word(connect) + "\n" +
            model::env::kAggregatorPort + "=" + port + "\n" +
            (made_token ? std::string(model::env::kRunToken) + "=" + o.host.token + "\n" : ""),
        made_token ? 0600 : 0666);
  std::string paste = "export " + std::string(model::env::kAggregatorHost) + "=" +
                      shell_word(connect) + " " + model::env::kAggregatorPort + "=" + port + token;
  if (!o.host.token.empty() && !made_token)
    paste += std::string(" ") + model::env::kRunToken + "=" +
             (o.token_file.empty()
                  ? "\"$" + std::string(model::env::kRunToken) + "\""
                  : "\"$(cat " + shell_word(fs::absolute(o.token_file).string()) + ")\"");
  return paste;
}

}  // namespace

bool loopback(const std::string& host) {
  if (host == "localhost") return true;
  std::string h = host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, h.c_str(), &v6) != 1) return false;  // a name: not known to be
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

ServedEnd served_end(const std::vector<ServedRank>& ranks, EndReason reason,
                     std::optional<int> signal) {
  ServedEnd e;
  std::optional<int> lost;
  std::optional<int> failed;  // the first rank whose goodbye gave a non-zero exit status
  bool all_ended = !ranks.empty();
  for (const auto& r : ranks) {
    if (r.ended == RankEnding::ConnectionLost && !lost) lost = r.global_rank;
    if (r.ended == RankEnding::Goodbye && r.exit_status.value_or(0) != 0 && !failed)
      failed = r.global_rank;
    if (r.ended != RankEnding::Goodbye) all_ended = false;
  }
  if (failed && (all_ended || reason == EndReason::WorldEnded)) {
    // A program that returned 3 failed, whether or not it said goodbye.
    e.status = RunStatus::Failed;
    e.failed_rank = failed;
  } else if (all_ended) {
    e.status = RunStatus::Completed;
  } else if (lost && reason == EndReason::WorldEnded) {
    e.status = RunStatus::Failed;
    e.failed_rank = lost;
  } else if (reason == EndReason::Signal) {
    e.status = RunStatus::Interrupted;
  } else {
    e.status = RunStatus::TimedOut;
    e.failed_rank = lost;
  }
  e.exit_code = model::exit_code(e.status, signal);
  return e;
}

int host_served_run(const ServedRunOptions& o) {
  const bool made_token = o.token_made && !o.host.token.empty();
  // Signals are caught before the collector listens: from the moment a rank
  // can connect, Ctrl+C ends the run with its summary.
  std::optional<InterruptSignals> signals;
  try {
    signals.emplace();
  } catch (const std::exception& e) {
    throw HostError(e.what());
  }
  HostedRun host(o.host, o.world_size);
  std::string paste;
  try {
    paste = announce(o, host, made_token);
  } catch (const std::exception& e) {
    host.abandon();
    throw HostError(std::string("cannot write --env-file: ") + e.what());
  }
  const std::uint16_t port = host.port();
  const double started = unix_now();
  std::cerr << "traceml: serving run " << host.run_name() << " on " << o.host.bind_host << ":"
            << port << " into " << host.run_dir().string() << "; waiting for "
            << (o.world_size ? std::to_string(*o.world_size) + " rank(s)" : std::string("ranks"))
            << ". Ctrl+C ends the run and writes its summary.\n";
  std::cerr << "traceml: ranks need: " << paste << "\n";
  if (made_token)
    std::cerr << "traceml: no run token was given and serve listens beyond loopback, so it made "
                 "one: ranks without it are refused (set "
              << model::env::kRunToken << " or --token-file to choose it)\n";
  else if (o.host.token.empty() && !loopback(o.host.bind_host))
    warn("no run token: anyone who can reach port " + std::to_string(port) +
         " can send telemetry into this run; set " + model::env::kRunToken +
         " (or --token-file) for serve and the ranks");
  std::cerr << std::flush;

  LiveDisplay* display = host.start_live(o.world_size.value_or(0));
  Watch watch(host.collector(), o.world_size, display);
  std::optional<int> stop_signal;
  EndReason reason;
  for (;;) {
    pollfd pfd{signals->fd(), POLLIN, 0};
    ::poll(&pfd, 1, kPollMs);
    for (const int sig : signals->take())
      if (InterruptSignals::ends_run(sig) && !stop_signal) stop_signal = sig;
    watch.poll();
    if (display != nullptr) display->tick();
    if (watch.world_ended()) {
      reason = EndReason::WorldEnded;
      break;
    }
    if (stop_signal) {
      reason = EndReason::Signal;
      break;
    }
    if (watch.quiet_for(o.idle_timeout_s)) {
      reason = EndReason::IdleTimeout;
      break;
    }
  }
  host.end_live();
  if (reason == EndReason::Signal)
    std::cerr << "traceml: " << strsignal(*stop_signal) << ": ending the run\n";
  if (reason == EndReason::IdleTimeout)
    std::cerr << "traceml: nothing arrived from any rank for " << seconds_text(o.idle_timeout_s)
              << " s (--idle-timeout): ending the run\n";
  const double ended = unix_now();

  // How the run ended, as the collector saw it: ranks still connected are
  // given the flush wait to say goodbye; the server then closes the rest.
  const auto deadline =
      Clock::now() + (reason == EndReason::WorldEnded ? std::chrono::seconds(0) : kFlushWait);
  std::vector<ServedRank> ranks = watch.ranks();
  try {
    host.collector().stop_ingest(deadline);
  } catch (const std::exception&) {
    // end_run below tries again and says what failed.
  }
  watch.poll();
  for (const ServedRank& late : watch.ranks()) {
    if (late.ended != RankEnding::Goodbye) continue;
    for (ServedRank& r : ranks)
      if (r.global_rank == late.global_rank) r = late;
  }
  const ServedEnd how = served_end(ranks, reason, stop_signal);
  store::RunOutcome outcome;
  outcome.status = how.status;
  outcome.failed_rank = how.failed_rank;
  outcome.exit_code = how.exit_code;
  // The exit codes the ranks' goodbyes gave (protocol 4), as `traceml run`
  // stores those of the ranks it started.
  for (const ServedRank& r : ranks)
    if (r.exit_status) {
      store::RankExit x;
      x.global_rank = r.global_rank;
      x.exit_code = *r.exit_status;
      outcome.ranks.push_back(x);
    }
  const RunEnd end = host.end(deadline, 0, outcome);
  ServeManifestInput m;
  m.run_name = host.run_name();
  m.status = how.status;
  m.exit_code = end.summary_written ? how.exit_code : 1;
  m.end_reason = reason;
  m.started_at = started;
  m.ended_at = ended;
  m.world_size = watch.world();
  m.listen = o.host.bind_host + ":" + std::to_string(port);
  m.ranks = ranks;
  m.collection = end.collected;
  m.records_dropped = end.records_dropped;
  m.artifacts = end.artifacts;
  host.close(serve_manifest_json(m), end);
  return m.exit_code;
}

}  // namespace traceml::launcher
