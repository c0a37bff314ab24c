#include "timing/nvml.hpp"
#include "timing/dynamic_library.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>

namespace traceml::timing {

// The structs are handed to NVML as C arrays: their layout must be nvml.h's.
static_assert(sizeof(NvmlUtilization) == 8, "nvmlUtilization_t is two unsigned ints");
static_assert(sizeof(NvmlMemory) == 24, "nvmlMemory_t is three unsigned long longs");
static_assert(offsetof(NvmlProcessInfo, used_gpu_memory) == 8 &&
                  offsetof(NvmlProcessInfo, gpu_instance_id) == 16 && sizeof(NvmlProcessInfo) == 24,
              "nvmlProcessInfo_t is {uint pid; ull usedGpuMemory; uint gpuInstanceId; uint "
              "computeInstanceId}");

namespace {

/// The process buffer starts with room for this many entries, which covers a
/// node with one process per GPU and a few tools.
constexpr std::size_t kInitialProcessCapacity = 32;
/// Growth stops here (96 KiB of entries): a GPU with more compute processes
/// than this is not one a training job shares.
constexpr std::size_t kMaxProcessCapacity = 4096;
/// Processes can start between the query that sizes the buffer and the one
/// that fills it, so the retry is bounded rather than a loop until it fits.
constexpr int kProcessQueryAttempts = 4;

using A = NvmlApi;

// Each reading on its own: a driver without one of them (newer drivers
// deprecate nvmlDeviceGetTemperature) leaves that value absent, not NVML off.
constexpr auto kEntryPoints = std::make_tuple(
    required_entry("nvmlInit_v2", &A::init), required_entry("nvmlShutdown", &A::shutdown),
    required_entry("nvmlDeviceGetCount_v2", &A::device_get_count),
    required_entry("nvmlDeviceGetHandleByIndex_v2", &A::device_get_handle_by_index),
    optional_entry("nvmlDeviceGetUtilizationRates", &A::device_get_utilization_rates),
    optional_entry("nvmlDeviceGetMemoryInfo", &A::device_get_memory_info),
    optional_entry("nvmlDeviceGetTemperature", &A::device_get_temperature),
    optional_entry("nvmlDeviceGetPowerUsage", &A::device_get_power_usage),
    optional_entry("nvmlDeviceGetEnforcedPowerLimit", &A::device_get_enforced_power_limit),
    optional_entry("nvmlErrorString", &A::error_string));

NvmlApiLoad load(const std::vector<std::string>& library_names) {
  NvmlApiLoad out;
  NvmlApi api;
  auto lib = open_api(out, api, "libnvidia-ml", library_names, kEntryPoints);
  if (!lib.complete()) return out;
  out.absent = absent_entry_points(kEntryPoints, api);
  // Drivers before R470 have neither: node metrics still work without them.
  if (!lib.resolve("nvmlDeviceGetComputeRunningProcesses_v3",
                   api.device_get_compute_running_processes)) {
    lib.resolve("nvmlDeviceGetComputeRunningProcesses_v2",
                api.device_get_compute_running_processes);
  }
  // Kept: a sampler may hold the api until the process ends, and closing the
  // library under an initialised NVML is not supported.
  lib.keep();
  NvmlApiLoad ready = initialize_nvml(api);
  ready.library = out.library;
  ready.absent = std::move(out.absent);
  return ready;
}

NvmlApiLoad initialize(const NvmlApi& api) {
  NvmlApiLoad out;
  const int err = api.init();
  if (err != kNvmlSuccess) {
    out.reason = "NVML unavailable: nvmlInit_v2 returned " + describe_nvml_error(api, err);
    return out;
  }
  unsigned count = 0;
  const int count_err = api.device_get_count(&count);
  if (count_err != kNvmlSuccess || count == 0) {
    out.reason = count_err != kNvmlSuccess ? "NVML unavailable: nvmlDeviceGetCount_v2 returned " +
                                                 describe_nvml_error(api, count_err)
                                           : "no NVIDIA GPU: NVML sees 0 devices";
    api.shutdown();  // balance our init: nothing will use it
    return out;
  }
  out.api = api;
  return out;
}

}  // namespace

std::vector<std::string> default_nvml_names() {
  return {"libnvidia-ml.so.1", "libnvidia-ml.so"};
}

NvmlApiLoad load_nvml_api(const std::vector<std::string>& library_names) {
  return load_or_out_of_memory<NvmlApiLoad>([&] { return load(library_names); });
}

NvmlApiLoad initialize_nvml(const NvmlApi& api) {
  // Only the reason's strings allocate.
  return load_or_out_of_memory<NvmlApiLoad>([&] { return initialize(api); });
}

std::string describe_nvml_error(const NvmlApi& api, int error) {
  return describe_code(error, api.error_string != nullptr ? api.error_string(error) : nullptr);
}

NvmlSampler::NvmlSampler(const NvmlApi& api) noexcept : api_(api) {
  try {
    // Only the device list is needed; each reading whose entry point is
    // missing stays absent (sample_gpus), as when its query fails.
    const bool complete =
        api_.device_get_count != nullptr && api_.device_get_handle_by_index != nullptr;
    unsigned count = 0;
    if (!complete || api_.device_get_count(&count) != kNvmlSuccess) return;
    devices_.reserve(count);
    for (unsigned i = 0; i < count; ++i) {
      void* device = nullptr;
      // A GPU whose handle cannot be had (lost, no permission) keeps its index
      // with every value absent, so the indices stay NVML's.
      if (api_.device_get_handle_by_index(i, &device) == kNvmlSuccess) {
        devices_.emplace_back(device);
      } else {
        devices_.emplace_back(std::nullopt);
      }
    }
    processes_.resize(kInitialProcessCapacity);
  } catch (...) {  // allocation: sample nothing rather than half a node
    devices_.clear();
    processes_.clear();
  }
}

NvmlSampler::~NvmlSampler() {
  if (api_.shutdown != nullptr) api_.shutdown();
}

std::vector<model::GpuSample> NvmlSampler::sample_gpus() noexcept {
  try {
    std::vector<model::GpuSample> out;
    out.reserve(devices_.size());
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      model::GpuSample g;
      g.index = static_cast<int>(i);
      if (const auto& device = devices_[i]) {
        void* d = *device;
        // A reading whose entry point the library lacks is absent, like one
        // whose query fails.
        NvmlUtilization rates;
        if (api_.device_get_utilization_rates != nullptr &&
            api_.device_get_utilization_rates(d, &rates) == kNvmlSuccess)
          g.util_percent = double(rates.gpu);
        NvmlMemory memory;
        if (api_.device_get_memory_info != nullptr &&
            api_.device_get_memory_info(d, &memory) == kNvmlSuccess) {
          g.mem_used_bytes = double(memory.used);
          g.mem_total_bytes = double(memory.total);
        }
        unsigned celsius = 0;
        if (api_.device_get_temperature != nullptr &&
            api_.device_get_temperature(d, kNvmlTemperatureGpu, &celsius) == kNvmlSuccess)
          g.temperature_c = double(celsius);
        // NVML speaks milliwatts; the spec's power figures are watts.
        unsigned milliwatts = 0;
        if (api_.device_get_power_usage != nullptr &&
            api_.device_get_power_usage(d, &milliwatts) == kNvmlSuccess)
          g.power_w = double(milliwatts) / 1000.0;
        if (api_.device_get_enforced_power_limit != nullptr &&
            api_.device_get_enforced_power_limit(d, &milliwatts) == kNvmlSuccess)
          g.power_limit_w = double(milliwatts) / 1000.0;
      }
      out.push_back(g);
    }
    return out;
  } catch (...) {  // allocation: no sample this tick rather than an escaped exception
    return {};
  }
}

std::optional<std::size_t> NvmlSampler::running_processes(void* device) {
  for (int attempt = 0; attempt < kProcessQueryAttempts && !processes_.empty(); ++attempt) {
    unsigned count = static_cast<unsigned>(processes_.size());
    const int err = api_.device_get_compute_running_processes(device, &count, processes_.data());
    if (err == kNvmlSuccess) return std::min<std::size_t>(count, processes_.size());
    if (err != kNvmlErrorInsufficientSize || processes_.size() >= kMaxProcessCapacity)
      return std::nullopt;
    // `count` is what is needed now; half again as much absorbs processes
    // that start before the next call. The buffer keeps its size afterwards.
    const std::size_t needed = std::size_t(count) + std::size_t(count) / 2;
    processes_.resize(std::min(std::max(needed, processes_.size() * 2), kMaxProcessCapacity));
  }
  return std::nullopt;
}

std::optional<model::ProcessGpu> NvmlSampler::find_process(unsigned pid) {
  std::optional<std::size_t> top;  // the device the process uses most
  double top_bytes = 0.0;
  std::optional<double> used_bytes;  // over every device where NVML accounts it
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (!devices_[i]) continue;
    const auto n = running_processes(*devices_[i]);
    if (!n) continue;
    bool listed = false;
    double on_device = 0.0;
    for (std::size_t k = 0; k < *n; ++k) {
      const NvmlProcessInfo& p = processes_[k];
      if (p.pid != pid) continue;
      listed = true;
      // Under MIG one process can be listed once per instance it uses.
      if (p.used_gpu_memory != kNvmlValueNotAvailable) {
        on_device += double(p.used_gpu_memory);
        used_bytes = used_bytes.value_or(0.0) + double(p.used_gpu_memory);
      }
    }
    if (!listed) continue;
    if (!top || on_device > top_bytes) {
      top = i;
      top_bytes = on_device;
    }
  }
  if (!top) return std::nullopt;
  model::ProcessGpu out;
  out.device = static_cast<int>(*top);
  out.reserved_bytes = used_bytes;
  NvmlMemory memory;
  if (api_.device_get_memory_info != nullptr &&
      api_.device_get_memory_info(*devices_[*top], &memory) == kNvmlSuccess)
    out.total_bytes = double(memory.total);
  return out;
}

std::optional<model::ProcessGpu> NvmlSampler::process_gpu(std::int64_t pid) noexcept {
  // NVML pids are unsigned int; anything outside that range is nobody NVML lists.
  if (pid <= 0 || pid > std::int64_t(std::numeric_limits<unsigned>::max())) return std::nullopt;
  if (api_.device_get_compute_running_processes == nullptr) return std::nullopt;
  try {
    return find_process(static_cast<unsigned>(pid));
  } catch (...) {  // allocation while growing the buffer
    return std::nullopt;
  }
}

}  // namespace traceml::timing
