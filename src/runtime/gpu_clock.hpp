// The rank's GPU clock (issue 5): which GPU it times on, the pooled CUDA events
// of every training thread, and the resolver that turns them into GPU
// milliseconds on the sender thread.
//
// The clock starts only once the program itself uses a GPU: a training
// thread asks attach_thread() (at most once a second until it succeeds) and
// gets its GPU side when the primary CUDA context of the rank's device is
// active. Until then, and forever on a CPU-only run, steps carry CPU times
// only. Nothing here creates a CUDA context, so tracing a CPU run on a GPU
// machine, or rank 3 of a node, never takes memory on another rank's GPU.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/spsc_ring.hpp"
#include "timing/cuda_api.hpp"
#include "timing/event_pool.hpp"
#include "timing/gpu_step.hpp"
#include "timing/gpu_step_builder.hpp"
#include "timing/gpu_step_resolver.hpp"

namespace traceml::runtime {

/// The GPU a rank times on: its local rank's device (modulo the device count,
/// as torchrun's one-GPU-per-rank convention has it) when the program uses
/// that one; otherwise the calling thread's current device, if the program
/// uses it. Absent otherwise: ask again later (a stray early use of device 0
/// must not fix the choice before the rank's own GPU is in use).
/// `in_use(d)` says whether device d's context is active.
std::optional<int> choose_gpu_device(int device_count, std::optional<int> local_rank,
                                     std::optional<int> current,
                                     const std::function<bool(int)>& in_use);

/// A finished step's GPU events, on their way from the training thread to the
/// sender. Pushed before the step's CPU record, so the sender, which drains
/// CPU records first, always finds a step's events with it.
struct GpuRawStep {
  std::int64_t step = 0;
  timing::GpuStepRecord record;
};

/// One training thread's GPU side. Its builder is used by the owning thread
/// only; the ring is shared with the sender.
class GpuThread {
 public:
  static constexpr std::size_t kRingCapacity = 1024;
  GpuThread(const timing::CudaApi& api, timing::EventPool& pool, int device,
            timing::CurrentStream stream)
      : builder(api, pool, device, stream), ring(kRingCapacity) {}

  timing::GpuStepBuilder builder;
  SpscRing<GpuRawStep> ring;
};

/// What the GPU clock counted, for the tracer's own report.
struct GpuClockCounters {
  std::int64_t steps_resolved = 0;
  std::int64_t steps_expired = 0;   ///< the GPU had not passed the events within the deadline
  std::int64_t steps_failed = 0;    ///< a CUDA query on the step's events failed
  std::int64_t steps_rejected = 0;  ///< too many steps waiting for the GPU
  std::int64_t steps_abandoned = 0;
  std::int64_t scopes_skipped = 0;  ///< scopes without GPU timing (no event, other device, ...)
  std::int64_t pool_exhausted = 0;
};

class GpuClock {
 public:
  /// `local_rank` picks the device (choose_gpu_device); `stream` says which
  /// stream a thread's work goes to (null: the legacy default stream).
  GpuClock(const timing::CudaApi& api, int device_count, std::optional<int> local_rank,
           timing::CurrentStream stream, timing::GpuResolverSettings settings = {});
  /// Call only once no thread records and the sender has stopped.
  ~GpuClock();
  GpuClock(const GpuClock&) = delete;
  GpuClock& operator=(const GpuClock&) = delete;

  // --- training threads ---
  /// The calling thread's GPU side, or nullptr while the program uses no GPU
  /// (ask again later). Takes a lock: call it rarely, never per scope.
  GpuThread* attach_thread() noexcept;
  /// Queues a finished step's events for the sender. False when the ring is
  /// full: the events are given back and the step goes without GPU times.
  bool publish(GpuThread& t, std::int64_t step, const timing::GpuStepRecord& record) noexcept;

  // --- sender thread ---
  /// Every queued step's events, in order per thread.
  void drain(std::vector<GpuRawStep>& out);
  /// See GpuStepResolver: queues a step for resolution, emits finished ones.
  bool submit(std::int64_t step, const timing::GpuStepRecord& record,
              std::chrono::steady_clock::time_point now);
  void poll(std::chrono::steady_clock::time_point now, std::vector<timing::GpuStepTimes>& out);
  void abandon_all(std::vector<timing::GpuStepTimes>& out);
  /// Gives back the events of a record that will never be resolved (its CPU
  /// step was lost).
  void release(const timing::GpuStepRecord& record) noexcept;
  [[nodiscard]] std::size_t pending() const { return resolver_.pending(); }

  /// The device being timed, once one is (any thread).
  [[nodiscard]] std::optional<int> device() const noexcept;
  [[nodiscard]] GpuClockCounters counters() const;

 private:
  timing::CudaApi api_;
  int device_count_;
  std::optional<int> local_rank_;
  timing::CurrentStream stream_;
  timing::EventPool pool_;
  timing::GpuStepResolver resolver_;  // sender thread only

  mutable std::mutex mu_;  // threads_ and device_ changes
  std::vector<std::unique_ptr<GpuThread>> threads_;
  std::atomic<int> device_{-1};  // -1: not chosen yet
  std::atomic<std::int64_t> publish_dropped_{0};
};

}  // namespace traceml::runtime
