// NVML (the NVIDIA Management Library) found at run time, for what the node's
// GPUs are doing: utilisation, memory, temperature and power (the System
// section) and how much GPU memory one process holds (the Process section).
// Like cuda_api.hpp, the entry points are plain function pointers filled by
// dlopen, so one build runs with and without a driver, no NVML header reaches
// our headers, and tests fill the table with fakes (tests/timing/nvml_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/telemetry.hpp"

namespace traceml::timing {

/// nvmlReturn_t values we act on (nvml.h; stable across driver releases).
inline constexpr int kNvmlSuccess = 0;
inline constexpr int kNvmlErrorNotSupported = 3;
/// The caller's buffer is too small; the count argument now holds what is needed.
inline constexpr int kNvmlErrorInsufficientSize = 7;
inline constexpr int kNvmlErrorDriverNotLoaded = 9;
/// NVML_TEMPERATURE_GPU: the GPU die sensor, the only one nvmlDeviceGetTemperature reads.
inline constexpr int kNvmlTemperatureGpu = 0;
/// NVML_VALUE_NOT_AVAILABLE: what a per-process memory field holds when the
/// driver does not account it (WDDM, some MIG and vGPU setups).
inline constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

/// nvmlUtilization_t: percent of the last sample period (1/6 s to 1 s, by
/// product) during which a kernel ran, and the memory controller was busy.
struct NvmlUtilization {
  unsigned gpu = 0;
  unsigned memory = 0;
};

/// nvmlMemory_t (v1), bytes.
struct NvmlMemory {
  unsigned long long total = 0;
  unsigned long long free = 0;
  unsigned long long used = 0;
};

/// nvmlProcessInfo_t, the layout that nvmlDeviceGetComputeRunningProcesses_v2
/// and _v3 both fill (nvml.h calls it nvmlProcessInfo_v2_t too). The
/// unversioned v1 entry point takes a shorter struct and is not used.
struct NvmlProcessInfo {
  unsigned pid = 0;
  unsigned long long used_gpu_memory = 0;  ///< bytes, or kNvmlValueNotAvailable
  unsigned gpu_instance_id = 0;            ///< MIG only
  unsigned compute_instance_id = 0;        ///< MIG only
};

/// NVML functions with their C ABI: a device (nvmlDevice_t) is an opaque
/// pointer, errors are the int of nvmlReturn_t, enums are passed as int.
/// init, shutdown, device_get_count and device_get_handle_by_index are set in
/// every NvmlApi that load_nvml_api() returns; each of the others is null when
/// the library lacks it (NvmlApiLoad::absent names them), and the reading it
/// gives is then absent.
struct NvmlApi {
  int (*init)() = nullptr;                                                     ///< nvmlInit_v2
  int (*shutdown)() = nullptr;                                                 ///< nvmlShutdown
  int (*device_get_count)(unsigned* count) = nullptr;                          ///< _v2
  int (*device_get_handle_by_index)(unsigned index, void** device) = nullptr;  ///< _v2
  int (*device_get_utilization_rates)(void* device, NvmlUtilization* rates) = nullptr;
  int (*device_get_memory_info)(void* device, NvmlMemory* memory) = nullptr;
  int (*device_get_temperature)(void* device, int sensor, unsigned* celsius) = nullptr;
  int (*device_get_power_usage)(void* device, unsigned* milliwatts) = nullptr;
  int (*device_get_enforced_power_limit)(void* device, unsigned* milliwatts) = nullptr;
  /// nvmlDeviceGetComputeRunningProcesses_v3, else _v2; null when the library
  /// has neither (then process GPU memory is not known).
  int (*device_get_compute_running_processes)(void* device, unsigned* count,
                                              NvmlProcessInfo* infos) = nullptr;
  const char* (*error_string)(int error) = nullptr;  ///< nvmlErrorString
};

/// What looking for NVML found: an initialised api when the node has an
/// NVIDIA GPU NVML can see, otherwise one line saying why not.
struct NvmlApiLoad {
  std::optional<NvmlApi> api;
  std::string reason;   ///< empty when api is set
  std::string library;  ///< the library that was opened (empty if none)
  /// The optional entry points the library lacks (their readings stay
  /// absent), e.g. "nvmlDeviceGetTemperature"; empty when it has them all.
  std::vector<std::string> absent;
};

/// The NVML libraries tried in order: the driver's soname, then the
/// unversioned development link.
std::vector<std::string> default_nvml_names();

/// Opens the first of `library_names` that loads (RTLD_NOW | RTLD_LOCAL; a
/// name with a slash is a path), resolves the entry points and hands them to
/// initialize_nvml(). The library stays loaded for the life of the process.
/// Never throws.
NvmlApiLoad load_nvml_api(const std::vector<std::string>& library_names);
inline NvmlApiLoad load_nvml_api() {
  return load_nvml_api(default_nvml_names());
}

/// Calls nvmlInit_v2 and asks for the device count. On success the api comes
/// back with NVML initialised (one reference, which an NvmlSampler built from
/// it takes over); on failure NVML is left as it was and the reason says why.
/// load_nvml_api() ends here; tests call it with fakes. Never throws.
NvmlApiLoad initialize_nvml(const NvmlApi& api);

/// "9 (Driver Not Loaded)": the error's number and, when the api has
/// nvmlErrorString, its text.
std::string describe_nvml_error(const NvmlApi& api, int error);

/// Reads the node's GPUs through an initialised NVML. Device handles are
/// fetched once, at construction. Meant for one thread (the sampler thread):
/// the process query reuses one buffer. Nothing it does throws.
class NvmlSampler {
 public:
  /// `api` comes from a successful load_nvml_api() or initialize_nvml(): the
  /// sampler takes over that initialisation and ends it with nvmlShutdown when
  /// destroyed. NVML counts initialisations, so other users of NVML in the
  /// process (torch) keep theirs. Build one sampler per successful load.
  explicit NvmlSampler(const NvmlApi& api) noexcept;
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  /// How many GPUs NVML reported at construction.
  [[nodiscard]] std::size_t device_count() const noexcept { return devices_.size(); }

  /// One sample per device, in NVML index order (PCI bus order, which is not
  /// CUDA's order unless CUDA_DEVICE_ORDER=PCI_BUS_ID). A value whose query
  /// fails (not supported, no permission, GPU lost) or whose entry point the
  /// library lacks is absent, never 0.
  /// Bytes for memory, watts for power, degrees C, percent for utilisation.
  std::vector<model::GpuSample> sample_gpus() noexcept;

  /// The GPU memory NVML accounts to process `pid`, summed over the devices it
  /// has a compute context on, as `reserved_bytes` (what the process holds on
  /// the device: the CUDA context and the allocator's cache, not only live
  /// tensors; `allocated_bytes` is left for the framework's allocator to
  /// say). `device` is the NVML index of the device it uses most, and
  /// `total_bytes` that device's memory. Absent when the pid is on no device's
  /// list, or the library cannot list processes. NVML reports host pids: in a
  /// container with its own pid namespace the process is not found.
  std::optional<model::ProcessGpu> process_gpu(std::int64_t pid) noexcept;

 private:
  /// Fills processes_ with `device`'s compute processes; the count, or
  /// std::nullopt when the query fails.
  std::optional<std::size_t> running_processes(void* device);
  std::optional<model::ProcessGpu> find_process(unsigned pid);

  NvmlApi api_;
  std::vector<std::optional<void*>> devices_;  ///< absent: the handle lookup failed
  std::vector<NvmlProcessInfo> processes_;     ///< reused buffer, grows on demand
};

}  // namespace traceml::timing
