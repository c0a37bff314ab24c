// One step of one rank as the analysis reads it: the six events' times on
// each clock, and the step's GPU activity. Split from telemetry.hpp so that
// the columnar step log (model/step_log.hpp) can hold these without the rest.
// std only; no behaviour beyond accessors.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

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

/// The storage name of each event, indexed by Event: the keys of telemetry
/// JSONL `events` objects and the run database's columns, and the names that
/// the loop phases (model/position.hpp) and step metrics
/// (analysis/step_window.hpp) of the same events share. The one spelling.
inline constexpr std::array<const char*, kEventCount> kEventNames = {
    "input_wait", "h2d", "forward", "backward", "optimizer_step", "traced_step_time"};

/// The storage name of each event (kEventNames).
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

  /// Where event e first began on the step, in ms of the CPU clock from the
  /// start of the traced step (negative: before it, as a fetch for the step
  /// usually is). Recorded by the runtime since telemetry format 2 and
  /// protocol 3; absent on older data, where only durations are known. The
  /// traced step itself has none (it begins at 0 by definition).
  void set_begin(Event e, std::optional<double> ms);
  [[nodiscard]] std::optional<double> begin_ms(Event e) const {
    if ((begin_present_ & bit(e)) == 0) return std::nullopt;
    return begin_[static_cast<std::size_t>(e)];
  }
  [[nodiscard]] const std::array<double, kEventCount>& begin_values() const { return begin_; }
  [[nodiscard]] unsigned begin_mask() const { return begin_present_; }

 private:
  static constexpr std::uint16_t bit(Event e) { return std::uint16_t(1u << unsigned(e)); }
  static constexpr std::uint16_t gpu_bit(Event e) { return std::uint16_t(1u << (unsigned(e) + 8)); }
  std::array<double, kEventCount> cpu_{};
  std::array<double, kEventCount> gpu_{};
  std::array<double, kEventCount> begin_{};
  std::uint16_t present_ = 0;       // bit e: event e present; bit e+8: its gpu_ms present
  std::uint16_t cpu_present_ = 0;   // bit e: event e has cpu_ms
  std::uint8_t begin_present_ = 0;  // bit e: event e has begin_ms
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

/// The most traced threads a rank's steps can name (thread ids 0..kMaxThread).
inline constexpr int kMaxThread = 0xFFFF;

struct StepRecord {
  int global_rank = 0;
  /// The rank's thread that recorded the step, numbered from 0 in the order
  /// its threads first recorded (0 on data from before threads were kept).
  /// Beside the rank, where it takes no room of its own.
  int thread = 0;
  std::int64_t step = 0;  ///< step ids start at 1
  double ts = 0.0;        ///< unix seconds at the end of the step
  StepEvents events;
  /// Absent when the rank had no activity records (no GPU, no CUPTI, or the
  /// records were lost): not the same as a step that launched nothing.
  std::optional<StepGpuActivity> gpu_activity;
};

/// A step's record, CPU clock, from what its training thread measured: bit e
/// of `mask` says event e was measured, `ms(e)` its time in milliseconds; bit
/// e of `begin_mask` that `begin_ms(e)` is where it first began (from the
/// step's start; the step's own begin is 0 and never kept). The sender
/// (runtime/step_pipeline) and a black box read after its rank ended
/// (store/black_box) each convert their ticks with it.
template <class Ms, class BeginMs>
StepRecord cpu_step_record(int rank, std::int64_t step, double ts, int thread, std::uint8_t mask,
                           std::uint8_t begin_mask, Ms&& ms, BeginMs&& begin_ms) {
  StepRecord r;
  r.global_rank = rank;
  r.step = step;
  r.ts = ts;
  r.thread = thread;
  for (std::size_t e = 0; e < kEventCount; ++e) {
    if ((mask >> e & 1u) == 0) continue;
    r.events.set(Event(e), Timing{ms(e), std::nullopt});
    if ((begin_mask >> e & 1u) != 0 && e != std::size_t(Event::TracedStepTime))
      r.events.set_begin(Event(e), begin_ms(e));
  }
  return r;
}
}  // namespace traceml::model
