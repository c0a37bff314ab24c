// How a run hosted by `traceml run` or `traceml serve` ended, why, and how
// each served rank ended: each state is an enum named here once, with the one
// table that gives its word (manifest.json, final_summary.json's `run` block,
// the run database's run_outcome table) and, for a run's status, the exit
// code it stands for. In model, not launcher, so that every layer that reads
// or writes those words (store, report, launcher) sees the one table. Also
// the strategy a run that names none is given. std only.
#pragma once

#include <string>

#include <cstdint>
#include <optional>
#include <string_view>

#include "model/telemetry.hpp"

namespace traceml::model {

/// How a hosted run ended.
enum class RunStatus : std::uint8_t {
  Completed,    ///< every rank ended cleanly (exited 0, or said goodbye)
  Failed,       ///< a rank failed (exited non-zero, or its connection was lost)
  Interrupted,  ///< the host got SIGINT/SIGTERM
  TimedOut,     ///< served: ended by --idle-timeout, or with ranks not ended
};

/// Why `traceml serve` ended its run.
enum class EndReason : std::uint8_t {
  WorldEnded,   ///< every rank of the world ended
  Signal,       ///< SIGINT/SIGTERM
  IdleTimeout,  ///< nothing arrived for --idle-timeout seconds
};

/// How a rank of a served run ended, as far as the collector can tell (it
/// does not see the process).
enum class RankEnding : std::uint8_t {
  Goodbye,         ///< its runtime said Bye
  ConnectionLost,  ///< closed without one: a crash, a kill, a network failure
  StillConnected,  ///< open when the run was ended
  NeverConnected,  ///< a rank of the world that was never heard from
};

const char* word(RunStatus status);
const char* word(EndReason reason);
const char* word(RankEnding ending);
/// The status a word names; std::nullopt for any other text.
std::optional<RunStatus> run_status_from_word(std::string_view word);

/// The exit code a run that ended with `status` returns when its status
/// decides it (`traceml serve`): 0 completed, 1 failed or timed out, 128 +
/// `signal` interrupted. `traceml run` returns its ranks' own code instead,
/// as torchrun does.
int exit_code(RunStatus status, std::optional<int> signal);

/// The strategy of a run that names none: one rank is a single process; a
/// world of several ranks, or one not known yet (a served run learns it from
/// its first rank), is taken for DDP.
Strategy default_strategy(std::optional<int> world_size);

/// "SIGKILL" for 9 (Linux's numbers), "signal 42" for one without a name here.
std::string signal_name(int signal);

}  // namespace traceml::model
