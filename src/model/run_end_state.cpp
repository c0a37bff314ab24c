#include "model/run_end_state.hpp"

#include <csignal>

#include <iterator>

namespace traceml::model {

namespace {

struct RunStatusRow {
  RunStatus status;
  const char* word;
  int exit_code;  ///< Interrupted: plus the signal
};

// The only place these words are spelled.
constexpr RunStatusRow kRunStatuses[] = {
    {RunStatus::Completed, "completed", 0},
    {RunStatus::Failed, "failed", 1},
    {RunStatus::Interrupted, "interrupted", 128},
    {RunStatus::TimedOut, "timed_out", 1},
};

struct EndReasonRow {
  EndReason reason;
  const char* word;
};

constexpr EndReasonRow kEndReasons[] = {
    {EndReason::WorldEnded, "world_ended"},
    {EndReason::Signal, "signal"},
    {EndReason::IdleTimeout, "idle_timeout"},
};

struct RankEndingRow {
  RankEnding ending;
  const char* word;
};

constexpr RankEndingRow kRankEndings[] = {
    {RankEnding::Goodbye, "goodbye"},
    {RankEnding::ConnectionLost, "connection_lost"},
    {RankEnding::StillConnected, "still_connected"},
    {RankEnding::NeverConnected, "never_connected"},
};

// Each table lists its enum in order, so that an enum's value is its row.
static_assert(std::size(kRunStatuses) == std::size_t(RunStatus::TimedOut) + 1);
static_assert(std::size(kEndReasons) == std::size_t(EndReason::IdleTimeout) + 1);
static_assert(std::size(kRankEndings) == std::size_t(RankEnding::NeverConnected) + 1);
static_assert(kRunStatuses[std::size_t(RunStatus::TimedOut)].status == RunStatus::TimedOut);
static_assert(kEndReasons[std::size_t(EndReason::IdleTimeout)].reason == EndReason::IdleTimeout);
static_assert(kRankEndings[std::size_t(RankEnding::NeverConnected)].ending ==
              RankEnding::NeverConnected);

}  // namespace

const char* word(RunStatus status) {
  return kRunStatuses[std::size_t(status)].word;
}

const char* word(EndReason reason) {
  return kEndReasons[std::size_t(reason)].word;
}

const char* word(RankEnding ending) {
  return kRankEndings[std::size_t(ending)].word;
}

std::optional<RunStatus> run_status_from_word(std::string_view w) {
  for (const RunStatusRow& row : kRunStatuses)
    if (w == row.word) return row.status;
  return std::nullopt;
}

int exit_code(RunStatus status, std::optional<int> signal) {
  const int code = kRunStatuses[std::size_t(status)].exit_code;
  return status == RunStatus::Interrupted ? code + signal.value_or(0) : code;
}

Strategy default_strategy(std::optional<int> world_size) {
  return world_size && *world_size == 1 ? Strategy::SingleProcess : Strategy::Ddp;
}

std::string signal_name(int signal) {
  struct Named {
    int number;
    const char* name;
  };
  static constexpr Named kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
      {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
  };
  for (const Named& n : kNames)
    if (n.number == signal) return n.name;
  return "signal " + std::to_string(signal);
}

}  // namespace traceml::model
