// The runtime's configuration: init()'s Options over the environment that
// `traceml run` (or torchrun, Slurm, Open MPI) sets. Resolving it is pure (the
// environment comes in as a lookup function) so every rule is unit-tested.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/env_values.hpp"
#include "model/limits.hpp"
#include "model/telemetry.hpp"
#include "timing/cupti_activity_source.hpp"
#include "timing/cupti_duty_cycle.hpp"
#include "traceml/traceml.hpp"

namespace traceml::runtime {

/// Reads one environment variable; std::nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char*)>;
/// The process environment.
EnvLookup process_env();

/// Default period of the process/system sampler (DECISIONS 8).
inline constexpr double kDefaultIntervalSec = 1.0;
/// The sampler period's allowed range: below 10 ms the sampler's own /proc
/// reads start to cost a visible share of a core; above an hour a run gets no
/// sample at all. Beyond it a waited-for duration would overflow.
inline constexpr double kMinIntervalSec = 0.01;
inline constexpr double kMaxIntervalSec = 3600.0;
/// The largest rank number (and world size) traceml accepts anywhere.
inline constexpr std::int64_t kMaxWorldSize = model::kMaxWorldSize;

struct Config {
  bool enabled = true;
  model::RankIdentity identity;
  std::string strategy;  ///< "ddp", "fsdp", "single_process", ...
  double interval_sec = kDefaultIntervalSec;
  std::optional<std::int64_t> max_steps;
  /// Where the collector listens; absent in standalone mode (no `traceml run`).
  std::optional<std::string> collector_host;
  std::optional<std::uint16_t> collector_port;
  std::string token;
  /// Standalone mode: where the run directory goes.
  std::string logs_dir = "logs";
  std::optional<std::string> run_name;
  /// TRACEML_LAUNCHER_PIPES: the inodes of the pipes `traceml run` gave this
  /// rank as stdout and stderr (runtime/pipe_safety.hpp); empty otherwise.
  std::string launcher_pipes;
  /// TRACEML_CUPTI_DUTY: CUPTI's records on a duty cycle; absent: every step.
  std::optional<timing::DutyCycle> cupti_duty;
  /// TRACEML_CUPTI=0 keeps CUPTI unloaded (no GPU activity records).
  bool cupti = true;
  /// TRACEML_CUPTI_PER_THREAD_BUFFERS and TRACEML_CUPTI_API_RECORDS; the
  /// other settings keep their defaults.
  timing::CuptiSourceSettings cupti_settings;
  /// TRACEML_CLOCK: "auto", "tsc" or "steady"; absent: auto.
  std::optional<std::string> clock;
  /// TRACEML_DEBUG=1: the rank prints what its GPU paths did at shutdown.
  bool debug = false;
  /// TRACEML_PAGE_TIMEOUT_S and TRACEML_PAGE_MEMORY_MB: how long, and in how
  /// much memory, a standalone run's final_summary.html may draw
  /// (report::PageLimits; absent: its default).
  std::optional<std::chrono::milliseconds> page_time;
  std::optional<std::uint64_t> page_memory_bytes;
  /// The black box's descriptor, from `traceml run` (TRACEML_BLACK_BOX_FD).
  std::optional<int> black_box_fd;
  /// TRACEML_PROFILE_STEPS, when it names this rank (TRACEML_PROFILE_RANKS).
  std::optional<model::ProfileSteps> profile_steps;
  /// Values that were set but could not be used, one line each; the runtime
  /// prints them (as one warning) and falls back to the default.
  std::vector<std::string> problems;

  [[nodiscard]] bool standalone() const { return !collector_port.has_value(); }
  /// Whether this rank says what holds for its whole node (no GPU, no CUPTI,
  /// the node's samples), so that a node of 8 ranks says it once: its local
  /// rank 0, or a rank that knows no local rank.
  [[nodiscard]] bool speaks_for_its_node() const { return identity.local_rank.value_or(0) == 0; }
};

/// Options win over the environment. Rank identity comes from torchrun's names
/// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK), else Slurm's
/// (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_NODEID), else Open MPI's
/// (OMPI_COMM_WORLD_RANK, ..._LOCAL_RANK, ..._SIZE, ..._LOCAL_SIZE), else a
/// single process. `hostname` fills identity.hostname.
Config resolve_config(const Options& options, const EnvLookup& env, const std::string& hostname);

}  // namespace traceml::runtime
