// CUPTI on the CPU: the loader against real and missing libraries, the parser
// on real CUPTI record structs built from the headers, and the live source
// driven through a fake CUPTI (callbacks, flushes, buffers, clocks), as
// libkineto tests its CUPTI code. On this project's machines there is CUPTI
// but no driver: the real source must refuse to start, in one line.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cupti_stage.hpp"
#include "runtime/profile_capture.hpp"
#include "timing/clock.hpp"
#include "timing/cupti_activity_source.hpp"
#include "timing/cupti_api.hpp"
#include "timing/cupti_duty_cycle.hpp"

#if TRACEML_HAVE_CUPTI
#include <cupti_activity.h>
#include <cupti_version.h>

#include <cstddef>
#endif

namespace traceml::timing {
namespace {

bool file_exists(const std::string& path) {
  return std::ifstream(path).good();
}

void expect_one_line(const std::string& reason) {
  EXPECT_FALSE(reason.empty());
  EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
}

TEST(CuptiApi, NamesThatDoNotExistAreNotFound) {
  const CuptiApiLoad r =
      load_cupti_api({"libtraceml_no_such_cupti.so.1", "/nonexistent/libcupti.so"});
  EXPECT_FALSE(r.api);
  EXPECT_TRUE(r.library.empty());
  EXPECT_EQ(r.reason,
            "libcupti not found (tried libtraceml_no_such_cupti.so.1, /nonexistent/libcupti.so)");
}

TEST(CuptiApi, ALibraryWithoutTheEntryPointsIsRefused) {
  const CuptiApiLoad r = load_cupti_api({"libm.so.6"});
  EXPECT_FALSE(r.api);
  EXPECT_EQ(r.library, "libm.so.6");
  EXPECT_EQ(r.reason, "libm.so.6 has no cuptiActivityEnable");
}

/// The toolkit's CUPTI: every required entry point, or one line why not.
TEST(CuptiApi, TheToolkitLibraryLoadsOrSaysWhy) {
  const std::string path = "/usr/local/cuda/lib64/libcupti.so.13";
  if (!file_exists(path)) GTEST_SKIP() << path << " is not installed";
  const CuptiApiLoad r = load_cupti_api({path});
  if (!r.api) {
    expect_one_line(r.reason);
    return;
  }
  EXPECT_TRUE(r.reason.empty());
  EXPECT_EQ(r.library, path);
  const CuptiApi& a = *r.api;
  for (const void* fn :
       {(const void*)a.activity_enable, (const void*)a.activity_disable,
        (const void*)a.activity_register_callbacks, (const void*)a.activity_get_next_record,
        (const void*)a.activity_flush_all, (const void*)a.activity_get_num_dropped_records,
        (const void*)a.get_timestamp, (const void*)a.get_result_string}) {
    EXPECT_NE(fn, nullptr);
  }
  // CUDA 13's CUPTI has both optional entry points.
  EXPECT_NE(a.activity_register_timestamp_callback, nullptr);
  EXPECT_NE(a.finalize, nullptr);
  EXPECT_EQ(describe_cupti_result(a, kCuptiErrorUnknown), "999 (CUPTI_ERROR_UNKNOWN)");
  // Reading CUPTI's clock needs no driver.
  std::uint64_t ts = 0;
  EXPECT_EQ(a.get_timestamp(&ts), kCuptiSuccess);
  EXPECT_GT(ts, 0u);
}

TEST(CuptiApi, DefaultSearchGivesAnApiOrOneLineWhy) {
  const CuptiApiLoad r = load_cupti_api();
  if (r.api) {
    EXPECT_FALSE(r.library.empty());
  } else {
    expect_one_line(r.reason);
  }
}

/// Whether a CUDA driver is installed: without one CUPTI cannot trace.
bool has_cuda_driver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

TEST(CuptiActivitySource, RealCuptiStartsOrSaysWhyInOneLine) {
  const CuptiApiLoad load = load_cupti_api();
  if (!load.api) GTEST_SKIP() << "no CUPTI: " << load.reason;
  CuptiActivitySource source(*load.api);
  const std::optional<std::string> why = source.start();
  if (why) {
    std::cout << "CUPTI source did not start: " << *why << "\n";
    expect_one_line(*why);
    EXPECT_FALSE(source.running());
#if TRACEML_HAVE_CUPTI
    EXPECT_NE(why->find(" failed: "), std::string::npos) << *why;
#else
    EXPECT_EQ(*why, "traceml was built without CUPTI headers");
#endif
    std::vector<ApiLaunch> launches;
    std::vector<GpuActivity> activities;
    EXPECT_EQ(source.collect(launches, activities), 0u);
    return;
  }
  // A machine with a driver: nothing ran, so nothing comes back but API calls.
  EXPECT_TRUE(has_cuda_driver());
  EXPECT_TRUE(source.running());
  std::vector<ApiLaunch> launches;
  std::vector<GpuActivity> activities;
  source.collect(launches, activities, FlushMode::Forced);
  EXPECT_TRUE(activities.empty());
  source.stop();
  EXPECT_FALSE(source.running());
}

TEST(CuptiActivitySource, RealCuptiWithoutDriverRefuses) {
  if (has_cuda_driver()) GTEST_SKIP() << "this machine has a CUDA driver";
  const CuptiApiLoad load = load_cupti_api();
  if (!load.api) GTEST_SKIP() << "no CUPTI: " << load.reason;
  CuptiActivitySource source(*load.api);
  const std::optional<std::string> why = source.start();
  ASSERT_TRUE(why);
  expect_one_line(*why);
  // A failed start leaves nothing behind: a second source may try.
  CuptiActivitySource again(*load.api);
  const std::optional<std::string> why_again = again.start();
  ASSERT_TRUE(why_again);
  EXPECT_EQ(why_again->find("another CUPTI activity source"), std::string::npos) << *why_again;
}

#if !TRACEML_HAVE_CUPTI
TEST(CuptiActivitySource, WithoutHeadersItNeverStarts) {
  CuptiApi api;  // never called
  CuptiActivitySource source(api);
  EXPECT_EQ(source.start(), std::optional<std::string>("traceml was built without CUPTI headers"));
  EXPECT_EQ(source.start(), std::optional<std::string>("a CUPTI activity source starts once"));
}
#endif

#if TRACEML_HAVE_CUPTI

// --- Records ---------------------------------------------------------------

// parse_activity_record reads the oldest layout of each record; CUPTI writes
// the newest it knows. Their leading fields must agree: checked against the
// versions of CUDA 12 and 13 when these are CUDA 13's headers.
#if CUPTI_API_VERSION >= 130001
#define TRACEML_SAME_OFFSET(Old, New, member) \
  static_assert(offsetof(Old, member) == offsetof(New, member), #Old "/" #New "::" #member)
#define TRACEML_SAME_KERNEL(New)                                  \
  TRACEML_SAME_OFFSET(CUpti_ActivityKernel4, New, start);         \
  TRACEML_SAME_OFFSET(CUpti_ActivityKernel4, New, end);           \
  TRACEML_SAME_OFFSET(CUpti_ActivityKernel4, New, correlationId); \
  TRACEML_SAME_OFFSET(CUpti_ActivityKernel4, New, name)
#define TRACEML_SAME_MEMCPY(New)                            \
  TRACEML_SAME_OFFSET(CUpti_ActivityMemcpy, New, copyKind); \
  TRACEML_SAME_OFFSET(CUpti_ActivityMemcpy, New, srcKind);  \
  TRACEML_SAME_OFFSET(CUpti_ActivityMemcpy, New, bytes);    \
  TRACEML_SAME_OFFSET(CUpti_ActivityMemcpy, New, start);    \
  TRACEML_SAME_OFFSET(CUpti_ActivityMemcpy, New, end);      \
  TRACEML_SAME_OFFSET(CUpti_ActivityMemcpy, New, correlationId)
TRACEML_SAME_KERNEL(CUpti_ActivityKernel9);
TRACEML_SAME_KERNEL(CUpti_ActivityKernel10);
TRACEML_SAME_MEMCPY(CUpti_ActivityMemcpy5);
TRACEML_SAME_MEMCPY(CUpti_ActivityMemcpy6);
TRACEML_SAME_OFFSET(CUpti_ActivityMemset, CUpti_ActivityMemset4, bytes);
TRACEML_SAME_OFFSET(CUpti_ActivityMemset, CUpti_ActivityMemset4, start);
TRACEML_SAME_OFFSET(CUpti_ActivityMemset, CUpti_ActivityMemset4, end);
TRACEML_SAME_OFFSET(CUpti_ActivityMemset, CUpti_ActivityMemset4, correlationId);
#undef TRACEML_SAME_MEMCPY
#undef TRACEML_SAME_KERNEL
#undef TRACEML_SAME_OFFSET
// The records as CUDA 13's CUPTI writes them.
using Kernel = CUpti_ActivityKernel10;
using Memcpy = CUpti_ActivityMemcpy6;
using Memset = CUpti_ActivityMemset4;
#else
using Kernel = CUpti_ActivityKernel4;
using Memcpy = CUpti_ActivityMemcpy;
using Memset = CUpti_ActivityMemset;
#endif

constexpr const char* kNcclName =
    "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
constexpr const char* kGemmName = "_Z17sm90_gemm_kernelv";

Kernel kernel_record(std::uint32_t correlation, std::uint64_t start, std::uint64_t end,
                     const char* name) {
  Kernel k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.correlationId = correlation;
  k.start = start;
  k.end = end;
  k.completed = end;
  k.gridX = 132;
  k.blockX = 512;
  k.name = name;
  return k;
}

Memcpy memcpy_record(std::uint32_t correlation, std::uint64_t start, std::uint64_t end,
                     CUpti_ActivityMemcpyKind copy, CUpti_ActivityMemoryKind src,
                     std::uint64_t bytes) {
  Memcpy m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = static_cast<std::uint8_t>(copy);
  m.srcKind = static_cast<std::uint8_t>(src);
  m.dstKind = static_cast<std::uint8_t>(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.correlationId = correlation;
  m.runtimeCorrelationId = 0;
  return m;
}

Memset memset_record(std::uint32_t correlation, std::uint64_t start, std::uint64_t end,
                     std::uint64_t bytes) {
  Memset s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.value = 0;
  s.bytes = bytes;
  s.start = start;
  s.end = end;
  s.correlationId = correlation;
  return s;
}

CUpti_ActivityAPI api_record(CUpti_ActivityKind kind, std::uint32_t correlation,
                             std::uint64_t start) {
  CUpti_ActivityAPI a;
  std::memset(&a, 0, sizeof a);
  a.kind = kind;
  a.cbid = 211;
  a.start = start;
  a.end = start + 3000;
  a.processId = 1;
  a.threadId = 2;
  a.correlationId = correlation;
  return a;
}

struct Parsed {
  std::vector<ApiLaunch> launches;
  std::vector<GpuActivity> activities;
};

// CUPTI's clock of the records below: unix nanoseconds, like CLOCK_REALTIME.
constexpr std::uint64_t kT0 = 1796228319000000000ull;
// Our clock is monotonic: since boot, here 10 s after it.
const TimestampMap kMap{10000000000 - static_cast<std::int64_t>(kT0)};

TEST(CuptiRecord, NcclKernelIsACollectiveActivityOnOurClock) {
  Parsed p;
  const Kernel k = kernel_record(42, kT0 + 1000, kT0 + 251000, kNcclName);
  EXPECT_EQ(parse_activity_record(&k, kMap, p.launches, p.activities), RecordUse::Activity);
  ASSERT_EQ(p.activities.size(), 1u);
  const GpuActivity& a = p.activities[0];
  EXPECT_EQ(a.kind, ActivityKind::Kernel);
  EXPECT_EQ(a.correlation_id, 42u);
  EXPECT_EQ(a.start_ns, 10000001000);
  EXPECT_EQ(a.end_ns, 10000251000);
  EXPECT_TRUE(a.collective);
  EXPECT_EQ(a.bytes, 0u);
  EXPECT_TRUE(p.launches.empty());
}

TEST(CuptiRecord, OtherKernelsAreNotCollective) {
  Parsed p;
  const Kernel gemm = kernel_record(1, kT0 + 10, kT0 + 20, kGemmName);
  const Kernel unnamed = kernel_record(2, kT0 + 10, kT0 + 20, nullptr);
  parse_activity_record(&gemm, kMap, p.launches, p.activities);
  parse_activity_record(&unnamed, kMap, p.launches, p.activities);
  ASSERT_EQ(p.activities.size(), 2u);
  EXPECT_FALSE(p.activities[0].collective);
  EXPECT_FALSE(p.activities[1].collective);
}

TEST(CuptiRecord, OldestKernelLayoutReadsTheSame) {
  // An older CUPTI (CUDA 11.8) writes an older, shorter record.
  CUpti_ActivityKernel4 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = kT0 + 5;
  k.end = kT0 + 9;
  k.correlationId = 8;
  k.name = kNcclName;
  Parsed p;
  EXPECT_EQ(parse_activity_record(&k, kMap, p.launches, p.activities), RecordUse::Activity);
  ASSERT_EQ(p.activities.size(), 1u);
  EXPECT_EQ(p.activities[0].correlation_id, 8u);
  EXPECT_EQ(p.activities[0].start_ns, 10000000005);
  EXPECT_EQ(p.activities[0].end_ns, 10000000009);
  EXPECT_TRUE(p.activities[0].collective);
}

TEST(CuptiRecord, MemcpyDirectionsAndPageableSource) {
  Parsed p;
  const Memcpy pageable = memcpy_record(1, kT0 + 100, kT0 + 600, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                        CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 4 << 20);
  const Memcpy pinned = memcpy_record(2, kT0 + 700, kT0 + 800, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                      CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 1 << 20);
  const Memcpy d2d = memcpy_record(3, kT0 + 900, kT0 + 950, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD,
                                   CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 512);
  const Memcpy d2h = memcpy_record(4, kT0 + 1000, kT0 + 1100, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
                                   CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 256);
  const Memcpy h2h = memcpy_record(5, kT0 + 1200, kT0 + 1300, CUPTI_ACTIVITY_MEMCPY_KIND_HTOH,
                                   CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 128);
  for (const Memcpy* m : {&pageable, &pinned, &d2d, &d2h, &h2h})
    EXPECT_EQ(parse_activity_record(m, kMap, p.launches, p.activities), RecordUse::Activity);
  ASSERT_EQ(p.activities.size(), 5u);
  const GpuActivity& a = p.activities[0];
  EXPECT_EQ(a.kind, ActivityKind::Memcpy);
  EXPECT_EQ(a.correlation_id, 1u);
  EXPECT_EQ(a.copy_kind, CopyKind::HostToDevice);
  EXPECT_TRUE(a.from_pageable);
  EXPECT_EQ(a.bytes, 4u << 20);
  EXPECT_EQ(a.start_ns, 10000000100);
  EXPECT_EQ(a.end_ns, 10000000600);
  EXPECT_FALSE(a.collective);
  EXPECT_EQ(p.activities[1].copy_kind, CopyKind::HostToDevice);
  EXPECT_FALSE(p.activities[1].from_pageable);
  EXPECT_EQ(p.activities[1].bytes, 1u << 20);
  EXPECT_EQ(p.activities[2].copy_kind, CopyKind::DeviceToDevice);
  EXPECT_EQ(p.activities[3].copy_kind, CopyKind::DeviceToHost);
  EXPECT_EQ(p.activities[4].copy_kind, CopyKind::Other);
}

TEST(CuptiRecord, Memset) {
  Parsed p;
  const Memset s = memset_record(9, kT0 + 40, kT0 + 90, 1 << 16);
  EXPECT_EQ(parse_activity_record(&s, kMap, p.launches, p.activities), RecordUse::Activity);
  ASSERT_EQ(p.activities.size(), 1u);
  EXPECT_EQ(p.activities[0].kind, ActivityKind::Memset);
  EXPECT_EQ(p.activities[0].correlation_id, 9u);
  EXPECT_EQ(p.activities[0].bytes, 1u << 16);
  EXPECT_EQ(p.activities[0].start_ns, 10000000040);
  EXPECT_EQ(p.activities[0].end_ns, 10000000090);
}

TEST(CuptiRecord, RuntimeAndDriverCallsAreLaunchesAtTheirStart) {
  Parsed p;
  const CUpti_ActivityAPI runtime = api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 42, kT0 + 500);
  const CUpti_ActivityAPI driver = api_record(CUPTI_ACTIVITY_KIND_DRIVER, 43, kT0 + 700);
  EXPECT_EQ(parse_activity_record(&runtime, kMap, p.launches, p.activities), RecordUse::Launch);
  EXPECT_EQ(parse_activity_record(&driver, kMap, p.launches, p.activities), RecordUse::Launch);
  ASSERT_EQ(p.launches.size(), 2u);
  EXPECT_EQ(p.launches[0].correlation_id, 42u);
  EXPECT_EQ(p.launches[0].cpu_ns, 10000000500);
  EXPECT_EQ(p.launches[1].correlation_id, 43u);
  EXPECT_EQ(p.launches[1].cpu_ns, 10000000700);
  EXPECT_TRUE(p.activities.empty());
}

TEST(CuptiRecord, WorkWithoutTimestampsIsUntimed) {
  Parsed p;
  const Kernel never = kernel_record(1, 0, 0, kNcclName);
  const Kernel running = kernel_record(2, kT0 + 10, 0, kGemmName);  // a forced flush
  const Memcpy reversed = memcpy_record(3, kT0 + 10, kT0 + 5, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                        CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 1);
  EXPECT_EQ(parse_activity_record(&never, kMap, p.launches, p.activities), RecordUse::Untimed);
  EXPECT_EQ(parse_activity_record(&running, kMap, p.launches, p.activities), RecordUse::Untimed);
  EXPECT_EQ(parse_activity_record(&reversed, kMap, p.launches, p.activities), RecordUse::Untimed);
  EXPECT_TRUE(p.activities.empty());
}

TEST(CuptiRecord, OtherKindsAreIgnored) {
  Parsed p;
  CUpti_Activity c;
  c.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  EXPECT_EQ(parse_activity_record(&c, kMap, p.launches, p.activities), RecordUse::Ignored);
  EXPECT_TRUE(p.launches.empty());
  EXPECT_TRUE(p.activities.empty());
}

TEST(CuptiRecord, ParsedRecordsAttributeToTheirStep) {
  // A pageable copy and an NCCL kernel launched in the step, on CUPTI's
  // clock, through the whole normalization.
  Parsed p;
  const CUpti_ActivityAPI copy_call = api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 1, kT0 + 1000000);
  const CUpti_ActivityAPI nccl_call = api_record(CUPTI_ACTIVITY_KIND_DRIVER, 2, kT0 + 2000000);
  const Memcpy copy =
      memcpy_record(1, kT0 + 3000000, kT0 + 5000000, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                    CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 8 << 20);
  const Kernel nccl = kernel_record(2, kT0 + 4000000, kT0 + 7000000, kNcclName);
  parse_activity_record(&nccl, kMap, p.launches, p.activities);
  parse_activity_record(&copy, kMap, p.launches, p.activities);
  parse_activity_record(&nccl_call, kMap, p.launches, p.activities);
  parse_activity_record(&copy_call, kMap, p.launches, p.activities);
  ActivityAttributor at;
  at.add(p.launches, p.activities);
  // The step body ran from 0.5 ms to 2.5 ms after kT0, on our clock.
  const model::StepGpuActivity s = at.attribute(10000500000, 10002500000);
  EXPECT_DOUBLE_EQ(s.h2d_ms, 2.0);
  EXPECT_EQ(s.h2d_pageable_copies, 1);
  EXPECT_DOUBLE_EQ(s.h2d_pageable_bytes, double(8 << 20));
  EXPECT_DOUBLE_EQ(s.collective_ms, 3.0);
  EXPECT_DOUBLE_EQ(s.busy_ms, 4.0);
}

// --- The live source on a fake CUPTI ----------------------------------------

/// A CUPTI in the test: records queued by the test are written into a buffer
/// the source lends at the next flush, and read back record by record.
struct FakeCupti {
  static inline CuptiBufferRequested requested = nullptr;
  static inline CuptiBufferCompleted completed = nullptr;
  static inline CuptiTimestampSource timestamp_source = nullptr;
  static inline int timestamp_callback_result = kCuptiSuccess;
  static inline std::int64_t clock_shift_ns = 0;  // CUPTI's clock minus ours
  static inline std::vector<int> enabled;
  static inline int failing_kind = -1;
  static inline std::vector<std::uint32_t> flushes;
  static inline std::vector<std::vector<unsigned char>> queued;  // records, next flush
  static inline std::size_t dropped = 0;
  /// cuptiActivitySetAttribute calls: attribute, value, and whether the
  /// buffer callbacks were registered before it.
  struct AttributeCall {
    int attr;
    std::uint8_t value;
    bool after_callbacks;
  };
  static inline std::vector<AttributeCall> attribute_calls;
  static inline int attribute_result = kCuptiSuccess;
  /// Per-API records: the names cuptiGetCallbackName knows, by domain and
  /// callback id, and the ids whose records are on.
  static inline std::map<std::pair<int, std::uint32_t>, std::string> api_names;
  static inline std::set<std::pair<int, std::uint32_t>> apis_off;
  /// APIs turned on one by one while their kind was disabled: CUPTI would
  /// then record them alone.
  static inline std::set<std::pair<int, std::uint32_t>> api_on_after_kind_disabled;

  static void reset() {
    api_names.clear();
    apis_off.clear();
    api_on_after_kind_disabled.clear();
    attribute_calls.clear();
    attribute_result = kCuptiSuccess;
    requested = nullptr;
    completed = nullptr;
    register_result = kCuptiSuccess;
    timestamp_source = nullptr;
    timestamp_callback_result = kCuptiSuccess;
    clock_shift_ns = 0;
    enabled.clear();
    failing_kind = -1;
    flushes.clear();
    queued.clear();
    dropped = 0;
  }

  template <class Record>
  static void queue(const Record& r) {
    std::vector<unsigned char> bytes(sizeof r);
    std::memcpy(bytes.data(), &r, sizeof r);
    queued.push_back(std::move(bytes));
  }

  static std::size_t record_size(const void* record) {
    CUpti_ActivityKind kind;
    std::memcpy(&kind, record, sizeof kind);
    switch (kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        return sizeof(Kernel);
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        return sizeof(Memcpy);
      case CUPTI_ACTIVITY_KIND_MEMSET:
        return sizeof(Memset);
      default:
        return sizeof(CUpti_ActivityAPI);
    }
  }

  static int enable(int kind) {
    if (kind == failing_kind) return kCuptiErrorUnknown;
    enabled.push_back(kind);
    return kCuptiSuccess;
  }
  static int disable(int kind) {
    enabled.erase(std::remove(enabled.begin(), enabled.end(), kind), enabled.end());
    return kCuptiSuccess;
  }
  static inline int register_result = kCuptiSuccess;
  static int register_callbacks(CuptiBufferRequested r, CuptiBufferCompleted c) {
    if (register_result != kCuptiSuccess) return register_result;
    requested = r;
    completed = c;
    return kCuptiSuccess;
  }
  static int register_timestamp_callback(CuptiTimestampSource source) {
    if (timestamp_callback_result == kCuptiSuccess) timestamp_source = source;
    return timestamp_callback_result;
  }
  static int get_timestamp(std::uint64_t* ts) {
    *ts = static_cast<std::uint64_t>(timing::now_ns() + clock_shift_ns);
    return kCuptiSuccess;
  }
  static int flush_all(std::uint32_t flag) {
    flushes.push_back(flag);
    if (queued.empty()) return kCuptiSuccess;
    std::uint8_t* buffer = nullptr;
    std::size_t size = 0;
    std::size_t max_records = 0;
    requested(&buffer, &size, &max_records);
    if (buffer == nullptr) {
      dropped += queued.size();
      queued.clear();
      return kCuptiSuccess;
    }
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer) % 8, 0u);
    std::size_t used = 0;
    for (const auto& r : queued) {
      if (used + r.size() > size) break;
      std::memcpy(buffer + used, r.data(), r.size());
      used += (r.size() + 7) / 8 * 8;
    }
    queued.clear();
    completed(nullptr, 0, buffer, size, used);
    return kCuptiSuccess;
  }
  static int get_next_record(std::uint8_t* buffer, std::size_t valid, void** record) {
    std::size_t at = 0;
    if (*record != nullptr) {
      const auto* current = static_cast<const std::uint8_t*>(*record);
      at = static_cast<std::size_t>(current - buffer) + (record_size(current) + 7) / 8 * 8;
    }
    if (at >= valid) return kCuptiErrorMaxLimitReached;
    *record = buffer + at;
    return kCuptiSuccess;
  }
  static int get_num_dropped(void*, std::uint32_t, std::size_t* out) {
    *out = dropped;
    dropped = 0;
    return kCuptiSuccess;
  }
  static int set_attribute(int attr, std::size_t* size, void* value) {
    EXPECT_EQ(*size, 1u);
    attribute_calls.push_back({attr, *static_cast<std::uint8_t*>(value), requested != nullptr});
    return attribute_result;
  }
  static int get_version(std::uint32_t* version) {
    *version = 130001;
    return kCuptiSuccess;
  }
  static int enable_api(int domain, std::uint32_t cbid, std::uint8_t on) {
    if (api_names.count({domain, cbid}) == 0) return kCuptiErrorUnknown;
    const int kind =
        domain == kCuptiCbDomainRuntimeApi ? kCuptiActivityKindRuntime : kCuptiActivityKindDriver;
    const bool kind_on = std::find(enabled.begin(), enabled.end(), kind) != enabled.end();
    if (on != 0) {
      apis_off.erase({domain, cbid});
      if (!kind_on) api_on_after_kind_disabled.insert({domain, cbid});
    } else {
      apis_off.insert({domain, cbid});
    }
    return kCuptiSuccess;
  }
  static int enable_runtime_api(std::uint32_t cbid, std::uint8_t on) {
    return enable_api(kCuptiCbDomainRuntimeApi, cbid, on);
  }
  static int enable_driver_api(std::uint32_t cbid, std::uint8_t on) {
    return enable_api(kCuptiCbDomainDriverApi, cbid, on);
  }
  static int callback_name(int domain, std::uint32_t cbid, const char** name) {
    const auto it = api_names.find({domain, cbid});
    if (it == api_names.end()) return kCuptiErrorUnknown;
    *name = it->second.c_str();
    return kCuptiSuccess;
  }
  /// The API with per-API record control (CUDA 12.x and later).
  static CuptiApi api_with_per_api_records() {
    CuptiApi a = api(true);
    a.activity_enable_runtime_api = &enable_runtime_api;
    a.activity_enable_driver_api = &enable_driver_api;
    a.get_callback_name = &callback_name;
    return a;
  }
  static int result_string(int result, const char** text) {
    *text = result == kCuptiErrorUnknown ? "CUPTI_ERROR_UNKNOWN" : "CUPTI_OTHER";
    return kCuptiSuccess;
  }

  static CuptiApi api(bool with_timestamp_callback) {
    CuptiApi a;
    a.activity_enable = &enable;
    a.activity_disable = &disable;
    a.activity_register_callbacks = &register_callbacks;
    a.activity_get_next_record = &get_next_record;
    a.activity_flush_all = &flush_all;
    a.activity_get_num_dropped_records = &get_num_dropped;
    a.get_timestamp = &get_timestamp;
    a.get_result_string = &result_string;
    if (with_timestamp_callback)
      a.activity_register_timestamp_callback = &register_timestamp_callback;
    a.activity_set_attribute = &set_attribute;
    a.get_version = &get_version;
    return a;
  }
};

class FakeCuptiSource : public ::testing::Test {
 protected:
  void SetUp() override { FakeCupti::reset(); }
  void TearDown() override { FakeCupti::reset(); }
  std::vector<ApiLaunch> launches_;
  std::vector<GpuActivity> activities_;
};

TEST_F(FakeCuptiSource, StartsTheFiveKindsOnOurClockAndCollects) {
  CuptiActivitySource source(FakeCupti::api(/*with_timestamp_callback=*/true));
  ASSERT_EQ(source.start(), std::nullopt);
  EXPECT_TRUE(source.running());
  EXPECT_EQ(FakeCupti::enabled,
            (std::vector<int>{kCuptiActivityKindConcurrentKernel, kCuptiActivityKindMemcpy,
                              kCuptiActivityKindMemset, kCuptiActivityKindRuntime,
                              kCuptiActivityKindDriver}));
  // CUPTI takes its time from timing::now_ns(): no offset.
  EXPECT_TRUE(source.uses_timestamp_callback());
  EXPECT_EQ(source.timestamp_map().offset_ns, 0);
  ASSERT_NE(FakeCupti::timestamp_source, nullptr);
  const std::int64_t before = timing::now_ns();
  const auto cupti_now = static_cast<std::int64_t>(FakeCupti::timestamp_source());
  EXPECT_GE(cupti_now, before);
  EXPECT_LE(cupti_now, timing::now_ns());

  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 1, 1000));
  FakeCupti::queue(kernel_record(1, 2000, 3000, kNcclName));
  FakeCupti::queue(memcpy_record(2, 3000, 3500, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                 CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 64));
  FakeCupti::queue(memset_record(3, 4000, 4100, 32));
  FakeCupti::queue(kernel_record(4, 0, 0, kGemmName));  // no timestamps
  EXPECT_EQ(source.collect(launches_, activities_), 4u);
  EXPECT_EQ(FakeCupti::flushes, (std::vector<std::uint32_t>{0}));  // completed buffers only
  ASSERT_EQ(launches_.size(), 1u);
  EXPECT_EQ(launches_[0].correlation_id, 1u);
  EXPECT_EQ(launches_[0].cpu_ns, 1000);
  ASSERT_EQ(activities_.size(), 3u);
  EXPECT_EQ(activities_[0].kind, ActivityKind::Kernel);
  EXPECT_TRUE(activities_[0].collective);
  EXPECT_EQ(activities_[0].start_ns, 2000);
  EXPECT_EQ(activities_[1].copy_kind, CopyKind::HostToDevice);
  EXPECT_TRUE(activities_[1].from_pageable);
  EXPECT_EQ(activities_[2].kind, ActivityKind::Memset);
  EXPECT_EQ(source.untimed(), 1);

  // Nothing new: nothing appended.
  EXPECT_EQ(source.collect(launches_, activities_, FlushMode::Forced), 0u);
  EXPECT_EQ(FakeCupti::flushes, (std::vector<std::uint32_t>{0, kCuptiFlushForced}));

  // Stop hands every buffer back; the next collect still reads it.
  FakeCupti::queue(kernel_record(5, 5000, 6000, kGemmName));
  source.stop();
  EXPECT_FALSE(source.running());
  EXPECT_TRUE(FakeCupti::enabled.empty());
  EXPECT_EQ(FakeCupti::flushes.back(), kCuptiFlushForced);
  EXPECT_EQ(source.collect(launches_, activities_), 1u);
  EXPECT_EQ(activities_.back().correlation_id, 5u);
  EXPECT_EQ(FakeCupti::flushes.size(), 3u);  // no flush once stopped
  source.stop();                             // idempotent
}

TEST(CuptiLaunchApis, LaunchesCopiesAndMemsetsOnly) {
  for (const char* name :
       {"cudaLaunchKernel_v7000", "cudaLaunchKernel_ptsz_v7000", "cudaLaunchKernelExC_v11060",
        "cudaLaunchCooperativeKernel_v9000", "cudaGraphLaunch_v10000", "cudaMemcpyAsync_v3020",
        "cudaMemcpy2DAsync_v3020", "cudaMemsetAsync_v3020", "cuLaunchKernel", "cuLaunchKernelEx",
        "cuGraphLaunch_ptsz", "cuMemcpyHtoDAsync_v2", "cuMemcpyAsync", "cuMemsetD32Async"})
    EXPECT_TRUE(is_launching_api(name)) << name;
  for (const char* name :
       {"cudaGetDevice_v3020", "cudaGetLastError_v3020", "cudaEventRecord_v3020",
        "cudaStreamSynchronize_v3020", "cudaLaunchHostFunc_v10000", "cuLaunchHostFunc",
        "cuCtxGetCurrent", "cuMemAlloc_v2", "cudaMalloc_v3020", "cuEventQuery", ""})
    EXPECT_FALSE(is_launching_api(name)) << name;
}

TEST_F(FakeCuptiSource, LaunchApiRecordsOnlyTurnsTheOtherApisOffAndBackOn) {
  const auto rt = kCuptiCbDomainRuntimeApi;
  const auto drv = kCuptiCbDomainDriverApi;
  FakeCupti::api_names = {
      {{rt, 3}, "cudaGetDevice_v3020"},     {{rt, 211}, "cudaLaunchKernel_v7000"},
      {{rt, 41}, "cudaMemcpyAsync_v3020"},  {{rt, 274}, "cudaLaunchHostFunc_v10000"},
      {{rt, 135}, "cudaEventRecord_v3020"}, {{drv, 17}, "cuCtxGetCurrent"},
      {{drv, 307}, "cuLaunchKernel"},       {{drv, 279}, "cuMemcpyHtoDAsync_v2"},
      {{drv, 514}, "cuGraphLaunch"},
  };
  CuptiSourceSettings settings;
  settings.launch_api_records_only = true;
  CuptiActivitySource source(FakeCupti::api_with_per_api_records(), settings);
  ASSERT_EQ(source.start(), std::nullopt);
  // Every kind as always; then the APIs that launch nothing turned off.
  EXPECT_EQ(FakeCupti::enabled,
            (std::vector<int>{kCuptiActivityKindConcurrentKernel, kCuptiActivityKindMemcpy,
                              kCuptiActivityKindMemset, kCuptiActivityKindRuntime,
                              kCuptiActivityKindDriver}));
  using Id = std::pair<int, std::uint32_t>;
  EXPECT_EQ(FakeCupti::apis_off, (std::set<Id>{{rt, 3}, {rt, 274}, {rt, 135}, {drv, 17}}));
  EXPECT_EQ(source.launch_api_records().runtime, 2);
  EXPECT_EQ(source.launch_api_records().driver, 3);
  EXPECT_EQ(source.launch_api_records().turned_off, 4);
  // Their records are launches as before.
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 1, 1000));
  FakeCupti::queue(kernel_record(1, 2000, 3000, kGemmName));
  EXPECT_EQ(source.collect(launches_, activities_), 2u);
  ASSERT_EQ(launches_.size(), 1u);
  EXPECT_EQ(launches_[0].cpu_ns, 1000);
  // Stop turns them on again before the kinds go, so CUPTI is as we found it.
  source.stop();
  EXPECT_TRUE(FakeCupti::apis_off.empty());
  EXPECT_TRUE(FakeCupti::enabled.empty());
  EXPECT_TRUE(FakeCupti::api_on_after_kind_disabled.empty());
}

TEST_F(FakeCuptiSource, EveryApiCallIsRecordedByDefaultOrWithoutKnownLaunchNames) {
  FakeCupti::api_names = {{{kCuptiCbDomainRuntimeApi, 211}, "cudaLaunchKernel_v7000"},
                          {{kCuptiCbDomainRuntimeApi, 3}, "cudaGetDevice_v3020"},
                          {{kCuptiCbDomainDriverApi, 9}, "something_else"}};
  {
    CuptiActivitySource source(FakeCupti::api_with_per_api_records());  // default: all
    ASSERT_EQ(source.start(), std::nullopt);
    EXPECT_TRUE(FakeCupti::apis_off.empty());
    EXPECT_EQ(source.launch_api_records().runtime, 0);
  }
  // Names not as expected (no launch API in the driver domain): turning APIs
  // off would miss launches, so every call stays recorded.
  CuptiSourceSettings settings;
  settings.launch_api_records_only = true;
  CuptiActivitySource source(FakeCupti::api_with_per_api_records(), settings);
  ASSERT_EQ(source.start(), std::nullopt);
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
  EXPECT_TRUE(FakeCupti::apis_off.empty());
  EXPECT_EQ(source.launch_api_records().runtime, 0);
  EXPECT_EQ(source.launch_api_records().turned_off, 0);
}

TEST_F(FakeCuptiSource, WithoutTimestampCallbackTheOffsetIsMeasured) {
  // CUPTI on CLOCK_REALTIME: decades ahead of the monotonic clock.
  FakeCupti::clock_shift_ns = 1700000000000000000;
  CuptiActivitySource source(FakeCupti::api(/*with_timestamp_callback=*/false));
  ASSERT_EQ(source.start(), std::nullopt);
  EXPECT_FALSE(source.uses_timestamp_callback());
  const std::int64_t offset = source.timestamp_map().offset_ns;
  // Exact up to the time between two clock reads.
  EXPECT_NEAR(static_cast<double>(offset), -1.7e18, 1e6);

  const auto cupti_t = static_cast<std::uint64_t>(1700000000000000000 + 5000000);
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_DRIVER, 7, cupti_t));
  FakeCupti::queue(kernel_record(7, cupti_t + 1000, cupti_t + 2000, kGemmName));
  EXPECT_EQ(source.collect(launches_, activities_), 2u);
  ASSERT_EQ(launches_.size(), 1u);
  ASSERT_EQ(activities_.size(), 1u);
  EXPECT_EQ(launches_[0].cpu_ns, static_cast<std::int64_t>(cupti_t) + offset);
  EXPECT_EQ(activities_[0].start_ns, launches_[0].cpu_ns + 1000);
  EXPECT_EQ(activities_[0].end_ns, launches_[0].cpu_ns + 2000);
  EXPECT_NEAR(static_cast<double>(launches_[0].cpu_ns), 5e6, 1e6);
}

TEST_F(FakeCuptiSource, RefusedTimestampCallbackFallsBackToTheOffset) {
  FakeCupti::timestamp_callback_result = kCuptiErrorUnknown;
  FakeCupti::clock_shift_ns = 123456789;
  CuptiActivitySource source(FakeCupti::api(/*with_timestamp_callback=*/true));
  ASSERT_EQ(source.start(), std::nullopt);
  EXPECT_FALSE(source.uses_timestamp_callback());
  EXPECT_NEAR(static_cast<double>(source.timestamp_map().offset_ns), -123456789.0, 1e6);
}

TEST_F(FakeCuptiSource, EnableFailureSaysWhichAndUndoesTheRest) {
  FakeCupti::failing_kind = kCuptiActivityKindMemset;
  CuptiActivitySource source(FakeCupti::api(true));
  EXPECT_EQ(source.start(), std::optional<std::string>(
                                "cuptiActivityEnable(MEMSET) failed: 999 (CUPTI_ERROR_UNKNOWN); "
                                "is there a CUDA driver and a GPU, as recent as this CUPTI?"));
  EXPECT_FALSE(source.running());
  EXPECT_TRUE(FakeCupti::enabled.empty());  // kernel and memcpy records disabled again
  EXPECT_EQ(source.start(), std::optional<std::string>("a CUPTI activity source starts once"));
  // The failed source left the process free for another.
  FakeCupti::failing_kind = -1;
  CuptiActivitySource next(FakeCupti::api(true));
  EXPECT_EQ(next.start(), std::nullopt);
}

TEST_F(FakeCuptiSource, OneSourceAtATime) {
  CuptiActivitySource first(FakeCupti::api(true));
  ASSERT_EQ(first.start(), std::nullopt);
  CuptiActivitySource second(FakeCupti::api(true));
  EXPECT_EQ(second.start(), std::optional<std::string>(
                                "another CUPTI activity source is capturing in this process"));
  first.stop();
  CuptiActivitySource third(FakeCupti::api(true));
  EXPECT_EQ(third.start(), std::nullopt);
}

TEST_F(FakeCuptiSource, LentBuffersAreCappedAndDropsCounted) {
  CuptiSourceSettings settings;
  settings.buffer_bytes = 16 << 10;
  settings.max_buffer_bytes = 32 << 10;
  CuptiActivitySource source(FakeCupti::api(true), settings);
  ASSERT_EQ(source.start(), std::nullopt);
  // CUPTI asks for three buffers while holding the first two.
  std::uint8_t* buffers[3] = {};
  std::size_t sizes[3] = {};
  for (int i = 0; i < 3; ++i) {
    std::size_t max_records = 99;
    FakeCupti::requested(&buffers[i], &sizes[i], &max_records);
    EXPECT_EQ(max_records, 0u);
  }
  EXPECT_NE(buffers[0], nullptr);
  EXPECT_EQ(sizes[0], std::size_t{16} << 10);
  EXPECT_NE(buffers[1], nullptr);
  EXPECT_EQ(buffers[2], nullptr);
  EXPECT_EQ(sizes[2], 0u);
  EXPECT_EQ(source.buffers_refused(), 1);
  // CUPTI reports what it could not store for want of a buffer.
  FakeCupti::dropped = 5;
  // Empty buffers come back and are freed; a filled one waits for collect.
  FakeCupti::completed(nullptr, 0, buffers[0], sizes[0], 0);
  const Kernel k = kernel_record(1, 10, 20, kGemmName);
  std::memcpy(buffers[1], &k, sizeof k);
  FakeCupti::completed(nullptr, 0, buffers[1], sizes[1], sizeof k);
  // With one buffer waiting, there is room to lend one more.
  std::uint8_t* more = nullptr;
  std::size_t more_size = 0;
  std::size_t max_records = 0;
  FakeCupti::requested(&more, &more_size, &max_records);
  EXPECT_NE(more, nullptr);
  FakeCupti::requested(&buffers[2], &sizes[2], &max_records);
  EXPECT_EQ(buffers[2], nullptr);
  EXPECT_EQ(source.buffers_refused(), 2);
  FakeCupti::completed(nullptr, 0, more, more_size, 0);

  EXPECT_EQ(source.collect(launches_, activities_), 1u);
  EXPECT_EQ(source.cupti_dropped(), 5);
  EXPECT_EQ(source.lost(), 0);
  // All back: the whole cap can be lent again.
  FakeCupti::requested(&buffers[0], &sizes[0], &max_records);
  FakeCupti::requested(&buffers[1], &sizes[1], &max_records);
  EXPECT_NE(buffers[0], nullptr);
  EXPECT_NE(buffers[1], nullptr);
  FakeCupti::completed(nullptr, 0, buffers[0], sizes[0], 0);
  FakeCupti::completed(nullptr, 0, buffers[1], sizes[1], 0);
}

TEST_F(FakeCuptiSource, BuffersComingBackAfterTheSourceAreFreed) {
  std::uint8_t* late = nullptr;
  std::size_t size = 0;
  {
    CuptiActivitySource source(FakeCupti::api(true));
    ASSERT_EQ(source.start(), std::nullopt);
    std::size_t max_records = 0;
    FakeCupti::requested(&late, &size, &max_records);
    ASSERT_NE(late, nullptr);
  }
  // CUPTI hands it back after the source is gone: freed, not queued (the
  // sanitizers and the next source's cap would tell).
  const Kernel k = kernel_record(1, 10, 20, kGemmName);
  std::memcpy(late, &k, sizeof k);
  FakeCupti::completed(nullptr, 0, late, size, sizeof k);
  // And a request with no source is declined.
  std::uint8_t* none = nullptr;
  std::size_t max_records = 0;
  FakeCupti::requested(&none, &size, &max_records);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(size, 0u);
}

TEST_F(FakeCuptiSource, CallbacksOnCuptisThreadWhileCollecting) {
  // CUPTI fills and hands back buffers on its own thread while the sampler
  // collects: every record is either collected or its buffer refused.
  CuptiSourceSettings settings;
  settings.buffer_bytes = 16 << 10;
  settings.max_buffer_bytes = 64 << 10;
  CuptiActivitySource source(FakeCupti::api(true), settings);
  ASSERT_EQ(source.start(), std::nullopt);
  constexpr int kBuffers = 2000;
  std::atomic<bool> done{false};
  std::thread cupti([&] {
    for (int i = 0; i < kBuffers; ++i) {
      std::uint8_t* buffer = nullptr;
      std::size_t size = 0;
      std::size_t max_records = 0;
      FakeCupti::requested(&buffer, &size, &max_records);
      if (buffer == nullptr) continue;
      const Kernel k = kernel_record(static_cast<std::uint32_t>(i), 10, 20, kGemmName);
      std::memcpy(buffer, &k, sizeof k);
      FakeCupti::completed(nullptr, 0, buffer, size, sizeof k);
    }
    done = true;
  });
  while (!done)
    source.collect(launches_, activities_);
  cupti.join();
  source.collect(launches_, activities_);
  EXPECT_EQ(static_cast<std::int64_t>(activities_.size()) + source.buffers_refused(), kBuffers);
  EXPECT_EQ(source.lost(), 0);
}

// The runtime's stage over the source: how far records have arrived, and the
// attribution of a step's copies and collectives once they have.
TEST_F(FakeCuptiSource, TheRuntimeStageAttributesOnceALaterLaunchArrived) {
  runtime::CuptiStage stage(FakeCupti::api(/*with_timestamp_callback=*/true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  stage.collect(false);
  EXPECT_EQ(stage.delivered_through(), std::nullopt);  // nothing yet
  // Step body [1000, 5000]: a pageable H2D copy and an NCCL kernel.
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 1, 1500));
  FakeCupti::queue(memcpy_record(1, 2000, 2600, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                 CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 4096));
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_DRIVER, 2, 3000));
  FakeCupti::queue(kernel_record(2, 3100, 4100, kNcclName));
  // The next step's first launch, whose kernel has come back too: every
  // launch up to it has been delivered.
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 3, 6000));
  FakeCupti::queue(kernel_record(3, 6100, 6900, kGemmName));
  stage.collect(false);
  ASSERT_EQ(stage.delivered_through(), 6000);
  const model::StepGpuActivity a = stage.attribute(1000, 5000);
  EXPECT_EQ(a.h2d_copies, 1);
  EXPECT_EQ(a.h2d_pageable_copies, 1);
  EXPECT_DOUBLE_EQ(a.h2d_bytes, 4096.0);
  EXPECT_DOUBLE_EQ(a.h2d_ms, 600e-6);
  EXPECT_DOUBLE_EQ(a.collective_ms, 1000e-6);
  EXPECT_DOUBLE_EQ(a.busy_ms, 1600e-6);
  // The final collect stops CUPTI (a forced flush).
  stage.collect(true);
  EXPECT_TRUE(FakeCupti::enabled.empty());
  EXPECT_EQ(FakeCupti::flushes.back(), kCuptiFlushForced);
}

TEST_F(FakeCuptiSource, PerThreadBuffersAreTurnedOffBeforeTheCallbacks) {
  {
    CuptiActivitySource source(FakeCupti::api(true));
    ASSERT_EQ(source.start(), std::nullopt);
    ASSERT_EQ(FakeCupti::attribute_calls.size(), 1u);
    EXPECT_EQ(FakeCupti::attribute_calls[0].attr,
              int(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER));
    EXPECT_EQ(FakeCupti::attribute_calls[0].value, 0);
    EXPECT_FALSE(FakeCupti::attribute_calls[0].after_callbacks);  // as CUPTI requires
    EXPECT_EQ(source.per_thread_buffers(), PerThreadBuffers::SetOff);
    EXPECT_EQ(source.cupti_version(), 130001u);
  }
  FakeCupti::reset();
  {
    CuptiSourceSettings on;
    on.per_thread_buffers = true;
    CuptiActivitySource source(FakeCupti::api(true), on);
    ASSERT_EQ(source.start(), std::nullopt);
    EXPECT_EQ(FakeCupti::attribute_calls.at(0).value, 1);
    EXPECT_EQ(source.per_thread_buffers(), PerThreadBuffers::SetOn);
  }
  FakeCupti::reset();
  {
    CuptiSourceSettings cupti_default;
    cupti_default.per_thread_buffers.reset();
    CuptiActivitySource source(FakeCupti::api(true), cupti_default);
    ASSERT_EQ(source.start(), std::nullopt);
    EXPECT_TRUE(FakeCupti::attribute_calls.empty());
    EXPECT_EQ(source.per_thread_buffers(), PerThreadBuffers::CuptiDefault);
  }
  FakeCupti::reset();
  {
    // A CUPTI that refuses the attribute still captures, with its default.
    FakeCupti::attribute_result = kCuptiErrorUnknown;
    CuptiActivitySource source(FakeCupti::api(true));
    ASSERT_EQ(source.start(), std::nullopt);
    EXPECT_EQ(source.per_thread_buffers(), PerThreadBuffers::Refused);
    EXPECT_STREQ(to_string(source.per_thread_buffers()), "refused");
  }
  FakeCupti::reset();
  {
    CuptiApi old = FakeCupti::api(true);
    old.activity_set_attribute = nullptr;
    old.get_version = nullptr;
    CuptiActivitySource source(old);
    ASSERT_EQ(source.start(), std::nullopt);
    EXPECT_EQ(source.per_thread_buffers(), PerThreadBuffers::Unsupported);
    EXPECT_EQ(source.cupti_version(), std::nullopt);
  }
}

// Issue 17: with per-thread buffers (CUDA 13's default), the sender's own
// cudaEventQuery calls and c10d's watchdog come back in their threads'
// buffers long before the training thread's buffer with its copies and
// kernels. Taking the horizon from every API call attributed the step before
// its copy had arrived; the copy then came "late" and was dropped, silently.
TEST_F(FakeCuptiSource, CallsOfOtherThreadsDoNotMoveTheHorizon) {
  runtime::CuptiStage stage(FakeCupti::api(/*with_timestamp_callback=*/true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  // First buffer back: another thread's calls, after the step [1000, 5000]
  // ended; they launch nothing.
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 10, 7000));
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_DRIVER, 11, 8000));
  stage.collect(false);
  EXPECT_EQ(stage.delivered_through(), std::nullopt);  // says nothing of the step's work
  // Then the training thread's buffer: the step's copy, and the next step's
  // first kernel.
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 1, 1500));
  FakeCupti::queue(memcpy_record(1, 2000, 2600, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                 CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 1 << 20));
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 2, 6000));
  FakeCupti::queue(kernel_record(2, 6100, 6300, kGemmName));
  stage.collect(false);
  ASSERT_EQ(stage.delivered_through(), 6000);
  const model::StepGpuActivity a = stage.attribute(1000, 5000);
  EXPECT_EQ(a.h2d_copies, 1);
  EXPECT_DOUBLE_EQ(a.h2d_bytes, double(1 << 20));
  EXPECT_EQ(stage.attributor().late(), 0);
  EXPECT_EQ(stage.records_lost(), 0);
}

TEST_F(FakeCuptiSource, RecordsThatReachNoStepCountAsLost) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  // A kernel launched before the step (outside any step), the step's kernel,
  // and a later launch that carries the horizon past the step.
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 1, 500));
  FakeCupti::queue(kernel_record(1, 600, 700, kGemmName));
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 2, 1500));
  FakeCupti::queue(kernel_record(2, 1600, 1700, kGemmName));
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 3, 6000));
  FakeCupti::queue(kernel_record(3, 6100, 6200, kGemmName));
  stage.collect(false);
  (void)stage.attribute(1000, 5000);
  EXPECT_EQ(stage.attributor().outside_steps(), 1);
  // A launch of the settled step that comes, with its copy, after the step
  // was attributed: late.
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 4, 1200));
  FakeCupti::queue(memcpy_record(4, 1800, 1900, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                 CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 64));
  // A copy whose launch record never comes: unmatched once the next step
  // settles.
  FakeCupti::queue(memcpy_record(5, 2000, 2100, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                 CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 64));
  stage.collect(false);
  EXPECT_EQ(stage.attributor().late(), 1);
  (void)stage.attribute(5500, 9000);
  EXPECT_EQ(stage.attributor().unmatched(), 1);
  EXPECT_EQ(stage.attributor().attributed(), 2);  // the two steps' kernels
  EXPECT_EQ(stage.records_lost(), 3);             // outside + late + unmatched
}

TEST_F(FakeCuptiSource, AnIdleFlushHandsBackEverythingUpToNow) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  const std::int64_t now = timing::now_ns();
  // The step's copy came back; nothing was launched after the step.
  FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 1, std::uint64_t(now - 4000)));
  FakeCupti::queue(memcpy_record(1, std::uint64_t(now - 3900), std::uint64_t(now - 3800),
                                 CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                                 8));
  stage.collect(false);
  ASSERT_EQ(stage.delivered_through(), now - 4000);  // before the step's end
  stage.flush_idle();
  EXPECT_EQ(FakeCupti::flushes.back(), kCuptiFlushForced);
  ASSERT_TRUE(stage.delivered_through());
  EXPECT_GE(*stage.delivered_through(), now);
  EXPECT_EQ(stage.attribute(now - 5000, now - 1000).h2d_copies, 1);
}

// --- CUPTI on a duty cycle (TRACEML_CUPTI_DUTY, issue 36) --------------------

bool kind_on(int kind) {
  return std::find(FakeCupti::enabled.begin(), FakeCupti::enabled.end(), kind) !=
         FakeCupti::enabled.end();
}

/// What the training thread does in one step, as CUPTI would record it: the
/// duty cycle asked at the step's begin, then a pageable 64-byte H2D copy
/// and a kernel launched inside the step, recorded only while their kinds
/// are on. Returns the step body [begin, end] on the now_ns clock.
std::pair<std::int64_t, std::int64_t> fake_step(runtime::CuptiStage& stage, std::int64_t step) {
  stage.duty_cycle()->at_step_begin(step);
  const std::int64_t begin = timing::now_ns();
  const auto corr = static_cast<std::uint32_t>(step * 10);
  const auto t = static_cast<std::uint64_t>(timing::now_ns());
  if (kind_on(kCuptiActivityKindRuntime)) {
    FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, corr, t));
    FakeCupti::queue(api_record(CUPTI_ACTIVITY_KIND_RUNTIME, corr + 1, t + 1));
  }
  if (kind_on(kCuptiActivityKindMemcpy))
    FakeCupti::queue(memcpy_record(corr, t + 10, t + 20, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                   CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 64));
  if (kind_on(kCuptiActivityKindConcurrentKernel))
    FakeCupti::queue(kernel_record(corr + 1, t + 30, t + 40, kGemmName));
  // The step's end after its launches, on a clock that has moved on.
  std::int64_t end = timing::now_ns();
  while (end <= static_cast<std::int64_t>(t) + 1)
    end = timing::now_ns();
  return {begin, end};
}

TEST(CuptiDutyCycleSteps, WindowsOfKStepsEveryMFromStepOne) {
  const DutyCycle c{2, 5};
  std::vector<std::int64_t> on;
  for (std::int64_t s = 1; s <= 12; ++s)
    if (c.records(s)) on.push_back(s);
  EXPECT_EQ(on, (std::vector<std::int64_t>{1, 2, 6, 7, 11, 12}));
  EXPECT_FALSE(c.records(0));
  EXPECT_EQ(c.next_boundary(0), 1);
  EXPECT_EQ(c.next_boundary(1), 3);
  EXPECT_EQ(c.next_boundary(2), 3);
  EXPECT_EQ(c.next_boundary(3), 6);
  EXPECT_EQ(c.next_boundary(5), 6);
  EXPECT_EQ(c.next_boundary(6), 8);
  EXPECT_EQ(c.next_boundary(8), 11);
}

TEST(CuptiDutyCycleSteps, ParsesKOfMAndRefusesAnythingElseInOneLine) {
  std::string why;
  EXPECT_EQ(parse_duty_cycle("8/128", why), (DutyCycle{8, 128}));
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(parse_duty_cycle("1/1000000", why), (DutyCycle{1, 1000000}));
  for (const char* off : {"", "off", "0"}) {
    EXPECT_EQ(parse_duty_cycle(off, why), std::nullopt) << off;
    EXPECT_TRUE(why.empty()) << off;
  }
  for (const char* bad :
       {"8", "8/", "/128", "0/128", "128/128", "200/128", "8/1000001", "-1/4", "8/128x", " 8/128",
        "8 / 128", "1e1/100", "8/128/2", "on", "1", "99999999999999999999/2"}) {
    EXPECT_EQ(parse_duty_cycle(bad, why), std::nullopt) << bad;
    EXPECT_NE(why.find("is not K/M with 1 <= K < M"), std::string::npos) << bad << ": " << why;
    EXPECT_EQ(why.find('\n'), std::string::npos);
  }
}

// The records are on for steps 1-2 and 6-7 of a 2/5 cycle, off for 3-5 and
// 8: CUPTI is switched at the boundaries only, and a step's copy and kernel
// reach that step, inside the windows alone.
TEST_F(FakeCuptiSource, DutyCycleRecordsOnlyInsideItsWindowsAndAttributesThere) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(DutyCycle{2, 5}), std::nullopt);
  ASSERT_NE(stage.duty_cycle(), nullptr);
  std::vector<std::pair<std::int64_t, std::int64_t>> bodies;
  std::vector<bool> on_during;
  for (std::int64_t s = 1; s <= 8; ++s) {
    bodies.push_back(fake_step(stage, s));
    on_during.push_back(kind_on(kCuptiActivityKindRuntime));
    // Every kind switches together: never a kernel without its launch.
    EXPECT_EQ(FakeCupti::enabled.size(), on_during.back() ? 5u : 0u) << "step " << s;
  }
  EXPECT_EQ(on_during, (std::vector<bool>{true, true, false, false, false, true, true, false}));
  EXPECT_EQ(stage.duty_cycle()->windows(), 2);
  EXPECT_EQ(stage.duty_cycle()->failed_switches(), 0);
  stage.collect(false);
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    const auto [begin, end] = bodies[i];
    const bool recorded = stage.records_step(begin, end);
    EXPECT_EQ(recorded, on_during[i]) << "step " << i + 1;
    if (!recorded) continue;
    const model::StepGpuActivity a = stage.attribute(begin, end);
    EXPECT_EQ(a.h2d_copies, 1) << "step " << i + 1;
    EXPECT_EQ(a.h2d_pageable_copies, 1);
    EXPECT_DOUBLE_EQ(a.h2d_bytes, 64.0);
    EXPECT_DOUBLE_EQ(a.busy_ms, 20e-6);  // the copy's 10 ns and the kernel's 10 ns
  }
  EXPECT_EQ(stage.steps_recorded(), 4);
  EXPECT_EQ(stage.steps_unrecorded(), 4);
  EXPECT_EQ(stage.attributor().attributed(), 8);
  EXPECT_EQ(stage.records_lost(), 0);
  EXPECT_EQ(
      stage.duty_summary(),
      "duty cycle 2/5: windows 2, steps recorded 4, steps not recorded 4, switches refused 0");
  // A step that straddles a switch (another thread's, begun before the
  // window opened) is not whole: not recorded.
  EXPECT_FALSE(stage.records_step(bodies[4].first, bodies[5].second));
  EXPECT_FALSE(stage.records_step(bodies[1].first, bodies[2].second));
}

// The first window closed after step 2: from then on nothing carries the
// horizon past step 2, so the pipeline is told when the records went off.
TEST_F(FakeCuptiSource, AClosedWindowSaysWhenItsRecordsWentOff) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(DutyCycle{2, 4}), std::nullopt);
  const auto s1 = fake_step(stage, 1);
  const auto s2 = fake_step(stage, 2);
  EXPECT_EQ(stage.records_off_after(s2.second), std::nullopt);  // still open
  const std::int64_t before_off = timing::now_ns();
  const auto s3 = fake_step(stage, 3);
  const auto off = stage.records_off_after(s2.second);
  ASSERT_TRUE(off);
  EXPECT_GE(*off, before_off);
  EXPECT_LE(*off, s3.first);
  EXPECT_EQ(stage.records_off_after(s1.second), off);
  EXPECT_EQ(stage.records_off_after(s3.second), std::nullopt);  // in no window
  // The steps' records came back; the last launch is step 2's, before its end.
  stage.collect(false);
  ASSERT_TRUE(stage.delivered_through());
  EXPECT_LT(*stage.delivered_through(), s2.second);
  stage.flush_idle();  // what the pipeline does once the GPU passed step 2
  EXPECT_GE(*stage.delivered_through(), *off);
  EXPECT_EQ(stage.attribute(s1.first, s1.second).h2d_copies, 1);
  EXPECT_EQ(stage.attribute(s2.first, s2.second).h2d_copies, 1);
}

// Step ids as the hot path gives them: a boundary jumped over (a step id that
// lands past it), several periods, and a thread that asks with an older id
// after a newer one switched: the state follows the newest step.
TEST_F(FakeCuptiSource, DutyCycleFollowsStepIdsAcrossPeriodsAndJumps) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(DutyCycle{8, 128}), std::nullopt);
  timing::CuptiDutyCycle& duty = *stage.duty_cycle();
  for (std::int64_t s = 1; s <= 8; ++s)
    duty.at_step_begin(s);
  EXPECT_TRUE(duty.recording());
  duty.at_step_begin(9);
  EXPECT_FALSE(duty.recording());
  duty.at_step_begin(8);  // an older id after the switch: ignored
  EXPECT_FALSE(duty.recording());
  duty.at_step_begin(130);  // inside the second window, its start jumped over
  EXPECT_TRUE(duty.recording());
  EXPECT_EQ(duty.windows(), 2);
  duty.at_step_begin(200);
  EXPECT_FALSE(duty.recording());
  for (std::int64_t s = 201; s <= 128 * 10; ++s)
    duty.at_step_begin(s);
  // Windows 3..10 opened at steps 257, 385, ..., 1153; step 1280 is after the last.
  EXPECT_EQ(duty.windows(), 10);
  EXPECT_FALSE(duty.recording());
  duty.at_step_begin(128 * 10 + 1);
  EXPECT_TRUE(duty.recording());
  EXPECT_EQ(duty.windows(), 11);
  // Stopping detaches it: no switch afterwards, and the kinds stay off.
  stage.collect(true);
  EXPECT_TRUE(FakeCupti::enabled.empty());
  duty.at_step_begin(128 * 10 + 9);
  duty.at_step_begin(128 * 11 + 1);
  EXPECT_TRUE(FakeCupti::enabled.empty());
}

// A CUPTI that refuses to turn the kinds on again: no window opens, the
// refusal is counted, and the next boundary tries again.
TEST_F(FakeCuptiSource, ARefusedSwitchLeavesTheRecordsAsTheyWere) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(DutyCycle{1, 2}), std::nullopt);
  const auto s1 = fake_step(stage, 1);
  (void)fake_step(stage, 2);
  EXPECT_TRUE(FakeCupti::enabled.empty());
  FakeCupti::failing_kind = kCuptiActivityKindMemset;
  const auto s3 = fake_step(stage, 3);
  EXPECT_TRUE(FakeCupti::enabled.empty());  // the kinds turned on first are off again
  EXPECT_EQ(stage.duty_cycle()->failed_switches(), 1);
  EXPECT_EQ(stage.duty_cycle()->windows(), 1);
  EXPECT_FALSE(stage.records_step(s3.first, s3.second));
  EXPECT_TRUE(stage.records_step(s1.first, s1.second));
  FakeCupti::failing_kind = -1;
  (void)fake_step(stage, 4);
  const auto s5 = fake_step(stage, 5);
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
  EXPECT_TRUE(stage.records_step(s5.first, s5.second));
}

// With the launching API calls only: the APIs turned off stay off after a
// window reopens, and stopping while paused turns no API on by itself.
TEST_F(FakeCuptiSource, DutyCycleKeepsTheLaunchApisOnlyAcrossWindows) {
  const auto rt = kCuptiCbDomainRuntimeApi;
  const auto drv = kCuptiCbDomainDriverApi;
  FakeCupti::api_names = {{{rt, 3}, "cudaGetDevice_v3020"},
                          {{rt, 211}, "cudaLaunchKernel_v7000"},
                          {{drv, 17}, "cuCtxGetCurrent"},
                          {{drv, 307}, "cuLaunchKernel"}};
  CuptiSourceSettings settings;
  settings.launch_api_records_only = true;
  runtime::CuptiStage stage(FakeCupti::api_with_per_api_records(), settings);
  ASSERT_EQ(stage.start_source(DutyCycle{1, 2}), std::nullopt);
  using Id = std::pair<int, std::uint32_t>;
  const std::set<Id> off = {{rt, 3}, {drv, 17}};
  EXPECT_EQ(FakeCupti::apis_off, off);
  stage.duty_cycle()->at_step_begin(2);  // paused
  EXPECT_TRUE(FakeCupti::enabled.empty());
  stage.duty_cycle()->at_step_begin(3);  // on again
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
  EXPECT_EQ(FakeCupti::apis_off, off);
  stage.duty_cycle()->at_step_begin(4);  // paused, then the run ends
  stage.collect(true);
  EXPECT_TRUE(FakeCupti::enabled.empty());
  EXPECT_TRUE(FakeCupti::api_on_after_kind_disabled.empty());
}

// Without a duty cycle every step is recorded, as before issue 36: the
// cycle that always records only lends CUPTI to a profile capture.
TEST_F(FakeCuptiSource, WithoutADutyCycleEveryStepIsRecorded) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  ASSERT_NE(stage.duty_cycle(), nullptr);
  EXPECT_TRUE(stage.duty_cycle()->cycle().is_always());
  for (std::int64_t s = 1; s <= 1000; ++s)
    stage.duty_cycle()->at_step_begin(s);  // never a switch
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
  EXPECT_EQ(stage.duty_cycle()->windows(), 1);
  EXPECT_TRUE(stage.records_step(1, 2));  // a step before the source started, too
  EXPECT_EQ(stage.records_off_after(2), std::nullopt);
  EXPECT_EQ(stage.duty_summary(), std::nullopt);
}

// --- CUPTI lent to LibTorch's profiler for a capture (issue 34) -------------

/// Kineto's buffer callbacks, as LibTorch's profiler registers them.
struct Kineto {
  static inline int buffers = 0;  ///< buffers handed back to Kineto
  static void requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    *size = 64 << 10;
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, *size));
    *max_records = 0;
  }
  static void completed(void*, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t) {
    ++buffers;
    std::free(buffer);
  }
  /// What its profiler's start does: its callbacks, its kinds.
  static void start() {
    buffers = 0;
    FakeCupti::register_callbacks(&requested, &completed);
    for (const int kind :
         {kCuptiActivityKindConcurrentKernel, kCuptiActivityKindMemcpy, kCuptiActivityKindRuntime})
      FakeCupti::enable(kind);
  }
  /// Its stop: its kinds off, its buffers back (its callbacks stay
  /// registered); with `finalize`, CUPTI finalized too (nobody's callbacks
  /// registered any more, the clock CUPTI's own).
  static void stop(bool finalize = false) {
    for (const int kind :
         {kCuptiActivityKindConcurrentKernel, kCuptiActivityKindMemcpy, kCuptiActivityKindRuntime})
      FakeCupti::disable(kind);
    FakeCupti::flush_all(kCuptiFlushForced);
    if (!finalize) return;
    FakeCupti::requested = nullptr;
    FakeCupti::completed = nullptr;
    FakeCupti::timestamp_source = nullptr;
  }
};

// The steps before the capture keep their records (they come back at the
// lend), the steps under the profiler are not covered (their GPU activity
// missing, never the profiler's records), and after it traceml's callbacks
// and kinds are back and its records whole again.
int g_settles = 0;
std::size_t g_kinds_at_settle = 0;
bool g_settle_fails = false;
bool settle_gpu() noexcept {
  ++g_settles;
  g_kinds_at_settle = FakeCupti::enabled.size();
  return !g_settle_fails;
}

TEST_F(FakeCuptiSource, ACaptureBorrowsCuptiAndGivesItBack) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  CuptiDutyCycle& duty = *stage.duty_cycle();
  g_settles = 0;
  duty.settle_with(&settle_gpu);
  const CuptiBufferCompleted ours = FakeCupti::completed;
  const CuptiTimestampSource our_clock = FakeCupti::timestamp_source;
  ASSERT_NE(our_clock, nullptr);
  const auto s1 = fake_step(stage, 1);
  ASSERT_FALSE(FakeCupti::queued.empty());
  ASSERT_TRUE(duty.lend());
  // The GPU finished step 1's work first, with the records still on.
  EXPECT_EQ(g_settles, 1);
  EXPECT_EQ(g_kinds_at_settle, 5u);
  EXPECT_TRUE(FakeCupti::enabled.empty());  // every kind of ours off
  // CUPTI's own clock for the profiler's records, not traceml's.
  ASSERT_NE(FakeCupti::timestamp_source, nullptr);
  EXPECT_NE(FakeCupti::timestamp_source, our_clock);
  EXPECT_NEAR(double(FakeCupti::timestamp_source()) / 1e9, timing::wall_seconds(), 5.0);
  ASSERT_FALSE(FakeCupti::flushes.empty());
  EXPECT_EQ(FakeCupti::flushes.back(), kCuptiFlushForced);  // our buffers back first
  EXPECT_TRUE(FakeCupti::queued.empty());
  Kineto::start();
  const auto s2 = fake_step(stage, 2);  // recorded by Kineto's kinds, into its buffers
  const std::size_t flushes = FakeCupti::flushes.size();
  stage.collect(false);
  EXPECT_EQ(FakeCupti::flushes.size(), flushes) << "a flush while lent is Kineto's business";
  Kineto::stop();
  EXPECT_EQ(Kineto::buffers, 1);
  ASSERT_TRUE(duty.take_back(3));
  EXPECT_EQ(FakeCupti::completed, ours);  // registered again
  EXPECT_EQ(FakeCupti::timestamp_source, our_clock);
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
  const auto s3 = fake_step(stage, 3);
  stage.collect(false);
  EXPECT_EQ(Kineto::buffers, 1);  // step 3's records are ours
  EXPECT_TRUE(stage.records_step(s1.first, s1.second));
  EXPECT_FALSE(stage.records_step(s2.first, s2.second));
  EXPECT_TRUE(stage.records_step(s3.first, s3.second));
  EXPECT_EQ(stage.attribute(s1.first, s1.second).h2d_copies, 1);
  EXPECT_EQ(stage.attribute(s3.first, s3.second).h2d_copies, 1);
  EXPECT_EQ(duty.lends(), 1);
  EXPECT_EQ(g_settles, 1);
  EXPECT_EQ(stage.duty_summary(),
            "CUPTI lent to LibTorch's profiler once: steps recorded 2, steps not recorded 1, "
            "switches refused 0");
}

// The GPU could not finish its work first (a CUDA graph being captured, an
// error): nothing is lent, the records stay as they were.
TEST_F(FakeCuptiSource, ALendWhoseGpuCannotSettleIsRefused) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  stage.duty_cycle()->settle_with(&settle_gpu);
  g_settle_fails = true;
  const std::size_t flushes = FakeCupti::flushes.size();
  EXPECT_FALSE(stage.duty_cycle()->lend());
  g_settle_fails = false;
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
  EXPECT_EQ(FakeCupti::flushes.size(), flushes);
  EXPECT_FALSE(stage.source().lent());
  EXPECT_EQ(stage.duty_cycle()->lends(), 0);
  const auto s1 = fake_step(stage, 1);
  EXPECT_TRUE(stage.records_step(s1.first, s1.second));
}

// The run ends while the profiler holds CUPTI: stopping touches none of its
// switches and flushes none of its buffers.
TEST_F(FakeCuptiSource, StoppingWhileLentLeavesTheProfilersCupti) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  ASSERT_TRUE(stage.duty_cycle()->lend());
  Kineto::start();
  const std::size_t flushes = FakeCupti::flushes.size();
  stage.collect(true);
  EXPECT_EQ(FakeCupti::enabled.size(), 3u);  // Kineto's three
  EXPECT_EQ(FakeCupti::flushes.size(), flushes);
  EXPECT_EQ(FakeCupti::requested, &Kineto::requested);
  Kineto::stop();
}

// CUPTI refuses traceml's callbacks after the capture: still lent, its steps
// not covered, counted; the next capture's end takes CUPTI back.
TEST_F(FakeCuptiSource, CuptiRefusedBackStaysLentUntilTheNextCaptureEnds) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  CuptiDutyCycle& duty = *stage.duty_cycle();
  const CuptiTimestampSource our_clock = FakeCupti::timestamp_source;
  ASSERT_TRUE(duty.lend());
  Kineto::start();
  Kineto::stop(/*finalize=*/true);
  FakeCupti::register_result = kCuptiErrorUnknown;
  EXPECT_FALSE(duty.take_back(2));
  // Still lent: CUPTI's clock, not traceml's, for the next capture's records.
  ASSERT_NE(FakeCupti::timestamp_source, nullptr);
  EXPECT_NE(FakeCupti::timestamp_source, our_clock);
  EXPECT_TRUE(FakeCupti::enabled.empty());
  const auto s2 = fake_step(stage, 2);
  EXPECT_FALSE(stage.records_step(s2.first, s2.second));
  EXPECT_EQ(duty.failed_switches(), 1);
  FakeCupti::register_result = kCuptiSuccess;
  EXPECT_TRUE(duty.lend());  // the next capture: nothing of ours to switch off
  Kineto::start();
  Kineto::stop(/*finalize=*/true);
  EXPECT_TRUE(duty.take_back(3));  // after CUPTI was finalized: callbacks and clock again
  EXPECT_NE(FakeCupti::timestamp_source, nullptr);
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
  const auto s3 = fake_step(stage, 3);
  EXPECT_TRUE(stage.records_step(s3.first, s3.second));
}

// With a duty cycle: the lend closes the open window, the boundaries passed
// while lent switch nothing, and the capture's end opens a window only when
// the cycle records its next step.
TEST_F(FakeCuptiSource, ALendOnADutyCycleHoldsItsSwitchesUntilTakenBack) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(DutyCycle{2, 4}), std::nullopt);
  CuptiDutyCycle& duty = *stage.duty_cycle();
  (void)fake_step(stage, 1);
  ASSERT_TRUE(duty.lend());
  EXPECT_FALSE(duty.recording());
  Kineto::start();
  for (std::int64_t s = 2; s <= 5; ++s)  // step 5 would open the second window
    duty.at_step_begin(s);
  EXPECT_EQ(FakeCupti::enabled.size(), 3u);  // Kineto's only
  Kineto::stop();
  ASSERT_TRUE(duty.take_back(6));  // step 6 is in the second window
  EXPECT_TRUE(duty.recording());
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
  EXPECT_EQ(duty.windows(), 2);
  (void)fake_step(stage, 6);
  (void)fake_step(stage, 7);  // a boundary again: off
  EXPECT_FALSE(duty.recording());
  ASSERT_TRUE(duty.lend());
  ASSERT_TRUE(duty.take_back(8));  // step 8 records nothing: the kinds stay off
  EXPECT_FALSE(duty.recording());
  EXPECT_TRUE(FakeCupti::enabled.empty());
  (void)fake_step(stage, 9);  // the third window
  EXPECT_TRUE(duty.recording());
}

// A buffer of the profiler's that comes back to traceml's callbacks once
// CUPTI is taken back is neither read nor freed (it is not traceml's).
TEST_F(FakeCuptiSource, AnotherUsersBufferIsNeitherReadNorFreed) {
  CuptiActivitySource source(FakeCupti::api(true));
  ASSERT_EQ(source.start(), std::nullopt);
  ASSERT_TRUE(source.lend());
  Kineto::start();
  std::uint8_t* theirs = nullptr;
  std::size_t size = 0;
  std::size_t max_records = 0;
  FakeCupti::requested(&theirs, &size, &max_records);  // Kineto's buffer, still with CUPTI
  const auto copy = memcpy_record(7, 10, 20, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
                                  CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 64);
  std::memcpy(theirs, &copy, sizeof copy);
  Kineto::stop();
  ASSERT_TRUE(source.take_back(true));
  FakeCupti::completed(nullptr, 0, theirs, size, sizeof copy);  // to traceml's callback
  std::vector<ApiLaunch> launches;
  std::vector<GpuActivity> activities;
  EXPECT_EQ(source.collect(launches, activities), 0u);
  EXPECT_TRUE(activities.empty());
  theirs[0] = 1;  // still Kineto's memory: ASan would call a write after a free
  Kineto::completed(nullptr, 0, theirs, size, 0);
  // The same record in a buffer of traceml's own is read.
  FakeCupti::queue(copy);
  EXPECT_EQ(source.collect(launches, activities), 1u);
  EXPECT_EQ(activities.size(), 1u);
}

// CUPTI refuses traceml's kinds back (the callbacks it took): said (false),
// counted, and the next capture's end tries again.
TEST_F(FakeCuptiSource, KindsRefusedBackAreSaidAndTriedAgain) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  CuptiDutyCycle& duty = *stage.duty_cycle();
  ASSERT_TRUE(duty.lend());
  FakeCupti::failing_kind = kCuptiActivityKindMemset;
  EXPECT_FALSE(duty.take_back(2));
  EXPECT_TRUE(FakeCupti::enabled.empty());
  EXPECT_EQ(duty.failed_switches(), 1);
  FakeCupti::failing_kind = -1;
  ASSERT_TRUE(duty.lend());
  EXPECT_TRUE(duty.take_back(3));
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
}

// The whole hand-over as --profile-steps runs it: the capture lends CUPTI
// before LibTorch's profiler starts (which registers Kineto's callbacks) and
// takes it back after the profiler stopped (and finalized CUPTI).
CuptiDutyCycle* g_lender = nullptr;
CuptiDutyCycle* lender(std::string&) {
  return g_lender;
}
struct FakeProfiler {
  static inline std::size_t our_kinds_at_start = 99;
  static const char* start() noexcept {
    our_kinds_at_start = FakeCupti::enabled.size();
    Kineto::start();
    return nullptr;
  }
  /// A stop that throws (LibTorch's disableProfiler failing): Kineto's kinds
  /// and buffers may still be with CUPTI.
  static inline bool stop_fails = false;
  static const char* stop(void** capture) noexcept {
    *capture = nullptr;
    if (stop_fails) return "profiler state mismatch";
    Kineto::stop();
    return nullptr;
  }
  static void read(void*, ::traceml::detail::ProfiledOpSink, void*) noexcept {}
  static void install() {
    ::traceml::detail::ProfilerHooks hooks;
    hooks.start = &start;
    hooks.stop = &stop;
    hooks.read = &read;
    ::traceml::detail::set_profiler_hooks(hooks);
  }
};

std::vector<std::string> g_lines;
void keep_line(const std::string& line) {
  g_lines.push_back(line);
}

TEST_F(FakeCuptiSource, AProfileCaptureLendsCuptiForItsStepsOnly) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  g_lender = stage.duty_cycle();
  FakeProfiler::install();
  const CuptiBufferCompleted ours = FakeCupti::completed;
  timing::WallMapping wall;
  runtime::ProfileCapture capture(runtime::ProfileRange{3, 4}, 0, wall, nullptr, &lender);
  std::vector<std::pair<std::int64_t, std::int64_t>> steps;
  for (std::int64_t s = 1; s <= 6; ++s) {
    capture.at_step_begin(s);
    steps.push_back(fake_step(stage, s));
    capture.at_step_end(s);
  }
  ::traceml::detail::set_profiler_hooks({});
  g_lender = nullptr;
  EXPECT_EQ(FakeProfiler::our_kinds_at_start, 0u) << "traceml's kinds were still on";
  EXPECT_EQ(FakeCupti::completed, ours);
  EXPECT_EQ(FakeCupti::enabled.size(), 5u);
  stage.collect(false);
  const std::vector<bool> recorded = {true, true, false, false, true, true};
  for (std::size_t i = 0; i < steps.size(); ++i)
    EXPECT_EQ(stage.records_step(steps[i].first, steps[i].second), recorded[i]) << "step " << i + 1;
  model::ProfileChunk chunk;
  ASSERT_TRUE(capture.next_chunk(chunk));
  EXPECT_EQ(chunk.first_step, 3);
  EXPECT_EQ(chunk.last_step, 4);
  EXPECT_TRUE(chunk.error.empty()) << chunk.error;
}

// A profiler that did not stop may still hold CUPTI: traceml stays lent
// (its callbacks would get the profiler's buffers), and says so in a line.
TEST_F(FakeCuptiSource, AProfilerThatDidNotStopKeepsCupti) {
  runtime::CuptiStage stage(FakeCupti::api(true));
  ASSERT_EQ(stage.start_source(), std::nullopt);
  g_lender = stage.duty_cycle();
  FakeProfiler::install();
  FakeProfiler::stop_fails = true;
  g_lines.clear();
  timing::WallMapping wall;
  runtime::ProfileCapture capture(runtime::ProfileRange{2, 2}, 0, wall, &keep_line, &lender);
  for (std::int64_t s = 1; s <= 3; ++s) {
    capture.at_step_begin(s);
    (void)fake_step(stage, s);
    capture.at_step_end(s);
  }
  FakeProfiler::stop_fails = false;
  ::traceml::detail::set_profiler_hooks({});
  g_lender = nullptr;
  EXPECT_EQ(FakeCupti::requested, &Kineto::requested);
  EXPECT_EQ(FakeCupti::enabled.size(), 3u);  // Kineto's, untouched
  EXPECT_TRUE(stage.source().lent());
  // CUPTI's line, and the failed profile's.
  ASSERT_EQ(g_lines.size(), 2u) << ::testing::PrintToString(g_lines);
  EXPECT_NE(g_lines[0].find("traceml's CUPTI records did not come back after LibTorch's profiler "
                            "(steps 2 to 2, which did not stop)"),
            std::string::npos)
      << g_lines[0];
  EXPECT_NE(g_lines[1].find("LibTorch's profiler did not stop"), std::string::npos);
  Kineto::stop();
}

#endif  // TRACEML_HAVE_CUPTI

}  // namespace
}  // namespace traceml::timing
