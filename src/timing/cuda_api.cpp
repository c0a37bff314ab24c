#include "timing/cuda_api.hpp"
#include "timing/dynamic_library.hpp"

namespace traceml::timing {
namespace {

/// The driver entry points behind CudaApi::primary_context_active. Set once,
/// before any CudaApi that points at the wrapper is handed out.
struct DriverApi {
  int (*device_get)(int* device, int ordinal) = nullptr;
  int (*primary_ctx_get_state)(int device, unsigned* flags, int* active) = nullptr;
};
DriverApi g_driver;

int primary_context_active(int ordinal, int* active) {
  int device = 0;
  if (const int err = g_driver.device_get(&device, ordinal); err != 0) return err;
  unsigned flags = 0;
  return g_driver.primary_ctx_get_state(device, &flags, active);
}

/// Finds the driver's context query in libcuda (already loaded by libcudart
/// once it found a driver). cuInit creates no context; it only makes the
/// driver API usable from this library handle.
void load_driver_query(CudaApi& api) {
  static const bool loaded = [] {
    auto lib = DynamicLibrary::open_first("libcuda", {"libcuda.so.1"});
    int (*init)(unsigned) = nullptr;
    DriverApi d;
    lib.require("cuInit", init);
    lib.require("cuDeviceGet", d.device_get);
    lib.require("cuDevicePrimaryCtxGetState", d.primary_ctx_get_state);
    if (!lib.complete()) return false;
    lib.keep();  // cuInit's state lives in this library
    if (init(0) != 0) return false;
    g_driver = d;
    return true;
  }();
  if (loaded) api.primary_context_active = primary_context_active;
}

using A = CudaApi;

constexpr auto kEntryPoints = std::make_tuple(
    required_entry("cudaGetDeviceCount", &A::get_device_count),
    required_entry("cudaGetDevice", &A::get_device),
    required_entry("cudaEventCreateWithFlags", &A::event_create_with_flags),
    required_entry("cudaEventRecord", &A::event_record),
    required_entry("cudaEventQuery", &A::event_query),
    required_entry("cudaEventElapsedTime", &A::event_elapsed_time),
    required_entry("cudaEventDestroy", &A::event_destroy),
    required_entry("cudaGetErrorString", &A::get_error_string),
    // Optional: without them we cannot clear our errors or see graph capture.
    optional_entry("cudaGetLastError", &A::get_last_error),
    optional_entry("cudaStreamIsCapturing", &A::stream_is_capturing),
    optional_entry("cudaThreadExchangeStreamCaptureMode", &A::thread_exchange_capture_mode),
    optional_entry("cudaSetDevice", &A::set_device),
    optional_entry("cudaDeviceSynchronize", &A::device_synchronize));

CudaApiLoad load(const std::vector<std::string>& library_names) {
  CudaApiLoad out;
  CudaApi api;
  auto lib = open_api(out, api, "libcudart", library_names, kEntryPoints);
  if (!lib.complete()) return out;
  // Kept from the first call on: CUDA objects we create (events) and torch's
  // own use of the same library outlive any point where closing would be safe.
  lib.keep();
  int count = 0;
  const int err = api.get_device_count(&count);
  if (err == kCudaErrorInsufficientDriver) {
    out.reason = "no CUDA driver: cudaGetDeviceCount returned " + describe_cuda_error(api, err);
  } else if (err == kCudaErrorNoDevice || (err == kCudaSuccess && count <= 0)) {
    out.reason = "no CUDA device";
    if (err != kCudaSuccess)
      out.reason += ": cudaGetDeviceCount returned " + describe_cuda_error(api, err);
  } else if (err != kCudaSuccess) {
    out.reason = "CUDA unavailable: cudaGetDeviceCount returned " + describe_cuda_error(api, err);
  } else {
    load_driver_query(api);
    out.api = api;
  }
  return out;
}

}  // namespace

std::vector<std::string> default_cudart_names() {
  return {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
}

CudaApiLoad load_cuda_api(const std::vector<std::string>& library_names) {
  return load_or_out_of_memory<CudaApiLoad>([&] { return load(library_names); });
}

std::string describe_cuda_error(const CudaApi& api, int error) {
  return describe_code(error,
                       api.get_error_string != nullptr ? api.get_error_string(error) : nullptr);
}

}  // namespace traceml::timing
