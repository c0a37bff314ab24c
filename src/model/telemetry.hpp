// Plain value types for everything a rank reports: identity, per-step phase
// timings, per-step memory peaks, and periodic system/process samples.
// std only; no behaviour beyond accessors.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace traceml::model {

/// The six timed events of a step. Serialized values are stable: never renumber.
enum class Event : std::uint8_t {
  InputWait = 0,       ///< waiting for the next batch (time inside the loader's fetch)
  H2D = 1,             ///< host-to-device copies
  Forward = 2,         ///< forward pass
  Backward = 3,        ///< backward pass (and the gradient all-reduce inside it)
  OptimizerStep = 4,   ///< optimizer.step()
  TracedStepTime = 5,  ///< the whole traced step body
};
inline constexpr std::size_t kEventCount = 6;

/// The storage name of each event, as used in telemetry JSONL `events` objects.
const char* event_name(Event e);
/// Inverse of event_name; std::nullopt for a name we do not know.
std::optional<Event> event_from_name(std::string_view name);

/// One measured duration of an event: CPU wall clock always, GPU clock when
/// the rank had one. Absent means "not measured", never zero.
struct Timing {
  std::optional<double> cpu_ms;
  std::optional<double> gpu_ms;
};

/// Per-step timings of every event, stored compactly (a run can hold millions of
/// these): values plus presence bits. An absent event was not measured on the step.
class StepEvents {
 public:
  void set(Event e, Timing t);
  [[nodiscard]] bool has(Event e) const { return (present_ & bit(e)) != 0; }
  [[nodiscard]] std::optional<double> cpu_ms(Event e) const {
    if ((cpu_present_ & bit(e)) == 0) return std::nullopt;
    return cpu_[static_cast<std::size_t>(e)];
  }
  [[nodiscard]] std::optional<double> gpu_ms(Event e) const {
    if ((present_ & gpu_bit(e)) == 0) return std::nullopt;
    return gpu_[static_cast<std::size_t>(e)];
  }

  /// Bulk access for hot loops that read every event of millions of steps:
  /// the raw values of one clock and the bit mask (bit e = event e) of the
  /// ones that were measured. A value whose bit is clear is meaningless.
  [[nodiscard]] const std::array<double, kEventCount>& cpu_values() const { return cpu_; }
  [[nodiscard]] const std::array<double, kEventCount>& gpu_values() const { return gpu_; }
  [[nodiscard]] unsigned cpu_mask() const { return cpu_present_; }
  [[nodiscard]] unsigned gpu_mask() const { return unsigned(present_) >> 8; }
  [[nodiscard]] unsigned event_mask() const { return unsigned(present_) & 0xFFu; }

 private:
  static constexpr std::uint16_t bit(Event e) { return std::uint16_t(1u << unsigned(e)); }
  static constexpr std::uint16_t gpu_bit(Event e) { return std::uint16_t(1u << (unsigned(e) + 8)); }
  std::array<double, kEventCount> cpu_{};
  std::array<double, kEventCount> gpu_{};
  std::uint16_t present_ = 0;      // bit e: event e present; bit e+8: its gpu_ms present
  std::uint16_t cpu_present_ = 0;  // bit e: event e has cpu_ms
};

/// What the GPU's activity records (CUPTI) say about the work one step
/// launched: its host-to-device copies, its collective (NCCL) kernels and how
/// long the GPU was busy. Durations are GPU time of work launched from the CPU
/// inside the traced step body; work launched outside steps belongs to none.
struct StepGpuActivity {
  double h2d_ms = 0.0;                   ///< host-to-device copies, summed GPU durations
  double h2d_bytes = 0.0;                ///< bytes they moved
  std::int64_t h2d_copies = 0;           ///< how many there were
  std::int64_t h2d_pageable_copies = 0;  ///< of those, copies from pageable (unpinned) memory
  double h2d_pageable_bytes = 0.0;       ///< bytes of the pageable ones
  double collective_ms = 0.0;            ///< NCCL kernels: union of their GPU intervals
  double busy_ms = 0.0;                  ///< union of every kernel, copy and memset interval
};

struct StepRecord {
  int global_rank = 0;
  std::int64_t step = 0;  ///< step ids start at 1
  double ts = 0.0;        ///< unix seconds at the end of the step
  StepEvents events;
  /// Absent when the rank had no activity records (no GPU, no CUPTI, or the
  /// records were lost): not the same as a step that launched nothing.
  std::optional<StepGpuActivity> gpu_activity;
};

struct RankIdentity {
  int global_rank = 0;
  std::optional<int> local_rank;
  std::optional<int> node_rank;
  std::optional<std::string> hostname;
  std::optional<int> local_world_size;
  std::optional<int> world_size;
};

struct StepMemoryRecord {
  int global_rank = 0;
  std::int64_t step = 0;
  std::string device;
  std::optional<double> peak_allocated_bytes;
  std::optional<double> peak_reserved_bytes;
};

struct GpuSample {
  int index = 0;
  std::optional<double> util_percent;
  std::optional<double> mem_used_bytes;
  std::optional<double> mem_total_bytes;
  std::optional<double> temperature_c;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
};

/// Host-level sample, taken by local rank 0 of each node.
struct SystemSample {
  int node_rank = 0;
  double ts = 0.0;
  std::optional<double> cpu_percent;
  std::optional<double> ram_used_bytes;
  std::optional<double> ram_total_bytes;
  std::vector<GpuSample> gpus;  ///< empty: no GPU on the node
};

/// GPU memory of one process, as the framework's allocator sees it.
struct ProcessGpu {
  std::optional<int> device;
  std::optional<double> allocated_bytes;
  std::optional<double> reserved_bytes;
  std::optional<double> total_bytes;
};

struct ProcessSample {
  int global_rank = 0;
  double ts = 0.0;
  std::optional<double> cpu_percent;  ///< can exceed 100 (several cores)
  std::optional<int> cpu_cores;
  std::optional<double> rss_bytes;
  std::optional<double> ram_total_bytes;
  std::optional<ProcessGpu> gpu;  ///< absent: the process has no GPU
};

/// What a rank's tracer reports about itself (DECISIONS 9: the summary's
/// `tracer` block). Sent after the handshake and again at the end of the run;
/// the last report wins.
struct TracerStats {
  int global_rank = 0;
  std::int64_t pid = 0;
  std::string strategy;              ///< the rank's strategy word ("ddp", "fsdp", ...)
  std::int64_t steps_recorded = 0;   ///< steps assembled on the training thread
  std::int64_t records_sent = 0;     ///< records written to the collector's socket
  std::int64_t records_dropped = 0;  ///< records lost: buffer full or collector unreachable
  /// The tracer's own CPU cost per step on the training thread, nanoseconds
  /// (docs/architecture.md says how it is measured); absent before any step.
  std::optional<double> overhead_ns_per_step;

  /// The rank's GPU clock: how its steps fared on the GPU.
  struct Gpu {
    int device = 0;                   ///< the CUDA device timed
    std::int64_t steps_resolved = 0;  ///< steps that got GPU times
    std::int64_t steps_unresolved =
        0;  ///< timed on the GPU, sent without (expired, failed, refused, abandoned)
    std::int64_t scopes_skipped = 0;  ///< scopes that got no GPU timing (no event, another device)
  };
  /// Absent when the rank never timed a step on a GPU.
  std::optional<Gpu> gpu;
  /// GPU activity records lost: dropped by CUPTI or our buffers, or steps
  /// whose records never came. Absent when the rank had no CUPTI.
  std::optional<std::int64_t> activity_lost;
};

/// TraceML's training-strategy words (spec §4.1.1).
enum class Strategy : std::uint8_t { Ddp, Fsdp, SingleProcess, DistributedUnknown, Unknown };
/// Normalises a strategy string: trimmed, lower-cased; anything unknown is DDP.
Strategy strategy_from_string(const std::string& s);
const char* strategy_name(Strategy s);

struct RunInfo {
  std::string run_name;
  std::optional<int> world_size;
  Strategy strategy = Strategy::Ddp;
};

/// Everything recorded for one run. Record vectors keep arrival order: when the
/// same (rank, step) appears twice, the later record wins.
struct Telemetry {
  RunInfo run;
  std::vector<RankIdentity> ranks;
  std::vector<StepRecord> steps;
  std::vector<StepMemoryRecord> step_memory;
  std::vector<SystemSample> system;
  std::vector<ProcessSample> process;
};

}  // namespace traceml::model
