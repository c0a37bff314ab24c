// traceml/torch.hpp: LibTorch integration (link traceml::torch).
//
// The only traceml header that includes LibTorch. traceml.hpp alone is enough
// to mark steps and phases; include this one to let traceml see LibTorch's CUDA
// side, and for a timed host-to-device copy of a batch:
//
//   #include <traceml/torch.hpp>
//   traceml::init();
//   traceml::use_device(device);  // the rank's device: on a GPU, its clock and memory
//   for (auto& batch : traceml::wrap_dataloader(*loader)) {
//     traceml::StepScope step;
//     auto on_device = traceml::to_device(batch, device, /*non_blocking=*/true);
//     ...
//   }
//
// use_device() on a CUDA device hands the runtime two hooks into LibTorch: the CUDA stream
// that the calling thread's work goes to (the GPU clock records its events
// there, so it never synchronises the training stream), and a reader of the
// CUDA caching allocator's statistics (per-step peak allocated and reserved
// memory, for the STEP MEMORY section).
//
// LibTorch's operator profiler, which `traceml run --profile-steps A:B`
// switches on for steps A to B of the training thread (docs/profiling.md),
// needs no call: a program that includes this header has it, on any device.
//
// traceml::wrap_dataloader (traceml.hpp) already times fetches from
// torch::data loaders; no LibTorch-specific loader wrapper is needed.
//
// Works with LibTorch 1.13 and 2.x, with or without CUDA. Nothing here throws.
#pragma once

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <torch/data/example.h>
#include <torch/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <traceml/hooks.hpp>
#include <traceml/traceml.hpp>

// TRACEML_TORCH_CUDA (1 or 0) says whether the LibTorch build has CUDA. The
// traceml::torch target defines it from LibTorch's CMake targets; without it,
// we guess from the headers. c10/cuda's headers alone do not tell: a CPU-only
// LibTorch ships them too, and they need the CUDA toolkit's headers to compile.
#if !defined(TRACEML_TORCH_CUDA)
#if __has_include(<c10/cuda/CUDACachingAllocator.h>) && __has_include(<cuda_runtime_api.h>)
#define TRACEML_TORCH_CUDA 1
#else
#define TRACEML_TORCH_CUDA 0
#endif
#endif

#if TRACEML_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace traceml {

/// Copies a tensor to `device` and times the copy as the step's H2D phase.
/// With non_blocking (from pinned memory to a GPU) the copy is only queued, so
/// the CPU time recorded is the launch; the GPU clock measures the transfer.
inline torch::Tensor to_device(const torch::Tensor& tensor, const torch::Device& device,
                               bool non_blocking = false) {
  PhaseScope h2d(Phase::H2D);
  return tensor.to(device, non_blocking);
}

/// Copies a batch's data and target to `device` as one H2D phase.
inline torch::data::Example<> to_device(const torch::data::Example<>& batch,
                                        const torch::Device& device, bool non_blocking = false) {
  PhaseScope h2d(Phase::H2D);
  torch::Tensor data = batch.data.to(device, non_blocking);
  torch::Tensor target = batch.target.to(device, non_blocking);
  return torch::data::Example<>(std::move(data), std::move(target));
}

namespace detail {

/// The reason a profiler hook last failed on this thread (what the hook returns).
inline const char* torch_profiler_failure(const char* what) noexcept {
  thread_local std::string why;
  try {
    why = what;
    why = why.substr(0, why.find('\n'));  // c10's messages go on with a backtrace
    return why.c_str();
  } catch (...) {
    return "LibTorch's profiler failed";
  }
}

// An event's start and duration: LibTorch 1.13 gives microseconds (startUs),
// 2.x nanoseconds (startNs); the overload that compiles is the one used.
template <class E>
auto torch_event_start_ns(const E& e, int) -> decltype(std::int64_t(e.startNs())) {
  return std::int64_t(e.startNs());
}
template <class E>
std::int64_t torch_event_start_ns(const E& e, long) {
  return std::int64_t(e.startUs()) * 1000;
}
template <class E>
auto torch_event_duration_ns(const E& e, int) -> decltype(std::int64_t(e.durationNs())) {
  return std::int64_t(e.durationNs());
}
template <class E>
std::int64_t torch_event_duration_ns(const E& e, long) {
  return std::int64_t(e.durationUs()) * 1000;
}

/// Runs `f` (a profiler call: nullptr or a reason), its exception as the
/// reason; `otherwise` for one that says nothing.
template <class F>
const char* torch_profiler_call(F&& f, const char* otherwise) noexcept {
  try {
    return f();
  } catch (const c10::Error& e) {
    return torch_profiler_failure(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return torch_profiler_failure(e.what());
  } catch (...) {
    return otherwise;
  }
}

/// Whether a capture asks for the GPU's kernels and copies too: set by
/// use_device() once the program's CUDA device is known (traceml's own
/// CUPTI records lend CUPTI to the profiler for the captured steps).
inline std::atomic<bool>& torch_profile_gpu() noexcept {
  static std::atomic<bool> on{false};
  return on;
}

/// ProfilerHooks::start: LibTorch's profiler (the KINETO state, CPU
/// operators, their input shapes; with a CUDA device, its kernels and copies)
/// on the calling thread.
inline const char* start_torch_profiler() noexcept {
  return torch_profiler_call(
      []() -> const char* {
        namespace impl = torch::profiler::impl;
        const impl::ProfilerConfig config(impl::ProfilerState::KINETO,
                                          /*report_input_shapes=*/true);
        std::set<impl::ActivityType> activities{impl::ActivityType::CPU};
        if (torch_profile_gpu().load(std::memory_order_acquire))
          activities.insert(impl::ActivityType::CUDA);
        torch::autograd::profiler::prepareProfiler(config, activities);
        torch::autograd::profiler::enableProfiler(config, activities);
        return nullptr;
      },
      "LibTorch's profiler failed to start");
}

/// ProfilerHooks::stop: the profiler off, its result kept as the capture.
inline const char* stop_torch_profiler(void** capture) noexcept {
  if (capture == nullptr) return "no place for the capture";
  *capture = nullptr;
  return torch_profiler_call(
      [capture]() -> const char* {
        *capture = torch::autograd::profiler::disableProfiler().release();
        return *capture != nullptr ? nullptr : "LibTorch's profiler returned no result";
      },
      "LibTorch's profiler failed to stop");
}

/// "[[64, 784], [256, 784]]".
inline void append_torch_shapes(std::string& out,
                                const c10::ArrayRef<std::vector<std::int64_t>>& shapes) {
  out += '[';
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i > 0) out += ", ";
    out += '[';
    for (std::size_t j = 0; j < shapes[i].size(); ++j) {
      if (j > 0) out += ", ";
      out += std::to_string(shapes[i][j]);
    }
    out += ']';
  }
  out += ']';
}

/// ProfilerHooks::read: each event of the capture to `sink`, then the
/// capture freed.
inline void read_torch_profile(void* capture, ProfiledOpSink sink, void* context) noexcept {
  using Result = torch::autograd::profiler::ProfilerResult;
  std::unique_ptr<Result> result(static_cast<Result*>(capture));
  if (!result || sink == nullptr) return;
  try {
    std::string name;
    std::string shapes;
    for (const auto& e : result->events()) {
      name = e.name();
      shapes.clear();
      if (e.hasShapes()) append_torch_shapes(shapes, e.shapes());
      ProfiledOp op;
      op.name = name;
      op.start_us = torch_event_start_ns(e, 0) / 1000;
      op.duration_us = torch_event_duration_ns(e, 0) / 1000;
      op.thread = e.startThreadId();
      op.sequence = e.sequenceNr();
      op.gpu = e.deviceType() != c10::DeviceType::CPU;
      op.shapes = shapes;
      sink(context, op);
    }
  } catch (...) {
    // What was handed on stays; the rest of this capture is lost.
  }
}

/// ProfilerHooks::save: Kineto's own Chrome trace of the capture (a LibTorch
/// built without Kineto, as Debian's 1.13, throws: its reason).
inline const char* save_torch_profile(void* capture, const char* path) noexcept {
  if (capture == nullptr || path == nullptr) return "no capture";
  return torch_profiler_call(
      [capture, path]() -> const char* {
        static_cast<torch::autograd::profiler::ProfilerResult*>(capture)->save(path);
        return nullptr;
      },
      "LibTorch's profiler could not save its trace");
}

/// Hands LibTorch's profiler to the runtime (for --profile-steps).
inline void install_torch_profiler() noexcept {
  ProfilerHooks hooks;
  hooks.start = &start_torch_profiler;
  hooks.stop = &stop_torch_profiler;
  hooks.read = &read_torch_profile;
  hooks.save = &save_torch_profile;
  set_profiler_hooks(hooks);
}

/// Including this header installs the profiler's hooks, before main():
/// `--profile-steps` works on a CPU without any call (issue 47). The
/// runtime's hook table is constant-initialized, so the order of static
/// initializers does not matter; use_device() installs them again.
inline const bool torch_profiler_installed = (install_torch_profiler(), true);

#if TRACEML_TORCH_CUDA
/// The device whose allocator the memory hook reads (-1: none yet) and its
/// memory in bytes (0: unknown). Set once by use_device(); read by the
/// hooks from the training and the sampler threads.
struct TorchCudaTarget {
  std::atomic<int> device{-1};
  std::atomic<double> total_bytes{0.0};
};

inline TorchCudaTarget& torch_cuda_target() noexcept {
  static TorchCudaTarget target;
  return target;
}

/// GpuMemoryReader over LibTorch's CUDA caching allocator.
inline bool read_torch_cuda_memory(GpuMemoryReading* out, bool reset_peaks) noexcept {
  if (out == nullptr) return false;
  const TorchCudaTarget& target = torch_cuda_target();
  const int device = target.device.load(std::memory_order_acquire);
  if (device < 0) return false;
  try {
    const auto index = static_cast<c10::DeviceIndex>(device);
    // getDeviceStats takes an int in 1.13 and a c10::DeviceIndex in 2.x; its
    // DeviceStats moved from c10::cuda::CUDACachingAllocator to
    // c10::CachingDeviceAllocator (re-exported under the old name) with the
    // same allocated_bytes / reserved_bytes arrays of Stat{current, peak, ...}.
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    // Each array is indexed by StatType, whose AGGREGATE (every pool) is 0 in
    // all versions; the enum itself changed namespace, the index did not.
    constexpr std::size_t kAggregate = 0;
    const auto& allocated = stats.allocated_bytes[kAggregate];
    const auto& reserved = stats.reserved_bytes[kAggregate];
    GpuMemoryReading reading;
    reading.device = device;
    reading.allocated_bytes = static_cast<double>(allocated.current);
    reading.reserved_bytes = static_cast<double>(reserved.current);
    reading.peak_allocated_bytes = static_cast<double>(allocated.peak);
    reading.peak_reserved_bytes = static_cast<double>(reserved.peak);
    reading.total_bytes = target.total_bytes.load(std::memory_order_relaxed);
    // Between the read and the reset an allocation can raise a peak that the
    // reset then forgets; it is caught by the current values of the next read.
    if (reset_peaks) c10::cuda::CUDACachingAllocator::resetPeakStats(index);
    *out = reading;
    return true;
  } catch (...) {
    return false;
  }
}

/// CurrentCudaStream: the stream LibTorch sends the calling thread's work on
/// `device` to (-1: the thread's current device); null when that is the legacy
/// default stream.
inline void* current_torch_cuda_stream(int device) noexcept {
  try {
    const auto index = static_cast<c10::DeviceIndex>(device < 0 ? -1 : device);
    return static_cast<void*>(c10::cuda::getCurrentCUDAStream(index).stream());
  } catch (...) {
    return nullptr;
  }
}
#endif

}  // namespace detail

/// Note: to make each step's peak its own, traceml resets the allocator's peak
/// statistics at every step end, so the program's own
/// max_memory_allocated()-style readings then cover one step too.
///
/// Tells traceml the device this rank trains on. On a CUDA device, traceml
/// then sees LibTorch's CUDA side for it: the GPU clock records its
/// events on LibTorch's current CUDA stream of the calling thread, and each
/// step reports the peak memory allocated and reserved by the CUDA caching
/// allocator of `device` (STEP MEMORY). Call once after traceml::init(), on the
/// training thread, with the training's current CUDA device set (as
/// c10::cuda::set_device or a CUDAGuard do; one device per rank).
///
/// Does nothing when `device` is not a CUDA device, when LibTorch was built
/// without CUDA (TRACEML_TORCH_CUDA is 0) or when no GPU is usable. Without
/// it, step memory is reported as not measured, and the GPU clock (which
/// starts by itself once the program uses a GPU) records its events on the
/// legacy default stream, which is LibTorch's current stream unless the
/// program switches streams. Never throws.
///
/// Call it with the rank's device whatever it is: on a CPU it does nothing
/// more than the CPU clock already does (LibTorch's profiler hooks come with
/// this header), so one line serves a program that runs on either.
inline void use_device(const torch::Device& device) noexcept {
  detail::install_torch_profiler();
#if TRACEML_TORCH_CUDA
  try {
    if (!device.is_cuda() || !torch::cuda::is_available()) return;
    const c10::DeviceIndex index =
        device.has_index() ? device.index() : c10::cuda::current_device();
    // A zero-size tensor on the device initialises LibTorch's CUDA state (the
    // caching allocator included) as the first CUDA tensor of the program
    // would; 1.13's allocator must not be asked for statistics before that.
    (void)torch::empty({0}, torch::TensorOptions().device(torch::kCUDA, index));
    detail::TorchCudaTarget& target = detail::torch_cuda_target();
    {
      const c10::cuda::CUDAGuard guard(index);
      std::size_t free_bytes = 0;
      std::size_t total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
        target.total_bytes.store(static_cast<double>(total_bytes), std::memory_order_relaxed);
      }
    }
    target.device.store(index, std::memory_order_release);
    detail::set_gpu_hooks(&detail::read_torch_cuda_memory, &detail::current_torch_cuda_stream);
    detail::torch_profile_gpu().store(true, std::memory_order_release);
  } catch (...) {
    // No GPU hooks: traceml keeps the CPU clock.
  }
#else
  (void)device;
#endif
}

/// The former name of use_device() (kept: it was public, and programs call it
/// on CPU and GPU alike).
inline void enable_torch_cuda(const torch::Device& device) noexcept {
  use_device(device);
}

/// enable_torch_cuda() for the current CUDA device, when LibTorch has CUDA and
/// a GPU is usable; otherwise only the profiler's hooks.
inline void enable_torch_cuda() noexcept {
  detail::install_torch_profiler();
#if TRACEML_TORCH_CUDA
  try {
    if (!torch::cuda::is_available()) return;
    use_device(torch::Device(torch::kCUDA, c10::cuda::current_device()));
  } catch (...) {
    // No GPU hooks: traceml keeps the CPU clock.
  }
#endif
}

/// The former name of enable_torch_cuda() (kept: it was public). It now installs
/// the GPU clock's stream hook as well as the memory reader.
inline void enable_cuda_memory_tracking() noexcept {
  enable_torch_cuda();
}

}  // namespace traceml
