// The sender's step pipeline: turns what the training threads left in their
// rings into telemetry records. A step with CPU times only goes out at once; a
// step timed on the GPU waits, in order, until the GPU has passed its events
// (the resolver polls without blocking), then goes out with both clocks and,
// when CUPTI is there, with its GPU activity (copies, collectives, busy time).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "model/telemetry.hpp"
#include "runtime/gpu_clock.hpp"
#include "runtime/thread_recorder.hpp"
#include "timing/clock.hpp"

namespace traceml::runtime {

/// Where a step's GPU activity comes from (CUPTI, in cupti_stage.hpp). The
/// records of a step's work arrive some time after the work ran, in buffers,
/// so the pipeline asks how far they have arrived before it attributes.
class ActivityStage {
 public:
  virtual ~ActivityStage() = default;
  /// Takes the records delivered since the last call; `final`: the run is
  /// over, take everything (work still running is lost).
  virtual void collect(bool final) = 0;
  /// Every launch made before this CPU time (now_ns clock) has been delivered
  /// with its activity; absent before any record arrived.
  [[nodiscard]] virtual std::optional<std::int64_t> delivered_through() const = 0;
  /// The activity launched inside the step body [begin_ns, end_ns]. Called
  /// for steps in the order they ended.
  virtual model::StepGpuActivity attribute(std::int64_t begin_ns, std::int64_t end_ns) = 0;
  /// Records lost on the way (dropped by the source, over a cap, or never
  /// attributed to a step), for the tracer's report.
  [[nodiscard]] virtual std::int64_t records_lost() const { return 0; }
  /// The GPU has finished every step's work and a step still waits for its
  /// records: hand back everything now (work still running, which no step
  /// waits for, is then lost), so that delivered_through() covers this time.
  virtual void flush_idle() {}
  /// Whether every launch of the step body [begin_ns, end_ns] was recorded:
  /// false for a step outside the duty cycle's windows (TRACEML_CUPTI_DUTY),
  /// which then goes out with no activity (absent: nothing is known of it),
  /// without waiting for records that never come. Asked once per step whose
  /// GPU work has finished, in order.
  virtual bool records_step(std::int64_t /*begin_ns*/, std::int64_t /*end_ns*/) { return true; }
  /// When the records were turned off after end_ns, once the window holding
  /// it has closed: no later launch will carry delivered_through() past it,
  /// so the pipeline flushes as soon as the GPU has passed the window.
  [[nodiscard]] virtual std::optional<std::int64_t> records_off_after(
      std::int64_t /*end_ns*/) const {
    return std::nullopt;
  }
};

class StepPipeline {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Emit =
      std::function<void(const model::StepRecord&, const std::optional<model::StepMemoryRecord>&)>;

  /// `gpu` and `activity` may be null (no GPU clock, no CUPTI).
  StepPipeline(int rank, const timing::WallMapping& wall, GpuClock* gpu, ActivityStage* activity);

  /// Steps drained from the rings, and the GPU records drained after them.
  /// GPU records whose CPU step is not among `steps` were lost with it and
  /// give their events back.
  void add(const std::vector<RawStep>& steps, const std::vector<GpuRawStep>& gpu, TimePoint now,
           const Emit& emit);
  /// Emits, in order, the waiting steps whose GPU times are known.
  void poll(TimePoint now, const Emit& emit);
  /// Tracing stops: emits every waiting step, with what is known of it.
  void abandon(const Emit& emit);
  [[nodiscard]] std::size_t waiting() const { return waiting_.size() + for_activity_.size(); }
  /// Of those, the steps whose GPU work the GPU has not passed yet.
  [[nodiscard]] std::size_t waiting_for_gpu() const { return waiting_.size(); }
  /// Steps that went out without activity because their records never came.
  [[nodiscard]] std::int64_t activity_timeouts() const { return activity_timeouts_; }
  /// Steps that went out without activity because the duty cycle had the
  /// records off (ActivityStage::records_step).
  [[nodiscard]] std::int64_t steps_unrecorded() const { return steps_unrecorded_; }

  /// How long a step waits for its activity records after its GPU work ended.
  static constexpr std::chrono::seconds kActivityWait{20};
  /// How long after the GPU finished the last step, with no step left on the
  /// GPU, the records are flushed out (the next step's work, which would carry
  /// the horizon past this step, may be long in coming: evaluation, a slow
  /// loader).
  static constexpr std::chrono::milliseconds kIdleFlushWait{500};

 private:
  struct Waiting {
    model::StepRecord record;
    std::optional<model::StepMemoryRecord> memory;
    std::int64_t begin_ns = 0;
    std::int64_t end_ns = 0;
    bool resolved = false;  ///< the GPU passed every event (activity can be attributed)
    TimePoint since{};      ///< when it started waiting for activity
    bool flushed = false;   ///< flush_idle() was asked for it
  };
  /// Merges resolved GPU times into the oldest waiting steps and moves them on.
  void take_times(std::vector<timing::GpuStepTimes>& times, TimePoint now, const Emit& emit);
  /// Emits the steps whose activity has arrived (all of them when `final`).
  void attribute_ready(TimePoint now, bool final, const Emit& emit);

  struct Held {
    GpuRawStep raw;
    int age = 0;  ///< drains it has waited for its CPU step
  };
  /// Drains a GPU record waits for its CPU step before it counts as lost.
  static constexpr int kHoldDrains = 3;

  int rank_;
  const timing::WallMapping& wall_;
  GpuClock* gpu_;
  ActivityStage* activity_;
  std::deque<Waiting> waiting_;       // for their GPU times, in submission order
  std::deque<Waiting> for_activity_;  // for their activity records
  std::vector<Held> held_;            // GPU records whose CPU step is not drained yet
  std::int64_t activity_timeouts_ = 0;
  std::int64_t steps_unrecorded_ = 0;
};

/// A finished step's CPU record (durations in ms, end time as unix seconds).
model::StepRecord to_step_record(const RawStep& raw, int rank, const timing::WallMapping& wall);
/// Its memory record, when the step carried allocator peaks.
std::optional<model::StepMemoryRecord> to_step_memory(const RawStep& raw, int rank);
/// What a step's activity adds to its timings: the GPU time of host-to-device
/// copies becomes the step's H2D on the GPU clock when the program marked no
/// H2D phase (CUPTI caught the copies without a call from the user).
void add_captured_h2d(const model::StepGpuActivity& activity, model::StepEvents& events);

}  // namespace traceml::runtime
