// The few CUDA runtime entry points the GPU clock needs, as plain function
// pointers found at run time (dlopen), so that one build runs on machines
// with and without CUDA and no CUDA header reaches our headers. Tests fill the
// same struct with fakes (tests/timing/gpu_timer_test.cpp), as libkineto does
// with CUPTI.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace traceml::timing {

/// cudaError_t values we act on (driver_types.h; stable across CUDA releases).
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaErrorInsufficientDriver = 35;
inline constexpr int kCudaErrorNoDevice = 100;
/// cudaEventQuery's "recorded work not finished yet": not an error.
inline constexpr int kCudaErrorNotReady = 600;
/// cudaEventDefault: a timing-enabled event whose waits spin. We never wait on
/// an event, and cudaEventBlockingSync would only matter to a synchronize.
inline constexpr unsigned kCudaEventDefault = 0;

/// CUDA runtime functions with their C ABI: events and streams are opaque
/// pointers (cudaEvent_t, cudaStream_t), errors are the int of cudaError_t.
/// A null stream is the legacy default stream. Every pointer is set in a
/// CudaApi that load_cuda_api() returns.
struct CudaApi {
  int (*get_device_count)(int* count) = nullptr;
  int (*get_device)(int* device) = nullptr;
  int (*event_create_with_flags)(void** event, unsigned flags) = nullptr;
  int (*event_record)(void* event, void* stream) = nullptr;
  int (*event_query)(void* event) = nullptr;
  int (*event_elapsed_time)(float* ms, void* start, void* end) = nullptr;
  int (*event_destroy)(void* event) = nullptr;
  const char* (*get_error_string)(int error) = nullptr;
  /// Whether the program has started using `device` (its primary context is
  /// active), without creating anything: the driver's
  /// cuDevicePrimaryCtxGetState. Sets *active and returns 0, or returns the
  /// driver's error. Null when the driver library lacks it.
  int (*primary_context_active)(int device, int* active) = nullptr;
  /// Optional (null: not used). cudaGetLastError: clears the calling thread's
  /// last error after a failed call of ours, so that the program's own next
  /// error check (LibTorch checks after each launch) does not see it.
  int (*get_last_error)() = nullptr;
  /// cudaStreamIsCapturing: sets *status (0: not capturing). Events must not
  /// be recorded into a stream being captured into a CUDA graph.
  int (*stream_is_capturing)(void* stream, int* status) = nullptr;
  /// cudaThreadExchangeStreamCaptureMode: the resolver's thread switches to
  /// relaxed mode, so that its event queries never invalidate a capture
  /// another thread is making in global mode.
  int (*thread_exchange_capture_mode)(int* mode) = nullptr;
  /// Optional (null: not used). cudaSetDevice: the sender's thread selects
  /// the timed device before it queries events, so that a rank on device 1
  /// never makes device 0 current (or creates a context there).
  int (*set_device)(int device) = nullptr;
  /// Optional (null: not used). cudaDeviceSynchronize: before traceml's CUPTI
  /// records are lent to LibTorch's profiler, the training thread's device
  /// finishes its work, so that the records of the steps before come back
  /// whole.
  int (*device_synchronize)() = nullptr;
};
/// cudaStreamCaptureModeRelaxed.
inline constexpr int kCudaStreamCaptureModeRelaxed = 2;

/// What looking for CUDA found: the api when this process can time on a GPU,
/// otherwise one line saying why not.
struct CudaApiLoad {
  std::optional<CudaApi> api;
  std::string reason;   ///< empty when api is set
  std::string library;  ///< the library that was opened (empty if none)
};

/// The CUDA runtime libraries tried in order: the sonames of CUDA 13 and 12,
/// then the unversioned development link. In a LibTorch process the first
/// match is usually the libcudart torch already loaded.
std::vector<std::string> default_cudart_names();

/// Opens the first of `library_names` that loads (RTLD_NOW | RTLD_LOCAL; a
/// name with a slash is a path), resolves the entry points and asks for the
/// device count. The library stays loaded for the life of the process:
/// unloading libcudart while CUDA objects exist is unsafe. Never throws.
CudaApiLoad load_cuda_api(const std::vector<std::string>& library_names);
inline CudaApiLoad load_cuda_api() {
  return load_cuda_api(default_cudart_names());
}

/// "35 (CUDA driver version is insufficient ...)": the error's number and,
/// when the api has cudaGetErrorString, its text.
std::string describe_cuda_error(const CudaApi& api, int error);

}  // namespace traceml::timing
