// The runtime's GPU side (gpu_side.hpp): split from runtime.cpp, which keeps
// init(), shutdown() and the hot path.
#include "runtime/gpu_side.hpp"

#include <cstdlib>
#include <string>

namespace traceml::runtime {

std::atomic<detail::GpuMemoryReader> g_memory_reader{nullptr};
std::atomic<detail::CurrentCudaStream> g_current_stream{nullptr};

std::atomic<GpuClock*> g_gpu_clock{nullptr};
std::atomic<timing::CuptiDutyCycle*> g_cupti_duty{nullptr};
std::atomic<timing::CuptiDutyCycle*> g_cupti_lender{nullptr};
std::atomic<bool> g_cupti_unlendable{false};

timing::CuptiDutyCycle* cupti_lender(std::string& refusal) {
  if (auto* lender = g_cupti_lender.load(std::memory_order_acquire)) {
    // Kineto then finalizes CUPTI on a thread of its own some time after
    // the profiler stopped: under traceml's records, taken back by then.
    const char* teardown = std::getenv("TEARDOWN_CUPTI");
    if (teardown != nullptr && std::string(teardown) == "1") {
      refusal =
          "TEARDOWN_CUPTI=1 makes LibTorch's profiler finalize CUPTI after the capture, under "
          "traceml's own CUPTI records (unset it, or set TRACEML_CUPTI=0 on the ranks, to "
          "profile)";
      return nullptr;
    }
    return lender;
  }
  if (g_cupti_unlendable.load(std::memory_order_acquire))
    refusal =
        "traceml's own CUPTI records are on and cannot be lent to LibTorch's profiler (set "
        "TRACEML_CUPTI=0 on the ranks to profile)";
  return nullptr;
}

void* current_stream(int device) {
  const detail::CurrentCudaStream hook = g_current_stream.load(std::memory_order_acquire);
  return hook != nullptr ? hook(device) : nullptr;
}

std::optional<timing::CudaApi> g_cuda_api;

/// Before a profile capture takes CUPTI from traceml's records (the training
/// thread, at a step edge): the timed device finishes its work, so that the
/// steps before the capture keep whole records. Never during a CUDA graph
/// capture on this thread's stream (the sync would invalidate it; the
/// capture is then refused), in relaxed capture mode (another thread's
/// capture is not disturbed), on the timed device (the current one may
/// differ), and without leaving an error for the program's next check.
bool settle_gpu() noexcept {
  const GpuClock* clock = g_gpu_clock.load(std::memory_order_acquire);
  if (!g_cuda_api || clock == nullptr || !clock->device()) return true;  // nothing timed
  const timing::CudaApi& api = *g_cuda_api;
  if (api.device_synchronize == nullptr) return true;  // none to call: as before
  const int device = *clock->device();
  if (api.stream_is_capturing != nullptr) {
    int status = 0;
    if (api.stream_is_capturing(current_stream(device), &status) != timing::kCudaSuccess ||
        status != 0) {
      if (api.get_last_error != nullptr) api.get_last_error();
      return false;
    }
  }
  int mode = timing::kCudaStreamCaptureModeRelaxed;
  const bool relaxed = api.thread_exchange_capture_mode != nullptr &&
                       api.thread_exchange_capture_mode(&mode) == timing::kCudaSuccess;
  int previous = device;
  const bool switched = api.set_device != nullptr &&
                        api.get_device(&previous) == timing::kCudaSuccess && previous != device &&
                        api.set_device(device) == timing::kCudaSuccess;
  const bool settled = api.device_synchronize() == timing::kCudaSuccess;
  if (switched) api.set_device(previous);
  if (relaxed) api.thread_exchange_capture_mode(&mode);  // the thread's own mode again
  if (!settled && api.get_last_error != nullptr) api.get_last_error();
  return settled;
}

std::optional<model::ProcessGpu> process_gpu_memory() noexcept {
  const detail::GpuMemoryReader reader = g_memory_reader.load(std::memory_order_acquire);
  detail::GpuMemoryReading m;
  if (reader == nullptr || !reader(&m, /*reset_peaks=*/false)) return std::nullopt;
  model::ProcessGpu g;
  g.device = m.device;
  g.allocated_bytes = m.allocated_bytes;
  g.reserved_bytes = m.reserved_bytes;
  if (m.total_bytes > 0.0) g.total_bytes = m.total_bytes;
  return g;
}

std::optional<StepMemoryPeak> read_step_memory() noexcept {
  const detail::GpuMemoryReader reader = g_memory_reader.load(std::memory_order_acquire);
  detail::GpuMemoryReading m;
  if (reader == nullptr || !reader(&m, /*reset_peaks=*/true)) return std::nullopt;
  return StepMemoryPeak{m.device, m.peak_allocated_bytes, m.peak_reserved_bytes};
}

}  // namespace traceml::runtime
