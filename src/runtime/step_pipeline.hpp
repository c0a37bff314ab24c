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
#include "runtime/clock.hpp"
#include "runtime/gpu_clock.hpp"
#include "runtime/thread_recorder.hpp"

namespace traceml::runtime {

/// Where a step's GPU activity comes from: given the steps whose GPU work has
/// finished (their CPU windows, in the order they ended), fills in what the
/// activity records say. Implemented over CUPTI in activity_stage.hpp.
class ActivityStage {
 public:
  struct Window {
    std::int64_t begin_ns = 0;  ///< the step body's CPU start (now_ns clock)
    std::int64_t end_ns = 0;
    std::optional<model::StepGpuActivity>* out = nullptr;
  };
  virtual ~ActivityStage() = default;
  /// Called on the sender thread after the steps' GPU events completed, so
  /// their activity records exist by now (a forced flush delivers them).
  virtual void attribute(std::vector<Window>& windows) = 0;
};

class StepPipeline {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Emit =
      std::function<void(const model::StepRecord&, const std::optional<model::StepMemoryRecord>&)>;

  /// `gpu` and `activity` may be null (no GPU clock, no CUPTI).
  StepPipeline(int rank, const WallMapping& wall, GpuClock* gpu, ActivityStage* activity);

  /// Steps drained from the rings, and the GPU records drained after them.
  /// GPU records whose CPU step is not among `steps` were lost with it and
  /// give their events back.
  void add(const std::vector<RawStep>& steps, const std::vector<GpuRawStep>& gpu, TimePoint now,
           const Emit& emit);
  /// Emits, in order, the waiting steps whose GPU times are known.
  void poll(TimePoint now, const Emit& emit);
  /// Tracing stops: emits every waiting step without GPU values.
  void abandon(const Emit& emit);
  [[nodiscard]] std::size_t waiting() const { return waiting_.size(); }

 private:
  struct Waiting {
    model::StepRecord record;
    std::optional<model::StepMemoryRecord> memory;
    std::int64_t begin_ns = 0;
    std::int64_t end_ns = 0;
  };
  void finish(std::vector<timing::GpuStepTimes>& times, bool with_activity, const Emit& emit);

  int rank_;
  const WallMapping& wall_;
  GpuClock* gpu_;
  ActivityStage* activity_;
  std::deque<Waiting> waiting_;
};

/// A finished step's CPU record (durations in ms, end time as unix seconds).
model::StepRecord to_step_record(const RawStep& raw, int rank, const WallMapping& wall);
/// Its memory record, when the step carried allocator peaks.
std::optional<model::StepMemoryRecord> to_step_memory(const RawStep& raw, int rank);
/// What a step's activity adds to its timings: the GPU time of host-to-device
/// copies becomes the step's H2D on the GPU clock when the program marked no
/// H2D phase (CUPTI caught the copies without a call from the user).
void add_captured_h2d(const model::StepGpuActivity& activity, model::StepEvents& events);

}  // namespace traceml::runtime
