// Starts the ranks of one node like torchrun does for Python (same environment
// names), relays their output with a rank prefix, forwards SIGINT/SIGTERM,
// stops the survivors when one rank fails, and reports how each rank ended.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/launch_error.hpp"
#include "launcher/rank_process.hpp"
#include "model/position.hpp"
#include "store/black_box.hpp"

namespace traceml::launcher {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

/// Takes the ranks' relayed output instead of the launcher's stdout and
/// stderr, for a caller that draws on the terminal itself (the live view):
/// each line whole, prefix and newline included, on the launcher's thread.
class OutputHook {
 public:
  virtual ~OutputHook() = default;
  /// False: the hook did not take the line, the launcher writes it as usual.
  virtual bool line(bool to_stderr, std::string_view line) = 0;
  /// Called at least every 200 ms while the launcher waits for the ranks.
  virtual void tick() = 0;
};

struct LaunchPlan {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// PROGRAM and its arguments; PROGRAM is looked up in PATH when it has no '/'.
  std::vector<std::string> command;
  /// Added to every rank's environment (after the inherited one, before the
  /// torchrun names, which always win).
  EnvVars extra_env;
  /// After SIGTERM, how long ranks get before SIGKILL.
  std::chrono::milliseconds grace{5000};
  /// Prefix every output line with "[rank<N>]: ".
  bool prefix_output = true;
  /// Not owned; null: lines go to stdout and stderr as they come.
  OutputHook* output_hook = nullptr;
  /// Non-empty: each rank's output lines (without the prefix) are also kept
  /// in DIR/rank<N>.log (launcher/rank_log.hpp), bounded by rank_log_max_bytes.
  std::string rank_log_dir;
  std::int64_t rank_log_max_bytes = std::int64_t{16} << 20;
  /// Give every rank a black box (store/black_box.hpp), read after it ends:
  /// `traceml run` does, for a traced run.
  bool black_boxes = false;
  /// Which of each rank's output streams are a pseudo-terminal
  /// (launcher/rank_process.hpp); `traceml run` asks for one where its own
  /// stream is a terminal (terminal_like_launcher).
  RankTerminal terminal;
};

/// The torchrun names for one local rank: RANK, WORLD_SIZE, LOCAL_RANK,
/// LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, MASTER_ADDR, MASTER_PORT.
EnvVars torchrun_environment(const LaunchPlan& plan, int local_rank);

struct RankOutcome {
  int global_rank = 0;
  int local_rank = 0;
  long pid = 0;
  /// The shell's convention: the exit status, or 128 + signal when killed.
  int exit_code = 0;
  std::optional<int> signal;  ///< the signal that killed it
  double started_at = 0.0;    ///< unix seconds
  double ended_at = 0.0;
  bool stopped_by_launcher =
      false;  ///< it was terminated because another rank failed or on interrupt
  /// Its output log's file name in LaunchPlan::rank_log_dir (empty: none
  /// kept), and whether it was rotated (the older part is LOG.1).
  std::string log;
  bool log_rotated = false;
  /// Its black box (null: none was made), to be read once it has ended.
  std::shared_ptr<const store::BlackBox> black_box;
  /// Where it was when it ended, as its black box said (HostedRun::recover):
  /// the steps it completed and the phase it was in.
  std::optional<std::int64_t> steps_completed;
  std::optional<model::LoopPhase> phase;
};

struct LaunchOutcome {
  std::vector<RankOutcome> ranks;  ///< by local rank
  /// The first non-zero rank exit code in the order they ended (0 when all
  /// succeeded); on interrupt with every rank at 0, 128 + the signal.
  int exit_code = 0;
  std::optional<int> first_failed_rank;  ///< global rank whose failure stopped the others
  /// The first signal received by the launcher that asks the run to end
  /// (SIGINT, SIGTERM, SIGHUP, SIGQUIT; see InterruptSignals::ends_run).
  std::optional<int> interrupt_signal;
};

class InterruptSignals;

/// Starts every local rank of `plan` and waits for all to end. While waiting:
/// relays output; on SIGINT, SIGTERM, SIGHUP or SIGQUIT to this process
/// forwards the signal to the ranks (then SIGKILL after `grace`); passes
/// SIGUSR1/SIGUSR2 on and keeps waiting; when a rank exits non-zero or is
/// killed, sends SIGTERM to the others (then SIGKILL after `grace`). Throws
/// LaunchError before anything started when the program cannot be run.
LaunchOutcome launch_and_wait(const LaunchPlan& plan);
/// The same, with signal handling the caller owns: it can keep the launcher
/// alive through signals after the ranks ended (while it writes the summary).
LaunchOutcome launch_and_wait(const LaunchPlan& plan, InterruptSignals& interrupts);

}  // namespace traceml::launcher
