#include "launcher/launch.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <memory>
#include <string_view>

#include "launcher/interrupt_signals.hpp"
#include "launcher/line_relay.hpp"
#include "launcher/output_keeper.hpp"
#include "launcher/program_path.hpp"
#include "launcher/rank_log.hpp"
#include "launcher/rank_process.hpp"

extern char** environ;

namespace traceml::launcher {
namespace {

using Clock = std::chrono::steady_clock;

/// How long pipes may stay open after every rank exited: output written just
/// before exit is still in flight, but a rank's orphaned grandchild (a data
/// worker) may hold the pipe open for ever.
constexpr std::chrono::milliseconds kDrainAfterExit{1000};
/// Upper bound on a wait in the loop; SIGCHLD wakes it earlier. It bounds how
/// late an exit is noticed if the wake-up byte was lost.
constexpr std::chrono::milliseconds kMaxPollWait{200};
constexpr std::size_t kReadChunk = std::size_t{64} * 1024;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// One of the launcher's own stdout/stderr; a relayed line is one write() so
/// lines stay whole even against other writers of the same fd.
class OutputSink {
 public:
  explicit OutputSink(int fd) : fd_(fd) {}

  void write(std::string_view line) {
    while (!broken_ && !line.empty()) {
      const ssize_t n = ::write(fd_, line.data(), line.size());
      if (n >= 0) {
        line.remove_prefix(static_cast<std::size_t>(n));
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd p{fd_, POLLOUT, 0};
        ::poll(&p, 1, 1000);
      } else if (errno != EINTR) {
        // EPIPE (nobody reads our output any more) and the like: the ranks'
        // pipes are still drained so they never block, the bytes are dropped.
        broken_ = true;
      }
    }
  }

 private:
  int fd_;
  bool broken_ = false;
};

struct RankStream {
  UniqueFd fd;
  LineRelay relay;
};

struct Rank {
  RankOutcome outcome;
  pid_t pid = -1;
  bool running = false;  ///< started and not yet reaped: its pid still names its group
  RankStream out;
  RankStream err;
  std::unique_ptr<RankLog> log;  ///< null: none kept
};

std::vector<std::string> rank_environment(const LaunchPlan& plan, int local_rank) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    env.emplace_back(*entry);
  }
  auto set = [&env](const std::string& name, const std::string& value) {
    const std::string key = name + "=";
    for (auto& entry : env) {
      if (entry.compare(0, key.size(), key) == 0) {
        entry = key + value;
        return;
      }
    }
    env.push_back(key + value);
  };
  for (const auto& [name, value] : plan.extra_env)
    set(name, value);
  for (const auto& [name, value] : torchrun_environment(plan, local_rank))
    set(name, value);
  return env;
}

void validate(const LaunchPlan& plan) {
  if (plan.command.empty()) throw LaunchError("no program given: put it after `--`");
  if (plan.nproc_per_node < 1) throw LaunchError("--nproc-per-node must be >= 1");
  if (plan.nnodes < 1) throw LaunchError("--nnodes must be >= 1");
  if (plan.node_rank < 0 || plan.node_rank >= plan.nnodes) {
    throw LaunchError("--node-rank must be >= 0 and less than --nnodes");
  }
}

/// The shell's convention for a wait status.
void record_status(RankOutcome& outcome, int status) {
  if (WIFSIGNALED(status)) {
    outcome.signal = WTERMSIG(status);
    outcome.exit_code = 128 + WTERMSIG(status);
  } else {
    outcome.exit_code = WEXITSTATUS(status);
  }
}

class Launch {
 public:
  Launch(const LaunchPlan& plan, InterruptSignals& interrupts)
      : plan_(plan), stdout_(1), stderr_(2), interrupts_(interrupts) {}

  LaunchOutcome run(const std::string& path) {
    start_all(path);
    std::vector<int> read_fds;
    for (const auto& rank : ranks_) {
      read_fds.push_back(rank.out.fd.get());
      read_fds.push_back(rank.err.fd.get());
    }
    if (auto keeper = OutputKeeper::start(read_fds)) keeper_.emplace(std::move(*keeper));
    while (!finished())
      step();
    for (auto& rank : ranks_) {
      for (RankStream* stream : {&rank.out, &rank.err})
        close_stream(*stream);
      if (rank.log) rank.outcome.log_rotated = rank.log->rotated();
      result_.ranks.push_back(rank.outcome);
    }
    if (result_.exit_code == 0 && result_.interrupt_signal) {
      result_.exit_code = 128 + *result_.interrupt_signal;
    }
    return result_;
  }

 private:
  void start_all(const std::string& path) {
    ranks_.reserve(static_cast<std::size_t>(plan_.nproc_per_node));
    for (int local = 0; local < plan_.nproc_per_node; ++local) {
      const int global = plan_.node_rank * plan_.nproc_per_node + local;
      const std::string prefix =
          plan_.prefix_output ? "[rank" + std::to_string(global) + "]: " : std::string();
      const double started_at = unix_now();
      RankProcess process;
      std::shared_ptr<store::BlackBox> box;
      if (plan_.black_boxes) {
        std::string why;
        box = store::BlackBox::create(global, why);
        if (!box && !box_error_told_) {
          box_error_told_ = true;
          stderr_.write("[TraceML] WARNING: " + why +
                        ": a rank that dies loses the steps it had not sent\n");
        }
      }
      try {
        const std::vector<std::string> argv(plan_.command.begin(), plan_.command.end());
        std::string warning;
        process = spawn_rank(path, argv, rank_environment(plan_, local), box ? box->fd() : -1,
                             plan_.terminal, &warning);
        if (!warning.empty() && !terminal_error_told_) {
          terminal_error_told_ = true;
          stderr_.write("[TraceML] WARNING: " + warning + "\n");
        }
      } catch (...) {
        abandon_started();
        throw;
      }
      const std::size_t index = ranks_.size();
      const std::size_t skip = prefix.size();
      Rank rank{{},
                process.pid,
                true,
                {std::move(process.stdout_read),
                 LineRelay(prefix, [this, index,
                                    skip](std::string_view l) { relay(index, skip, false, l); })},
                {std::move(process.stderr_read),
                 LineRelay(prefix, [this, index,
                                    skip](std::string_view l) { relay(index, skip, true, l); })},
                open_log(global)};
      if (rank.log) rank.outcome.log = "rank" + std::to_string(global) + ".log";
      rank.outcome.global_rank = global;
      rank.outcome.local_rank = local;
      rank.outcome.pid = static_cast<long>(process.pid);
      rank.outcome.started_at = started_at;
      rank.outcome.black_box = std::move(box);
      ranks_.push_back(std::move(rank));
    }
  }

  void relay(std::size_t index, std::size_t prefix, bool to_stderr, std::string_view line) {
    if (RankLog* log = ranks_[index].log.get()) {
      log->write(line.substr(std::min(prefix, line.size())));
      if (log->error() && !log_error_told_) {
        log_error_told_ = true;
        stderr_.write("[TraceML] WARNING: " + *log->error() + "\n");
      }
    }
    if (plan_.output_hook == nullptr || !plan_.output_hook->line(to_stderr, line))
      (to_stderr ? stderr_ : stdout_).write(line);
  }

  std::unique_ptr<RankLog> open_log(int global) {
    if (plan_.rank_log_dir.empty()) return nullptr;
    auto log = std::make_unique<RankLog>(
        plan_.rank_log_dir + "/rank" + std::to_string(global) + ".log", plan_.rank_log_max_bytes);
    if (log->error()) {
      if (!log_error_told_) {
        log_error_told_ = true;
        stderr_.write("[TraceML] WARNING: " + *log->error() + "\n");
      }
      return nullptr;
    }
    return log;
  }

  /// A later rank could not be started: the earlier ones must not outlive the
  /// launcher that would have waited for them.
  void abandon_started() {
    for (auto& rank : ranks_) {
      ::kill(-rank.pid, SIGKILL);
      int status = 0;
      while (::waitpid(rank.pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

  [[nodiscard]] bool finished() const {
    const bool any_running =
        std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
    if (any_running) return false;
    const bool any_open = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
      return r.out.fd.valid() || r.err.fd.valid();
    });
    return !any_open || (drain_until_ && Clock::now() >= *drain_until_);
  }

  void step() {
    std::vector<pollfd> fds;
    std::vector<RankStream*> streams;
    fds.push_back({interrupts_.fd(), POLLIN, 0});
    for (auto& rank : ranks_) {
      for (RankStream* stream : {&rank.out, &rank.err}) {
        if (!stream->fd.valid()) continue;
        fds.push_back({stream->fd.get(), POLLIN, 0});
        streams.push_back(stream);
      }
    }
    const int rc = ::poll(fds.data(), fds.size(), wait_ms());
    if (rc > 0) {
      for (std::size_t i = 0; i < streams.size(); ++i) {
        if (fds[i + 1].revents != 0) read_stream(*streams[i]);
      }
    }
    for (int sig : interrupts_.take())
      on_interrupt(sig);
    reap();
    if (kill_at_ && Clock::now() >= *kill_at_) {
      kill_at_.reset();
      signal_running(SIGKILL);
    }
    if (plan_.output_hook != nullptr) plan_.output_hook->tick();
  }

  [[nodiscard]] int wait_ms() const {
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(kMaxPollWait);
    const auto now = Clock::now();
    for (const auto& deadline : {kill_at_, drain_until_}) {
      if (!deadline) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now);
      wait = std::min(wait, left + std::chrono::milliseconds(1));
    }
    return static_cast<int>(std::max<std::chrono::milliseconds::rep>(wait.count(), 0));
  }

  void read_stream(RankStream& stream) {
    buffer_.resize(kReadChunk);
    const ssize_t n = ::read(stream.fd.get(), buffer_.data(), buffer_.size());
    if (n > 0) {
      stream.relay.feed(std::string_view(buffer_.data(), static_cast<std::size_t>(n)));
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      close_stream(stream);
    }
  }

  static void close_stream(RankStream& stream) {
    if (!stream.fd.valid()) return;
    stream.relay.finish();
    stream.fd.reset();
  }

  void on_interrupt(int sig) {
    if (!InterruptSignals::ends_run(sig)) {
      forward(sig);
      return;
    }
    if (!result_.interrupt_signal) {
      result_.interrupt_signal = sig;
      signal_running(sig);
      arm_kill();
    } else {
      // A second Ctrl-C means "now".
      kill_at_.reset();
      signal_running(SIGKILL);
    }
  }

  /// Only ranks not yet reaped are signalled: their pid is still their group's
  /// id, while a reaped one could already name an unrelated process group.
  void signal_running(int sig) {
    for (auto& rank : ranks_) {
      if (!rank.running) continue;
      ::kill(-rank.pid, sig);
      rank.outcome.stopped_by_launcher = true;
    }
  }

  /// Passes a notice signal on; how the ranks react is theirs to decide.
  void forward(int sig) {
    for (auto& rank : ranks_) {
      if (rank.running) ::kill(-rank.pid, sig);
    }
  }

  void arm_kill() {
    const auto at = Clock::now() + plan_.grace;
    if (!kill_at_ || at < *kill_at_) kill_at_ = at;
  }

  void reap() {
    for (auto& rank : ranks_) {
      if (!rank.running) continue;
      int status = 0;
      const pid_t pid = ::waitpid(rank.pid, &status, WNOHANG);
      if (pid == 0 || (pid < 0 && errno == EINTR)) continue;
      rank.running = false;
      rank.outcome.ended_at = unix_now();
      if (pid < 0) {
        // ECHILD: another part of this process reaped it; its status is lost,
        // and an unknown end is not reported as success.
        rank.outcome.exit_code = 1;
        stderr_.write("[TraceML] WARNING: rank " + std::to_string(rank.outcome.global_rank) +
                      " was reaped outside the launcher; its exit status is unknown\n");
      } else {
        record_status(rank.outcome, status);
      }
      on_rank_ended(rank);
    }
    const bool any_running =
        std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
    if (!any_running && !drain_until_) drain_until_ = Clock::now() + kDrainAfterExit;
  }

  void on_rank_ended(const Rank& rank) {
    const int code = rank.outcome.exit_code;
    if (code == 0) return;
    if (result_.exit_code == 0) result_.exit_code = code;
    // Only a failure that nobody provoked stops the others; ranks dying from
    // our own SIGTERM/SIGINT are consequences, not causes.
    if (stopping()) return;
    result_.first_failed_rank = rank.outcome.global_rank;
    signal_running(SIGTERM);
    arm_kill();
  }

  [[nodiscard]] bool stopping() const {
    return result_.first_failed_rank.has_value() || result_.interrupt_signal.has_value();
  }

  const LaunchPlan& plan_;
  OutputSink stdout_;
  OutputSink stderr_;
  InterruptSignals& interrupts_;
  bool box_error_told_ = false;
  bool terminal_error_told_ = false;  ///< a rank's pseudo-terminal failed: said once
  bool log_error_told_ = false;       ///< a rank log failed: said once
  std::vector<Rank> ranks_;
  /// Declared after ranks_, so destroyed first: stopped once the launcher no
  /// longer needs it, before the pipes it holds copies of are closed.
  std::optional<OutputKeeper> keeper_;
  LaunchOutcome result_;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> drain_until_;
  std::vector<char> buffer_;
};

}  // namespace

EnvVars torchrun_environment(const LaunchPlan& plan, int local_rank) {
  const int rank = plan.node_rank * plan.nproc_per_node + local_rank;
  return {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(plan.nnodes * plan.nproc_per_node)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(plan.nproc_per_node)},
      {"GROUP_RANK", std::to_string(plan.node_rank)},
      {"ROLE_RANK", std::to_string(rank)},
      {"MASTER_ADDR", plan.master_addr},
      {"MASTER_PORT", std::to_string(plan.master_port)},
  };
}

LaunchOutcome launch_and_wait(const LaunchPlan& plan, InterruptSignals& interrupts) {
  validate(plan);
  const std::string path = resolve_program(plan.command.front());
  Launch launch(plan, interrupts);
  return launch.run(path);
}

LaunchOutcome launch_and_wait(const LaunchPlan& plan) {
  // Handlers go in before the first fork, so a Ctrl-C while ranks start is
  // forwarded rather than killing the launcher.
  InterruptSignals interrupts;
  return launch_and_wait(plan, interrupts);
}

}  // namespace traceml::launcher
