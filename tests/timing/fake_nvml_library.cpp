// A stand-in libnvidia-ml for nvml_test: a real shared library that
// load_nvml_api() opens with dlopen, exporting NVML's required entry points
// and nvmlDeviceGetMemoryInfo but none of the other readings (utilisation,
// temperature, power, power limit) nor nvmlErrorString, as a driver that
// dropped a deprecated call would. One GPU of 80 GiB with 1 GiB used.

// The reading's struct is traceml's own (timing/nvml.hpp), declared by name
// only: a function whose type differs from the pointer it is called through
// is undefined behaviour (UBSan's -fsanitize=function checks the types).
namespace traceml::timing {
struct NvmlMemory;
}  // namespace traceml::timing

namespace {
int g_device = 0;  // the one device's handle points here
}  // namespace

extern "C" {

struct FakeNvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

__attribute__((visibility("default"))) int nvmlInit_v2() {
  return 0;
}
__attribute__((visibility("default"))) int nvmlShutdown() {
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = 1;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                         void** device) {
  if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &g_device;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(
    void* device, traceml::timing::NvmlMemory* reading) {
  if (device != &g_device) return 2;
  auto* memory = reinterpret_cast<FakeNvmlMemory*>(reading);  // the same layout as nvmlMemory_t
  constexpr unsigned long long kGiB = 1024ULL * 1024ULL * 1024ULL;
  memory->total = 80 * kGiB;
  memory->used = 1 * kGiB;
  memory->free = 79 * kGiB;
  return 0;
}

}  // extern "C"
