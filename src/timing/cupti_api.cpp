#include "timing/cupti_api.hpp"
#include "timing/dynamic_library.hpp"

namespace traceml::timing {
namespace {

CuptiApiLoad load(const std::vector<std::string>& library_names) {
  CuptiApiLoad out;
  // A CUPTI already in the process first: a second, other CUPTI next to the
  // one LibTorch loaded would trace with its own state and versions.
  auto lib = DynamicLibrary::open_first(
      "libcupti", library_names, {RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, RTLD_NOW | RTLD_LOCAL});
  out.library = lib.name();
  CuptiApi api;
  lib.require("cuptiActivityEnable", api.activity_enable);
  lib.require("cuptiActivityDisable", api.activity_disable);
  lib.require("cuptiActivityRegisterCallbacks", api.activity_register_callbacks);
  lib.require("cuptiActivityGetNextRecord", api.activity_get_next_record);
  lib.require("cuptiActivityFlushAll", api.activity_flush_all);
  lib.require("cuptiActivityGetNumDroppedRecords", api.activity_get_num_dropped_records);
  lib.require("cuptiGetTimestamp", api.get_timestamp);
  lib.require("cuptiGetResultString", api.get_result_string);
  if (!lib.complete()) {
    out.reason = lib.reason();
    return out;
  }
  lib.resolve("cuptiActivityRegisterTimestampCallback", api.activity_register_timestamp_callback);
  lib.resolve("cuptiFinalize", api.finalize);
  lib.resolve("cuptiActivitySetAttribute", api.activity_set_attribute);
  lib.resolve("cuptiGetVersion", api.get_version);
  lib.resolve("cuptiActivityEnableRuntimeApi", api.activity_enable_runtime_api);
  lib.resolve("cuptiActivityEnableDriverApi", api.activity_enable_driver_api);
  lib.resolve("cuptiGetCallbackName", api.get_callback_name);
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
  try {
    return load(library_names);
  } catch (...) {  // only allocation can throw here; a short reason fits in place
    CuptiApiLoad out;
    out.reason = "out of memory";
    return out;
  }
}

std::string describe_cupti_result(const CuptiApi& api, int result) {
  std::string out = std::to_string(result);
  const char* text = nullptr;
  if (api.get_result_string != nullptr && api.get_result_string(result, &text) != kCuptiSuccess)
    text = nullptr;
  if (text != nullptr && *text != '\0') {
    out += " (";
    out += text;
    out += ")";
  }
  return out;
}

}  // namespace traceml::timing
