// traceml/hooks.hpp: the interface between traceml's runtime and a training
// framework: its GPU side and its operator profiler. traceml/torch.hpp
// implements it for LibTorch; another framework's adapter would implement the
// same hooks. A training program does not need this header:
// use_device() installs the hooks.
//
// No torch and no CUDA header: the core links no framework, and a CUDA stream
// crosses this interface as an opaque pointer.
#pragma once

#include <cstdint>
#include <string_view>

namespace traceml::detail {

/// GPU memory as a framework's allocator sees it on one device. Filled by a
/// GpuMemoryReader that traceml/torch.hpp installs; the core links no framework.
struct GpuMemoryReading {
  int device = 0;
  double allocated_bytes = 0.0;       ///< in use by tensors now
  double reserved_bytes = 0.0;        ///< held by the caching allocator now
  double peak_allocated_bytes = 0.0;  ///< highest allocated since the last reset
  double peak_reserved_bytes = 0.0;   ///< highest reserved since the last reset
  double total_bytes = 0.0;           ///< the device's memory; 0 when unknown
};
/// Fills `out` and returns true, or returns false when nothing could be read.
/// With `reset_peaks` it restarts the peaks after reading them (the runtime
/// does so at the end of every step, so a peak is the step's own). Called on
/// the training thread at each step end and on the sampler thread; it must be
/// thread-safe and must not throw.
using GpuMemoryReader = bool (*)(GpuMemoryReading* out, bool reset_peaks) noexcept;
/// Returns the CUDA stream (cudaStream_t) that the calling thread's GPU work
/// on `device` goes to, so that the GPU clock's events are recorded on it;
/// null is the legacy default stream. Called at every scope edge: cheap,
/// never throws.
using CurrentCudaStream = void* (*)(int device) noexcept;
/// Installs the framework hooks (either may be null: that part is not used).
/// Call after init(); traceml/torch.hpp's use_device() does it.
void set_gpu_hooks(GpuMemoryReader memory, CurrentCudaStream stream) noexcept;

/// One operator (or GPU kernel) the framework's profiler recorded. The views
/// live until the sink returns.
struct ProfiledOp {
  std::string_view name;
  std::int64_t start_us = 0;     ///< on the unix clock (realtime), microseconds
  std::int64_t duration_us = 0;  ///< microseconds
  std::uint64_t thread = 0;      ///< the profiler's number of the thread that ran it
  std::int64_t sequence = -1;    ///< links a forward op to its backward; -1: none
  bool gpu = false;              ///< a GPU kernel or copy, not a CPU operator
  std::string_view shapes;       ///< its inputs' shapes, "[[64, 784], [256, 784]]"; may be empty
};
/// Receives the ops of a capture, one call each, on the thread that reads it.
using ProfiledOpSink = void (*)(void* context, const ProfiledOp& op) noexcept;
/// The framework's operator profiler, switched on and off at step
/// boundaries on the training thread (a profiler is per thread). Each
/// returns a one-line reason when it could not do its part, or nullptr.
struct ProfilerHooks {
  /// Switches the profiler on for the calling thread.
  const char* (*start)() noexcept = nullptr;
  /// Switches it off on the calling thread, and gives what it recorded as an
  /// opaque capture (null: nothing, with the reason).
  const char* (*stop)(void** capture) noexcept = nullptr;
  /// Hands each op of `capture` to `sink`, on any thread, then frees it.
  void (*read)(void* capture, ProfiledOpSink sink, void* context) noexcept = nullptr;
  /// Optional: writes the profiler's own trace of `capture` (LibTorch's
  /// Kineto trace, with the GPU's streams) to the file `path`, before
  /// read(); a reason when it could not (a LibTorch without Kineto).
  const char* (*save)(void* capture, const char* path) noexcept = nullptr;
};
/// Installs the profiler hooks (all three, or none is used):
/// including traceml/torch.hpp does it, also on a CPU: `traceml run --profile-steps`
/// captures only ranks that installed them.
void set_profiler_hooks(const ProfilerHooks& hooks) noexcept;

}  // namespace traceml::detail
