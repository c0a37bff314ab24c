// Turns finished steps' CUDA events into GPU milliseconds, on a background
// thread, without ever waiting for the GPU: each poll asks cudaEventQuery
// (non-blocking) whether the oldest step's events have completed, and emits
// steps in the order they finished on the CPU once all of theirs have. No
// synchronize call anywhere, so tracing never stalls the training stream.
// Memory is bounded: at most max_pending_steps steps wait, each a fixed-size
// record; a step whose events do not complete in time is emitted without GPU
// values and counted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "timing/cuda_api.hpp"
#include "timing/event_pool.hpp"
#include "timing/gpu_step.hpp"

namespace traceml::timing {

struct GpuResolverSettings {
  /// Steps waiting for the GPU: ~230 KB of records. A CPU that runs this far
  /// ahead of the GPU is rare (the launch queue fills first); beyond it new
  /// steps get no GPU timing.
  std::size_t max_pending_steps = 1024;
  /// How long the oldest step may wait for its events. The clock starts when
  /// the step becomes the oldest, so it bounds one step's GPU time, not the
  /// queue's: long enough for steps of large models with many accumulated
  /// micro-batches, short enough that a hung GPU is reported in a minute.
  std::chrono::steady_clock::duration deadline = std::chrono::seconds(60);
};

class GpuStepResolver {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  GpuStepResolver(const CudaApi& api, EventPool& pool, GpuResolverSettings settings = {});
  /// Gives the events of steps still pending back to the pool.
  ~GpuStepResolver();
  GpuStepResolver(const GpuStepResolver&) = delete;
  GpuStepResolver& operator=(const GpuStepResolver&) = delete;

  /// Queues a finished step (steps are submitted in the order they finished).
  /// False when max_pending_steps are already waiting: the step's events go
  /// back to the pool, it is counted in rejected(), and the caller sends the
  /// step without GPU values at once.
  bool submit(std::int64_t step, const GpuStepRecord& record, TimePoint now);

  /// Emits into `out`, oldest first, every step at the front of the queue
  /// whose events have all completed (Resolved), failed a query (Failed) or
  /// outlived the deadline (Expired). Stops at the first step still running.
  /// Returns how many were emitted.
  std::size_t poll(TimePoint now, std::vector<GpuStepTimes>& out);

  /// Emits every pending step as Abandoned (tracing is stopping and will not
  /// wait longer) and gives its events back.
  std::size_t abandon_all(std::vector<GpuStepTimes>& out);

  [[nodiscard]] std::size_t pending() const noexcept { return pending_.size(); }

  // Counters, readable from any thread.
  [[nodiscard]] std::int64_t resolved() const noexcept { return load(resolved_); }
  [[nodiscard]] std::int64_t expired() const noexcept { return load(expired_); }
  [[nodiscard]] std::int64_t failed() const noexcept { return load(failed_); }
  [[nodiscard]] std::int64_t rejected() const noexcept { return load(rejected_); }
  [[nodiscard]] std::int64_t abandoned() const noexcept { return load(abandoned_); }

 private:
  struct Pending {
    std::int64_t step = 0;
    GpuStepRecord record;
    std::size_t checked = 0;  // events (start, end per interval, in order) known complete
    TimePoint head_since{};   // when it became the oldest pending step
  };
  enum class Progress { Complete, Running, Error };

  Progress advance(Pending& p) const;
  std::optional<GpuStepTimes> times_of(const Pending& p) const;
  void release_events(const GpuStepRecord& r);
  void pop_front(TimePoint now);
  static std::int64_t load(const std::atomic<std::int64_t>& a) noexcept {
    return a.load(std::memory_order_relaxed);
  }
  static void bump(std::atomic<std::int64_t>& a) noexcept {
    a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  CudaApi api_;
  EventPool& pool_;
  GpuResolverSettings settings_;
  std::deque<Pending> pending_;
  std::atomic<std::int64_t> resolved_{0};
  std::atomic<std::int64_t> expired_{0};
  std::atomic<std::int64_t> failed_{0};
  std::atomic<std::int64_t> rejected_{0};
  std::atomic<std::int64_t> abandoned_{0};
};

}  // namespace traceml::timing
