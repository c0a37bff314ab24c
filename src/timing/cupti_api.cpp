#include "timing/cupti_api.hpp"
#include "timing/dynamic_library.hpp"

#include <dlfcn.h>

#include <cstring>

namespace traceml::timing {
namespace {

CuptiApiLoad load(const std::vector<std::string>& library_names) {
  CuptiApiLoad out;
  void* handle = nullptr;
  // A CUPTI already in the process first: a second, other CUPTI next to the
  // one LibTorch loaded would trace with its own state and versions.
  for (int flags : {RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, RTLD_NOW | RTLD_LOCAL}) {
    for (const auto& name : library_names) {
      handle = dlopen(name.c_str(), flags);
      if (handle != nullptr) {
        out.library = name;
        break;
      }
    }
    if (handle != nullptr) break;
  }
  if (handle == nullptr) {
    out.reason = "libcupti not found (tried " + join_names(library_names) + ")";
    return out;
  }
  // Never closed: CUPTI holds our buffer callbacks for the life of the process.
  CuptiApi api;
  const char* missing = nullptr;
  auto need = [&](const char* name, auto& fn) {
    if (missing == nullptr && !resolve_symbol(handle, name, fn)) missing = name;
  };
  need("cuptiActivityEnable", api.activity_enable);
  need("cuptiActivityDisable", api.activity_disable);
  need("cuptiActivityRegisterCallbacks", api.activity_register_callbacks);
  need("cuptiActivityGetNextRecord", api.activity_get_next_record);
  need("cuptiActivityFlushAll", api.activity_flush_all);
  need("cuptiActivityGetNumDroppedRecords", api.activity_get_num_dropped_records);
  need("cuptiGetTimestamp", api.get_timestamp);
  need("cuptiGetResultString", api.get_result_string);
  if (missing != nullptr) {
    out.reason = out.library + " has no " + missing;
    return out;
  }
  resolve_symbol(handle, "cuptiActivityRegisterTimestampCallback",
                 api.activity_register_timestamp_callback);
  resolve_symbol(handle, "cuptiFinalize", api.finalize);
  resolve_symbol(handle, "cuptiActivitySetAttribute", api.activity_set_attribute);
  resolve_symbol(handle, "cuptiGetVersion", api.get_version);
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
