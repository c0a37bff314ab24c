// Reading CUPTI's activity records into API launches and GPU activities
// (cupti_activity_source.hpp's parse_activity_record and is_launching_api):
// split from cupti_activity_source.cpp, which lends CUPTI its buffers and
// switches its records on and off.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "timing/cupti_activity_source.hpp"

#if TRACEML_HAVE_CUPTI
#include <cupti_activity.h>
#endif

namespace traceml::timing {

#if TRACEML_HAVE_CUPTI
namespace {

/// A field of a record, copied out: records sit in a byte buffer and we read
/// the oldest layout of each (its leading fields are those of every version).
template <class T>
T read_at(const void* record, std::size_t offset) noexcept {
  T value;
  std::memcpy(&value, static_cast<const unsigned char*>(record) + offset, sizeof value);
  return value;
}
#define TRACEML_CUPTI_FIELD(Struct, member) \
  read_at<decltype(Struct::member)>(record, offsetof(Struct, member))

CopyKind copy_kind_of(std::uint8_t kind) noexcept {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return CopyKind::HostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return CopyKind::DeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return CopyKind::DeviceToDevice;
    default:
      return CopyKind::Other;
  }
}

/// Start and end of GPU work: usable when both were collected and in order.
bool timed(std::uint64_t start, std::uint64_t end) noexcept {
  return start != 0 && end >= start;
}

}  // namespace
#endif

bool is_launching_api(std::string_view name) noexcept {
  if (name.find("HostFunc") != std::string_view::npos) return false;  // CPU work
  static constexpr std::string_view kPrefixes[] = {
      "cudaLaunch", "cudaGraphLaunch", "cudaMemcpy", "cudaMemset",
      "cuLaunch",   "cuGraphLaunch",   "cuMemcpy",   "cuMemset",
  };
  for (const std::string_view prefix : kPrefixes) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

#if TRACEML_HAVE_CUPTI
RecordUse parse_activity_record(const void* record, const TimestampMap& map,
                                std::vector<ApiLaunch>& launches,
                                std::vector<GpuActivity>& activities) {
  switch (TRACEML_CUPTI_FIELD(CUpti_Activity, kind)) {
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      using R = CUpti_ActivityAPI;
      const std::uint64_t start = TRACEML_CUPTI_FIELD(R, start);
      if (start == 0) return RecordUse::Untimed;
      launches.push_back({TRACEML_CUPTI_FIELD(R, correlationId), map.to_cpu_ns(start)});
      return RecordUse::Launch;
    }
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      using K = CUpti_ActivityKernel4;  // the layout of Kernel4..Kernel10 up to `name`
      const std::uint64_t start = TRACEML_CUPTI_FIELD(K, start);
      const std::uint64_t end = TRACEML_CUPTI_FIELD(K, end);
      if (!timed(start, end)) return RecordUse::Untimed;
      GpuActivity a;
      a.kind = ActivityKind::Kernel;
      a.correlation_id = TRACEML_CUPTI_FIELD(K, correlationId);
      a.start_ns = map.to_cpu_ns(start);
      a.end_ns = map.to_cpu_ns(end);
      // CUPTI owns the name and keeps it for the life of the kernel's module.
      const char* name = TRACEML_CUPTI_FIELD(K, name);
      a.collective = name != nullptr && is_collective_kernel(name);
      activities.push_back(a);
      return RecordUse::Activity;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      using M = CUpti_ActivityMemcpy;  // the layout of every version up to correlationId
      const std::uint64_t start = TRACEML_CUPTI_FIELD(M, start);
      const std::uint64_t end = TRACEML_CUPTI_FIELD(M, end);
      if (!timed(start, end)) return RecordUse::Untimed;
      GpuActivity a;
      a.kind = ActivityKind::Memcpy;
      // The id of the API call that launched the copy, as for kernels (the
      // runtimeCorrelationId beside it is a legacy of CUDA 5).
      a.correlation_id = TRACEML_CUPTI_FIELD(M, correlationId);
      a.start_ns = map.to_cpu_ns(start);
      a.end_ns = map.to_cpu_ns(end);
      a.copy_kind = copy_kind_of(TRACEML_CUPTI_FIELD(M, copyKind));
      a.from_pageable = TRACEML_CUPTI_FIELD(M, srcKind) == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
      a.bytes = TRACEML_CUPTI_FIELD(M, bytes);
      activities.push_back(a);
      return RecordUse::Activity;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      using S = CUpti_ActivityMemset;  // the layout of every version up to correlationId
      const std::uint64_t start = TRACEML_CUPTI_FIELD(S, start);
      const std::uint64_t end = TRACEML_CUPTI_FIELD(S, end);
      if (!timed(start, end)) return RecordUse::Untimed;
      GpuActivity a;
      a.kind = ActivityKind::Memset;
      a.correlation_id = TRACEML_CUPTI_FIELD(S, correlationId);
      a.start_ns = map.to_cpu_ns(start);
      a.end_ns = map.to_cpu_ns(end);
      a.bytes = TRACEML_CUPTI_FIELD(S, bytes);
      activities.push_back(a);
      return RecordUse::Activity;
    }
    default:
      return RecordUse::Ignored;
  }
}
#undef TRACEML_CUPTI_FIELD
#else
RecordUse parse_activity_record(const void*, const TimestampMap&, std::vector<ApiLaunch>&,
                                std::vector<GpuActivity>&) {
  return RecordUse::Ignored;
}
#endif

}  // namespace traceml::timing
