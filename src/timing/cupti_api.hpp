// The CUPTI activity entry points that GPU activity capture needs, as plain
// function pointers found at run time (dlopen), so that one build runs with
// and without CUPTI and no CUPTI header reaches our headers. Tests fill the
// same struct with fakes (tests/timing/cupti_record_test.cpp), as libkineto
// does. Same shape as timing/cuda_api.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace traceml::timing {

/// CUptiResult values we act on (cupti_result.h; stable across releases).
inline constexpr int kCuptiSuccess = 0;
/// cuptiActivityGetNextRecord's "no more records in this buffer".
inline constexpr int kCuptiErrorMaxLimitReached = 12;
inline constexpr int kCuptiErrorNotInitialized = 15;
inline constexpr int kCuptiErrorInsufficientPrivileges = 35;
inline constexpr int kCuptiErrorMultipleSubscribersNotSupported = 39;
inline constexpr int kCuptiErrorUnknown = 999;

/// CUpti_ActivityKind values we enable or read (cupti_activity.h; serialized
/// by CUPTI itself, never renumbered).
inline constexpr int kCuptiActivityKindMemcpy = 1;
inline constexpr int kCuptiActivityKindMemset = 2;
inline constexpr int kCuptiActivityKindDriver = 4;
inline constexpr int kCuptiActivityKindRuntime = 5;
inline constexpr int kCuptiActivityKindConcurrentKernel = 10;

/// CUpti_CallbackDomain values (cupti_callbacks.h): the CUDA driver and
/// runtime APIs, whose callback ids cuptiActivityEnableDriverApi and
/// cuptiActivityEnableRuntimeApi take.
inline constexpr int kCuptiCbDomainDriverApi = 1;
inline constexpr int kCuptiCbDomainRuntimeApi = 2;

/// CUpti_ActivityAttribute CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER: each
/// thread records into buffers of its own (a uint8_t, 0 or 1). CUDA 13's CUPTI
/// turns it on by default; records of different threads then come back in
/// unrelated buffers (runtime/cupti_stage.cpp).
inline constexpr int kCuptiActivityAttrPerThreadActivityBuffer = 9;

/// CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: cuptiActivityFlushAll also hands back
/// buffers that hold records of work still running.
inline constexpr std::uint32_t kCuptiFlushForced = 1;

/// CUpti_BuffersCallbackRequestFunc: CUPTI asks for an empty buffer.
using CuptiBufferRequested = void (*)(std::uint8_t** buffer, std::size_t* size,
                                      std::size_t* max_records);
/// CUpti_BuffersCallbackCompleteFunc: CUPTI hands back a filled buffer
/// (context: a CUcontext, always null since CUDA 6).
using CuptiBufferCompleted = void (*)(void* context, std::uint32_t stream_id, std::uint8_t* buffer,
                                      std::size_t size, std::size_t valid_size);
/// CUpti_TimestampCallbackFunc: the time CUPTI stamps records with, in ns.
using CuptiTimestampSource = std::uint64_t (*)();

/// CUPTI functions with their C ABI: CUptiResult and CUpti_ActivityKind are
/// ints, a CUpti_Activity* is a void*. Pointers marked optional may be null in
/// a CuptiApi that load_cupti_api() returns; all others are set.
struct CuptiApi {
  int (*activity_enable)(int kind) = nullptr;
  int (*activity_disable)(int kind) = nullptr;
  int (*activity_register_callbacks)(CuptiBufferRequested requested,
                                     CuptiBufferCompleted completed) = nullptr;
  int (*activity_get_next_record)(std::uint8_t* buffer, std::size_t valid_size,
                                  void** record) = nullptr;
  int (*activity_flush_all)(std::uint32_t flag) = nullptr;
  int (*activity_get_num_dropped_records)(void* context, std::uint32_t stream_id,
                                          std::size_t* dropped) = nullptr;
  int (*get_timestamp)(std::uint64_t* timestamp) = nullptr;
  int (*get_result_string)(int result, const char** text) = nullptr;
  /// Optional: cuptiActivityRegisterTimestampCallback, absent in older CUPTI.
  int (*activity_register_timestamp_callback)(CuptiTimestampSource source) = nullptr;
  /// Optional: cuptiFinalize.
  int (*finalize)() = nullptr;
  /// Optional: cuptiActivitySetAttribute(attr, &value_size, &value).
  int (*activity_set_attribute)(int attr, std::size_t* value_size, void* value) = nullptr;
  /// Optional: cuptiGetVersion, the CUPTI API version of the loaded library.
  int (*get_version)(std::uint32_t* version) = nullptr;
  /// Optional (CUDA 12.x and later): records of one runtime or driver API
  /// only, by its callback id; with cuptiGetCallbackName (any CUPTI since 11)
  /// they let us record the launching calls alone instead of every API call.
  int (*activity_enable_runtime_api)(std::uint32_t cbid, std::uint8_t enable) = nullptr;
  int (*activity_enable_driver_api)(std::uint32_t cbid, std::uint8_t enable) = nullptr;
  int (*get_callback_name)(int domain, std::uint32_t cbid, const char** name) = nullptr;
};

/// What looking for CUPTI found: the api, otherwise one line saying why not.
/// Finding it says nothing about a driver or a GPU: calls fail without them,
/// and CuptiActivitySource::start() says so.
struct CuptiApiLoad {
  std::optional<CuptiApi> api;
  std::string reason;   ///< empty when api is set
  std::string library;  ///< the library that was opened (empty if none)
};

/// The CUPTI libraries tried in order: the sonames of CUDA 13, 12 and 11.8,
/// then the unversioned development link.
std::vector<std::string> default_cupti_names();

/// Opens a CUPTI library and resolves the entry points. A library of the list
/// that the process has already loaded (LibTorch with CUDA links the CUPTI of
/// its CUDA) is preferred over the first one that would load, so that one
/// process never holds two CUPTIs. A name with a slash is a path. The library
/// stays loaded for the life of the process: CUPTI keeps our callbacks.
/// Never throws.
CuptiApiLoad load_cupti_api(const std::vector<std::string>& library_names);
inline CuptiApiLoad load_cupti_api() {
  return load_cupti_api(default_cupti_names());
}

/// "999 (CUPTI_ERROR_UNKNOWN)": the result's number and, when the api has
/// cuptiGetResultString, its name.
std::string describe_cupti_result(const CuptiApi& api, int result);

}  // namespace traceml::timing
