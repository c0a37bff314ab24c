// The training thread's side of the GPU clock: at each scope boundary it
// records a pooled CUDA event on the current stream (an asynchronous call: it
// never waits for the GPU), and it collects the begin/end pairs of a step into
// a GpuStepRecord for the resolver. One builder per training thread; nothing
// here blocks, allocates or takes a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "model/telemetry.hpp"
#include "timing/cuda_api.hpp"
#include "timing/event_pool.hpp"
#include "timing/gpu_step.hpp"

namespace traceml::timing {

/// Returns the stream that the training thread's GPU work goes to on
/// `device`. The torch adapter supplies LibTorch's current CUDA stream; without
/// one the events go to the legacy default stream (null), which is LibTorch's
/// current stream unless the program switches streams. It runs at every scope
/// boundary, so it must be cheap and must not throw.
using CurrentStream = void* (*)(int device);

class GpuStepBuilder {
 public:
  /// Scopes that can be open at once on a thread (a step, a phase inside it,
  /// and some nesting); a deeper scope gets no GPU timing.
  static constexpr std::size_t kMaxOpenScopes = 16;

  /// `device`: the GPU the rank trains on; the pool's events must belong to
  /// it. A scope begun while the thread's current device is another one gets
  /// no GPU timing: its events could be neither created on the right device
  /// nor recorded on that device's streams, and switching the thread's device
  /// for it could create a CUDA context on a GPU the program never used.
  GpuStepBuilder(const CudaApi& api, EventPool& pool, int device = 0,
                 CurrentStream current_stream = nullptr);
  ~GpuStepBuilder();
  GpuStepBuilder(const GpuStepBuilder&) = delete;
  GpuStepBuilder& operator=(const GpuStepBuilder&) = delete;

  /// A scope starts: records its begin event. `key` identifies the scope to
  /// scope_end: the CPU start time the hot path already has (unique and
  /// increasing on a thread). Scopes close in reverse order (they are RAII);
  /// one that never closes (an exception inside a loader's increment) is
  /// dropped by the next outer scope_end.
  void scope_begin(std::int64_t key) noexcept;
  /// The scope started with `key` ends as event `region`: records its end
  /// event and adds the pair to the current step. A scope that could not be
  /// timed marks `region` skipped for the step.
  void scope_end(model::Event region, std::int64_t key) noexcept;

  /// The step's record (phases and fetches since the last step, the step
  /// itself included once its scope ended); starts the next one. The record
  /// then owns its events: hand it to GpuStepResolver::submit.
  GpuStepRecord finish_step() noexcept;
  /// Forgets the current step (left by an exception, or not recorded) and
  /// gives its events back.
  void discard_step() noexcept;

  /// Scopes that got no GPU timing (their region's GPU value is absent on
  /// that step). Any thread may read it.
  [[nodiscard]] std::int64_t skipped_scopes() const noexcept {
    return skipped_.load(std::memory_order_relaxed);
  }
  /// Of those, scopes begun while the thread's current device was not the
  /// rank's GPU.
  [[nodiscard]] std::int64_t wrong_device_scopes() const noexcept {
    return wrong_device_.load(std::memory_order_relaxed);
  }

 private:
  struct Open {
    std::int64_t key = 0;
    std::optional<EventId> start;  // absent: the begin event could not be recorded
  };
  std::optional<EventId> record() noexcept;
  void clear_error() noexcept;
  void skip(model::Event region) noexcept;

  CudaApi api_;
  EventPool& pool_;
  int device_;
  CurrentStream current_stream_;
  std::array<Open, kMaxOpenScopes> open_{};
  std::size_t depth_ = 0;  // entries of open_ in use
  GpuStepRecord step_;
  std::atomic<std::int64_t> skipped_{0};       // written by the owning thread only
  std::atomic<std::int64_t> wrong_device_{0};  // written by the owning thread only
};

}  // namespace traceml::timing
