#include "timing/cupti_api.hpp"

#include <dlfcn.h>

#include <cstring>

namespace traceml::timing {
namespace {

/// Resolves `name` into `fn`. dlsym gives an object pointer; copying its bytes
/// into the function pointer is what POSIX guarantees to work, and keeps
/// -Wpedantic quiet about the cast.
template <class Fn>
bool resolve(void* handle, const char* name, Fn& fn) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) return false;
  static_assert(sizeof(Fn) == sizeof(void*), "function and object pointers differ in size");
  std::memcpy(&fn, &sym, sizeof fn);
  return true;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

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
    out.reason = "libcupti not found (tried " + join(library_names) + ")";
    return out;
  }
  // Never closed: CUPTI holds our buffer callbacks for the life of the process.
  CuptiApi api;
  const char* missing = nullptr;
  auto need = [&](const char* name, auto& fn) {
    if (missing == nullptr && !resolve(handle, name, fn)) missing = name;
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
  resolve(handle, "cuptiActivityRegisterTimestampCallback",
          api.activity_register_timestamp_callback);
  resolve(handle, "cuptiFinalize", api.finalize);
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
