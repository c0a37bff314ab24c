#include "timing/cupti_api.hpp"
#include "timing/dynamic_library.hpp"

namespace traceml::timing {
namespace {

using A = CuptiApi;

constexpr auto kEntryPoints = std::make_tuple(
    required_entry("cuptiActivityEnable", &A::activity_enable),
    required_entry("cuptiActivityDisable", &A::activity_disable),
    required_entry("cuptiActivityRegisterCallbacks", &A::activity_register_callbacks),
    required_entry("cuptiActivityGetNextRecord", &A::activity_get_next_record),
    required_entry("cuptiActivityFlushAll", &A::activity_flush_all),
    required_entry("cuptiActivityGetNumDroppedRecords", &A::activity_get_num_dropped_records),
    required_entry("cuptiGetTimestamp", &A::get_timestamp),
    required_entry("cuptiGetResultString", &A::get_result_string),
    optional_entry("cuptiActivityRegisterTimestampCallback",
                   &A::activity_register_timestamp_callback),
    optional_entry("cuptiFinalize", &A::finalize),
    optional_entry("cuptiActivitySetAttribute", &A::activity_set_attribute),
    optional_entry("cuptiGetVersion", &A::get_version),
    optional_entry("cuptiActivityEnableRuntimeApi", &A::activity_enable_runtime_api),
    optional_entry("cuptiActivityEnableDriverApi", &A::activity_enable_driver_api),
    optional_entry("cuptiGetCallbackName", &A::get_callback_name));

CuptiApiLoad load(const std::vector<std::string>& library_names) {
  CuptiApiLoad out;
  CuptiApi api;
  // A CUPTI already in the process first: a second, other CUPTI next to the
  // one LibTorch loaded would trace with its own state and versions.
  auto lib = open_api(out, api, "libcupti", library_names, kEntryPoints,
                      {RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, RTLD_NOW | RTLD_LOCAL});
  if (!lib.complete()) return out;
  // Kept: CUPTI holds our buffer callbacks for the life of the process.
  lib.keep();
  out.api = api;
  return out;
}

}  // namespace

std::vector<std::string> default_cupti_names() {
  return {"libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8", "libcupti.so"};
}

CuptiApiLoad load_cupti_api(const std::vector<std::string>& library_names) {
  return load_or_out_of_memory<CuptiApiLoad>([&] { return load(library_names); });
}

std::string describe_cupti_result(const CuptiApi& api, int result) {
  const char* text = nullptr;
  if (api.get_result_string != nullptr && api.get_result_string(result, &text) != kCuptiSuccess)
    text = nullptr;
  return describe_code(result, text);
}

}  // namespace traceml::timing
