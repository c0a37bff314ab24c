// traceml/hooks.hpp: the interface between traceml's runtime and a training
// framework's GPU side. traceml/torch.hpp implements it for LibTorch; another
// framework's adapter would implement the same two hooks. A training program
// does not need this header: enable_torch_cuda() installs the hooks.
//
// No torch and no CUDA header: the core links no framework, and a CUDA stream
// crosses this interface as an opaque pointer.
#pragma once

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
/// Call after init(); traceml/torch.hpp's enable_torch_cuda() does it.
void set_gpu_hooks(GpuMemoryReader memory, CurrentCudaStream stream) noexcept;

}  // namespace traceml::detail
