// What the run-time loaders of CUDA, CUPTI and NVML share: resolving an entry
// point of a dlopen'ed library into a typed function pointer, and naming the
// libraries tried in a one-line reason.
#pragma once

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

namespace traceml::timing {

/// Resolves `name` into `fn`. dlsym gives an object pointer; copying its bytes
/// into the function pointer is what POSIX guarantees to work, and keeps
/// -Wpedantic quiet about the cast.
template <class Fn>
bool resolve_symbol(void* handle, const char* name, Fn& fn) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) return false;
  static_assert(sizeof(Fn) == sizeof(void*), "function and object pointers differ in size");
  std::memcpy(&fn, &sym, sizeof fn);
  return true;
}

/// "a, b, c": the library names tried, for a reason line.
inline std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace traceml::timing
