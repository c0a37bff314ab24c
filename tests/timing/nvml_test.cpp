// NVML on synthetic devices: a hand-written fake of the entry points (as
// gpu_timer_test.cpp fakes the CUDA runtime) with two GPUs whose readings the
// test sets, so unit conversions, absent values and the process list are
// checked without a driver. The last tests load the real library by name: on
// a machine without a driver that must fail with one line saying why.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "timing/nvml.hpp"

namespace traceml::timing {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr unsigned long long kGiBu = 1024ULL * 1024ULL * 1024ULL;

/// One fake GPU. An absent reading makes its query return NOT_SUPPORTED.
struct FakeDevice {
  std::optional<NvmlUtilization> rates;
  std::optional<NvmlMemory> memory;
  std::optional<unsigned> celsius;
  std::optional<unsigned> power_mw;
  std::optional<unsigned> limit_mw;
  std::vector<NvmlProcessInfo> processes;
  int process_error = kNvmlSuccess;
  /// Every process query says the buffer is too small, asking for more each time.
  bool always_insufficient = false;
  int process_calls = 0;
};

/// The fake NVML. The entry points are plain C function pointers, so they
/// reach the fake through one global; each test owns its FakeNvml.
class FakeNvml {
 public:
  FakeNvml() {
    current_ = this;
    // Device 0: a busy 80 GiB GPU. Device 1: nearly idle.
    devices[0].rates = NvmlUtilization{87, 40};
    devices[0].memory = NvmlMemory{80 * kGiBu, 40 * kGiBu, 40 * kGiBu};
    devices[0].celsius = 64;
    devices[0].power_mw = 312456;
    devices[0].limit_mw = 700000;
    devices[1].rates = NvmlUtilization{3, 1};
    devices[1].memory = NvmlMemory{80 * kGiBu, 79 * kGiBu, 1 * kGiBu};
    devices[1].celsius = 35;
    devices[1].power_mw = 71000;
    devices[1].limit_mw = 650500;
  }
  ~FakeNvml() { current_ = nullptr; }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;

  NvmlApi api() const {
    NvmlApi a;
    a.init = [] {
      ++f().init_calls;
      return f().init_result;
    };
    a.shutdown = [] {
      ++f().shutdown_calls;
      return kNvmlSuccess;
    };
    a.device_get_count = [](unsigned* n) {
      *n = f().count;
      return f().count_result;
    };
    a.device_get_handle_by_index = [](unsigned i, void** d) {
      if (i >= f().devices.size() || f().failing_handle == i) return 15;  // GPU is lost
      *d = &f().devices[i];
      return kNvmlSuccess;
    };
    a.device_get_utilization_rates = [](void* d, NvmlUtilization* r) {
      return read(dev(d).rates, r);
    };
    a.device_get_memory_info = [](void* d, NvmlMemory* m) { return read(dev(d).memory, m); };
    a.device_get_temperature = [](void* d, int sensor, unsigned* c) {
      if (sensor != kNvmlTemperatureGpu) return 2;  // invalid argument
      return read(dev(d).celsius, c);
    };
    a.device_get_power_usage = [](void* d, unsigned* mw) { return read(dev(d).power_mw, mw); };
    a.device_get_enforced_power_limit = [](void* d, unsigned* mw) {
      return read(dev(d).limit_mw, mw);
    };
    a.device_get_compute_running_processes = [](void* d, unsigned* n, NvmlProcessInfo* out) {
      return list(dev(d), n, out);
    };
    a.error_string = [](int e) -> const char* {
      switch (e) {
        case kNvmlErrorNotSupported:
          return "Not Supported";
        case kNvmlErrorDriverNotLoaded:
          return "Driver Not Loaded";
        default:
          return "Unknown Error";
      }
    };
    return a;
  }

  std::array<FakeDevice, 2> devices;
  unsigned count = 2;
  int init_result = kNvmlSuccess;
  int count_result = kNvmlSuccess;
  std::optional<unsigned> failing_handle;
  int init_calls = 0;
  int shutdown_calls = 0;

 private:
  static FakeNvml& f() { return *current_; }
  static FakeDevice& dev(void* d) { return *static_cast<FakeDevice*>(d); }
  template <class T>
  static int read(const std::optional<T>& value, T* out) {
    if (!value) return kNvmlErrorNotSupported;
    *out = *value;
    return kNvmlSuccess;
  }
  static int list(FakeDevice& d, unsigned* n, NvmlProcessInfo* out) {
    ++d.process_calls;
    if (d.process_error != kNvmlSuccess) return d.process_error;
    if (d.always_insufficient) {
      *n = *n * 2 + 1;
      return kNvmlErrorInsufficientSize;
    }
    const auto have = static_cast<unsigned>(d.processes.size());
    if (*n < have) {
      *n = have;
      return kNvmlErrorInsufficientSize;
    }
    for (unsigned k = 0; k < have; ++k)
      out[k] = d.processes[k];
    *n = have;
    return kNvmlSuccess;
  }
  static inline FakeNvml* current_ = nullptr;
};

unsigned our_pid() {
  return static_cast<unsigned>(getpid());
}

NvmlProcessInfo proc(unsigned pid, unsigned long long bytes) {
  NvmlProcessInfo p;
  p.pid = pid;
  p.used_gpu_memory = bytes;
  return p;
}

TEST(NvmlSampler, SamplesEveryDeviceInWattsAndBytes) {
  FakeNvml fake;
  NvmlSampler sampler(fake.api());
  EXPECT_EQ(sampler.device_count(), 2u);
  const auto gpus = sampler.sample_gpus();
  ASSERT_EQ(gpus.size(), 2u);

  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].util_percent, 87.0);
  EXPECT_EQ(gpus[0].mem_used_bytes, 40.0 * kGiB);
  EXPECT_EQ(gpus[0].mem_total_bytes, 80.0 * kGiB);
  EXPECT_EQ(gpus[0].temperature_c, 64.0);
  ASSERT_TRUE(gpus[0].power_w);
  EXPECT_DOUBLE_EQ(*gpus[0].power_w, 312.456);  // milliwatts -> watts
  EXPECT_EQ(gpus[0].power_limit_w, 700.0);

  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[1].util_percent, 3.0);
  EXPECT_EQ(gpus[1].mem_used_bytes, 1.0 * kGiB);
  EXPECT_EQ(gpus[1].mem_total_bytes, 80.0 * kGiB);
  EXPECT_EQ(gpus[1].temperature_c, 35.0);
  EXPECT_EQ(gpus[1].power_w, 71.0);
  EXPECT_EQ(gpus[1].power_limit_w, 650.5);
}

TEST(NvmlSampler, AFailingQueryLeavesExactlyItsValuesAbsent) {
  // Each query in turn fails on device 1 only; nothing else may change.
  using Break = void (*)(FakeDevice&);
  const std::vector<std::pair<const char*, Break>> cases = {
      {"utilization", [](FakeDevice& d) { d.rates.reset(); }},
      {"memory", [](FakeDevice& d) { d.memory.reset(); }},
      {"temperature", [](FakeDevice& d) { d.celsius.reset(); }},
      {"power", [](FakeDevice& d) { d.power_mw.reset(); }},
      {"power limit", [](FakeDevice& d) { d.limit_mw.reset(); }},
  };
  for (const auto& [what, brk] : cases) {
    SCOPED_TRACE(what);
    FakeNvml fake;
    brk(fake.devices[1]);
    NvmlSampler sampler(fake.api());
    const auto gpus = sampler.sample_gpus();
    ASSERT_EQ(gpus.size(), 2u);
    const std::string w = what;
    // Device 0 is untouched.
    EXPECT_TRUE(gpus[0].util_percent && gpus[0].mem_used_bytes && gpus[0].mem_total_bytes &&
                gpus[0].temperature_c && gpus[0].power_w && gpus[0].power_limit_w);
    const auto& g = gpus[1];
    EXPECT_EQ(g.util_percent, w == "utilization" ? std::nullopt : std::optional<double>(3.0));
    EXPECT_EQ(g.mem_used_bytes, w == "memory" ? std::nullopt : std::optional<double>(1.0 * kGiB));
    EXPECT_EQ(g.mem_total_bytes, w == "memory" ? std::nullopt : std::optional<double>(80.0 * kGiB));
    EXPECT_EQ(g.temperature_c, w == "temperature" ? std::nullopt : std::optional<double>(35.0));
    EXPECT_EQ(g.power_w, w == "power" ? std::nullopt : std::optional<double>(71.0));
    EXPECT_EQ(g.power_limit_w, w == "power limit" ? std::nullopt : std::optional<double>(650.5));
  }
}

TEST(NvmlSampler, ADeviceWithoutAHandleKeepsItsIndexWithNothingKnown) {
  FakeNvml fake;
  fake.failing_handle = 0;
  NvmlSampler sampler(fake.api());
  const auto gpus = sampler.sample_gpus();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_FALSE(gpus[0].util_percent || gpus[0].mem_used_bytes || gpus[0].mem_total_bytes ||
               gpus[0].temperature_c || gpus[0].power_w || gpus[0].power_limit_w);
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[1].util_percent, 3.0);
}

TEST(NvmlSampler, NoDevicesWhenTheCountFails) {
  FakeNvml fake;
  NvmlApi api = fake.api();
  fake.count_result = 3;
  NvmlSampler sampler(api);
  EXPECT_EQ(sampler.device_count(), 0u);
  EXPECT_TRUE(sampler.sample_gpus().empty());
}

TEST(NvmlSampler, WithoutTheDeviceListItSeesNoDevice) {
  for (const bool no_count : {true, false}) {
    SCOPED_TRACE(no_count ? "no nvmlDeviceGetCount_v2" : "no nvmlDeviceGetHandleByIndex_v2");
    FakeNvml fake;
    NvmlApi api = fake.api();
    if (no_count) {
      api.device_get_count = nullptr;
    } else {
      api.device_get_handle_by_index = nullptr;
    }
    NvmlSampler sampler(api);
    EXPECT_EQ(sampler.device_count(), 0u);
    EXPECT_TRUE(sampler.sample_gpus().empty());
    EXPECT_FALSE(sampler.process_gpu(our_pid()));
  }
}

TEST(NvmlSampler, AMissingEntryPointLeavesExactlyItsValuesAbsent) {
  // A library without one reading's entry point (newer drivers deprecate
  // nvmlDeviceGetTemperature) keeps NVML and every other value.
  using Drop = void (*)(NvmlApi&);
  const std::vector<std::pair<const char*, Drop>> cases = {
      {"utilization", [](NvmlApi& a) { a.device_get_utilization_rates = nullptr; }},
      {"memory", [](NvmlApi& a) { a.device_get_memory_info = nullptr; }},
      {"temperature", [](NvmlApi& a) { a.device_get_temperature = nullptr; }},
      {"power", [](NvmlApi& a) { a.device_get_power_usage = nullptr; }},
      {"power limit", [](NvmlApi& a) { a.device_get_enforced_power_limit = nullptr; }},
  };
  for (const auto& [what, drop] : cases) {
    SCOPED_TRACE(what);
    FakeNvml fake;
    fake.devices[1].processes = {proc(our_pid(), 3 * kGiBu)};
    NvmlApi api = fake.api();
    drop(api);
    NvmlSampler sampler(api);
    ASSERT_EQ(sampler.device_count(), 2u);
    const auto gpus = sampler.sample_gpus();
    ASSERT_EQ(gpus.size(), 2u);
    const std::string w = what;
    for (const auto& g : gpus) {
      EXPECT_EQ(g.util_percent.has_value(), w != "utilization");
      EXPECT_EQ(g.mem_used_bytes.has_value(), w != "memory");
      EXPECT_EQ(g.mem_total_bytes.has_value(), w != "memory");
      EXPECT_EQ(g.temperature_c.has_value(), w != "temperature");
      EXPECT_EQ(g.power_w.has_value(), w != "power");
      EXPECT_EQ(g.power_limit_w.has_value(), w != "power limit");
    }
    EXPECT_EQ(gpus[0].util_percent,
              w == "utilization" ? std::nullopt : std::optional<double>(87.0));
    EXPECT_EQ(gpus[1].temperature_c,
              w == "temperature" ? std::nullopt : std::optional<double>(35.0));
    // The process is still found; only its device's total needs the memory query.
    const auto p = sampler.process_gpu(our_pid());
    ASSERT_TRUE(p);
    EXPECT_EQ(p->device, 1);
    EXPECT_EQ(p->reserved_bytes, 3.0 * kGiB);
    EXPECT_EQ(p->total_bytes, w == "memory" ? std::nullopt : std::optional<double>(80.0 * kGiB));
  }
}

TEST(NvmlSampler, ProcessMemoryOnDevice1) {
  FakeNvml fake;
  fake.devices[0].processes = {proc(4242, 30 * kGiBu)};
  fake.devices[1].processes = {proc(4243, 2 * kGiBu), proc(our_pid(), 3 * kGiBu)};
  NvmlSampler sampler(fake.api());
  const auto gpu = sampler.process_gpu(getpid());
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->device, 1);
  EXPECT_EQ(gpu->reserved_bytes, 3.0 * kGiB);
  EXPECT_EQ(gpu->total_bytes, 80.0 * kGiB);
  EXPECT_FALSE(gpu->allocated_bytes);  // NVML cannot see live tensors
}

TEST(NvmlSampler, ProcessOnTwoDevicesIsSummedAndNamesTheLargest) {
  FakeNvml fake;
  fake.devices[0].processes = {proc(our_pid(), kGiBu / 2)};
  fake.devices[1].processes = {proc(our_pid(), 3 * kGiBu)};
  fake.devices[1].memory->total = 40 * kGiBu;
  NvmlSampler sampler(fake.api());
  const auto gpu = sampler.process_gpu(getpid());
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->device, 1);
  EXPECT_EQ(gpu->reserved_bytes, 3.5 * kGiB);
  EXPECT_EQ(gpu->total_bytes, 40.0 * kGiB);
}

TEST(NvmlSampler, ProcessAbsentWhenNotListed) {
  FakeNvml fake;
  fake.devices[0].processes = {proc(4242, 30 * kGiBu)};
  fake.devices[1].processes = {proc(4243, 2 * kGiBu)};
  NvmlSampler sampler(fake.api());
  EXPECT_FALSE(sampler.process_gpu(getpid()));
  EXPECT_TRUE(sampler.process_gpu(4243));  // the same lists do name others
  // Pids NVML cannot hold are nobody it lists.
  EXPECT_FALSE(sampler.process_gpu(0));
  EXPECT_FALSE(sampler.process_gpu(-1));
  EXPECT_FALSE(sampler.process_gpu(std::int64_t(1) << 33));
}

TEST(NvmlSampler, ProcessAbsentWhenListingIsUnsupported) {
  FakeNvml fake;
  fake.devices[1].processes = {proc(our_pid(), 3 * kGiBu)};
  {
    NvmlApi api = fake.api();
    api.device_get_compute_running_processes = nullptr;  // a driver older than R470
    NvmlSampler sampler(api);
    EXPECT_FALSE(sampler.process_gpu(getpid()));
    EXPECT_EQ(sampler.sample_gpus().size(), 2u);  // node metrics do not depend on it
  }
  fake.devices[0].process_error = kNvmlErrorNotSupported;
  fake.devices[1].process_error = kNvmlErrorNotSupported;
  NvmlSampler sampler(fake.api());
  EXPECT_FALSE(sampler.process_gpu(getpid()));
}

TEST(NvmlSampler, ProcessListedWithoutAccountedMemoryKeepsItsDevice) {
  FakeNvml fake;
  fake.devices[1].processes = {proc(our_pid(), kNvmlValueNotAvailable)};
  NvmlSampler sampler(fake.api());
  const auto gpu = sampler.process_gpu(getpid());
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->device, 1);
  EXPECT_FALSE(gpu->reserved_bytes);  // not a sentinel ~0 turned into 1.8e19 bytes
  EXPECT_EQ(gpu->total_bytes, 80.0 * kGiB);
}

TEST(NvmlSampler, ALongProcessListIsRetriedWithALargerBuffer) {
  FakeNvml fake;
  for (unsigned k = 0; k < 49; ++k)
    fake.devices[1].processes.push_back(proc(10000 + k, kGiBu / 4));
  fake.devices[1].processes.push_back(proc(our_pid(), 3 * kGiBu));  // 50th, past 32
  NvmlSampler sampler(fake.api());
  const auto gpu = sampler.process_gpu(getpid());
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->device, 1);
  EXPECT_EQ(gpu->reserved_bytes, 3.0 * kGiB);
  EXPECT_EQ(fake.devices[1].process_calls, 2);  // too small once, then filled
  // The grown buffer is kept: the next sample needs one call.
  ASSERT_TRUE(sampler.process_gpu(getpid()));
  EXPECT_EQ(fake.devices[1].process_calls, 3);
}

TEST(NvmlSampler, TheRetryIsBounded) {
  FakeNvml fake;
  fake.devices[0].processes = {proc(our_pid(), kGiBu)};
  fake.devices[1].always_insufficient = true;  // a list that outgrows every buffer
  fake.devices[1].processes = {proc(our_pid(), 3 * kGiBu)};
  NvmlSampler sampler(fake.api());
  const auto gpu = sampler.process_gpu(getpid());
  // Device 1 gives up after a few tries; device 0 still answers.
  EXPECT_GE(fake.devices[1].process_calls, 2);
  EXPECT_LE(fake.devices[1].process_calls, 4);
  ASSERT_TRUE(gpu);
  EXPECT_EQ(gpu->device, 0);
  EXPECT_EQ(gpu->reserved_bytes, 1.0 * kGiB);
}

TEST(NvmlSampler, EndsTheInitialisationItTookOver) {
  FakeNvml fake;
  const NvmlApiLoad r = initialize_nvml(fake.api());
  ASSERT_TRUE(r.api);
  EXPECT_TRUE(r.reason.empty());
  EXPECT_EQ(fake.init_calls, 1);
  {
    NvmlSampler sampler(*r.api);
    EXPECT_EQ(fake.shutdown_calls, 0);
  }
  EXPECT_EQ(fake.shutdown_calls, 1);
}

TEST(InitializeNvml, WithoutADriverSaysSoAndLeavesNothingOpen) {
  FakeNvml fake;
  fake.init_result = kNvmlErrorDriverNotLoaded;
  const NvmlApiLoad r = initialize_nvml(fake.api());
  EXPECT_FALSE(r.api);
  EXPECT_EQ(r.reason, "NVML unavailable: nvmlInit_v2 returned 9 (Driver Not Loaded)");
  EXPECT_EQ(fake.shutdown_calls, 0);  // a failed init holds no reference
}

TEST(InitializeNvml, NoDeviceOrNoCountEndsTheInitialisation) {
  {
    FakeNvml fake;
    fake.count = 0;
    const NvmlApiLoad r = initialize_nvml(fake.api());
    EXPECT_FALSE(r.api);
    EXPECT_EQ(r.reason, "no NVIDIA GPU: NVML sees 0 devices");
    EXPECT_EQ(fake.init_calls, 1);
    EXPECT_EQ(fake.shutdown_calls, 1);
  }
  {
    FakeNvml fake;
    fake.count_result = 999;
    const NvmlApiLoad r = initialize_nvml(fake.api());
    EXPECT_FALSE(r.api);
    EXPECT_EQ(r.reason, "NVML unavailable: nvmlDeviceGetCount_v2 returned 999 (Unknown Error)");
    EXPECT_EQ(fake.shutdown_calls, 1);
  }
}

TEST(NvmlApi, DescribesErrorsWithTheLibrarysText) {
  NvmlApi api;
  EXPECT_EQ(describe_nvml_error(api, 3), "3");
  api.error_string = [](int e) -> const char* { return e == 3 ? "Not Supported" : ""; };
  EXPECT_EQ(describe_nvml_error(api, 3), "3 (Not Supported)");
  EXPECT_EQ(describe_nvml_error(api, 7), "7");
}

TEST(NvmlApi, NamesThatDoNotExistAreNotFound) {
  const NvmlApiLoad r =
      load_nvml_api({"libtraceml_no_such_nvidia_ml.so.1", "/nonexistent/libnvidia-ml.so"});
  EXPECT_FALSE(r.api);
  EXPECT_TRUE(r.library.empty());
  EXPECT_EQ(r.reason,
            "libnvidia-ml not found (tried libtraceml_no_such_nvidia_ml.so.1, "
            "/nonexistent/libnvidia-ml.so)");
}

TEST(NvmlApi, ALibraryWithoutTheEntryPointsIsRefused) {
  // libm loads everywhere and has none of NVML's symbols.
  const NvmlApiLoad r = load_nvml_api({"libm.so.6"});
  EXPECT_FALSE(r.api);
  EXPECT_EQ(r.library, "libm.so.6");
  EXPECT_EQ(r.reason, "libm.so.6 has no nvmlInit_v2");
}

TEST(NvmlApi, ALibraryWithoutTheOptionalReadingsStillGivesAnApi) {
  // A real shared library (fake_nvml_library.cpp) opened with dlopen: it has
  // the device list and the memory query, nothing else.
  const NvmlApiLoad r = load_nvml_api({TRACEML_FAKE_NVML_PATH});
  ASSERT_TRUE(r.api) << r.reason;
  EXPECT_TRUE(r.reason.empty());
  EXPECT_EQ(r.library, TRACEML_FAKE_NVML_PATH);
  EXPECT_EQ(r.absent,
            (std::vector<std::string>{"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetTemperature",
                                      "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
                                      "nvmlErrorString"}));
  EXPECT_EQ(r.api->device_get_temperature, nullptr);
  EXPECT_EQ(r.api->device_get_compute_running_processes, nullptr);
  EXPECT_EQ(describe_nvml_error(*r.api, 3), "3");  // no nvmlErrorString: the number alone
  NvmlSampler sampler(*r.api);
  ASSERT_EQ(sampler.device_count(), 1u);
  const auto gpus = sampler.sample_gpus();
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].mem_total_bytes, 80.0 * kGiB);
  EXPECT_EQ(gpus[0].mem_used_bytes, 1.0 * kGiB);
  EXPECT_FALSE(gpus[0].util_percent || gpus[0].temperature_c || gpus[0].power_w ||
               gpus[0].power_limit_w);
  EXPECT_FALSE(sampler.process_gpu(our_pid()));
}

TEST(NvmlApi, DefaultSearchGivesAnApiOrOneLineWhy) {
  EXPECT_EQ(default_nvml_names(),
            (std::vector<std::string>{"libnvidia-ml.so.1", "libnvidia-ml.so"}));
  const NvmlApiLoad r = load_nvml_api();
  std::cout << "load_nvml_api(): " << (r.api ? "usable (" + r.library + ")" : r.reason) << "\n";
  if (!r.api) {
    EXPECT_FALSE(r.reason.empty());
    EXPECT_EQ(r.reason.find('\n'), std::string::npos) << r.reason;
    return;
  }
  // A driver is here: every required entry point is set and the sampler reads it.
  EXPECT_TRUE(r.reason.empty());
  EXPECT_FALSE(r.library.empty());
  NvmlSampler sampler(*r.api);
  EXPECT_GT(sampler.device_count(), 0u);
  const auto gpus = sampler.sample_gpus();
  EXPECT_EQ(gpus.size(), sampler.device_count());
  for (const auto& g : gpus) {
    if (g.mem_total_bytes) {
      EXPECT_GT(*g.mem_total_bytes, 0.0);
    }
    if (g.util_percent) {
      EXPECT_LE(*g.util_percent, 100.0);
    }
  }
  (void)sampler.process_gpu(getpid());  // this test process holds no context: any answer
}

}  // namespace
}  // namespace traceml::timing
