// What the run-time loaders of CUDA, CUPTI and NVML share: finding the first
// of several library names that dlopen accepts, resolving its entry points
// into typed function pointers, and naming what was tried or missing in a
// one-line reason.
#pragma once

#include <dlfcn.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace traceml::timing {

/// A dlopen'ed library. It closes its handle when destroyed unless keep() was
/// called: a loader keeps the library once it hands out entry points, because
/// the objects made through them (CUDA events, CUPTI callbacks, an initialised
/// NVML) and other users of the same library (LibTorch) outlive any point
/// where closing would be safe. A library refused for a missing entry point
/// is closed again.
class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  DynamicLibrary(DynamicLibrary&& other) noexcept { *this = std::move(other); }
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  ~DynamicLibrary() { close(); }

  /// Opens the first of `names` that dlopen accepts. Each entry of
  /// `flag_passes` is one pass over all the names, in order (CUPTI first looks
  /// for a copy already in the process with RTLD_NOLOAD). When none opens,
  /// reason() is "<what> not found (tried a, b, c)".
  static DynamicLibrary open_first(const char* what, const std::vector<std::string>& names,
                                   std::initializer_list<int> flag_passes = {RTLD_NOW |
                                                                             RTLD_LOCAL});

  bool is_open() const { return handle_ != nullptr; }
  /// The name that opened, as given to open_first.
  const std::string& name() const { return name_; }

  /// Resolves a required entry point. The first one missing is remembered
  /// (later calls then do nothing), so a loader lists its needs and asks
  /// reason() once at the end.
  template <class Fn>
  void require(const char* symbol, Fn& fn) {
    if (missing_ == nullptr && !resolve(symbol, fn)) missing_ = symbol;
  }
  /// Whether every require() so far found its entry point.
  bool complete() const { return is_open() && missing_ == nullptr; }

  /// Resolves an optional entry point; false (and `fn` untouched) when absent.
  /// dlsym gives an object pointer; copying its bytes into the function
  /// pointer is what POSIX guarantees to work, and keeps -Wpedantic quiet.
  template <class Fn>
  bool resolve(const char* symbol, Fn& fn) const {
    void* sym = find(symbol);
    if (sym == nullptr) return false;
    static_assert(sizeof(Fn) == sizeof(void*), "function and object pointers differ in size");
    std::memcpy(&fn, &sym, sizeof fn);
    return true;
  }

  /// Why the library cannot be used: none of the names opened ("<what> not
  /// found (tried …)"), or a required entry point is missing ("<name> has no
  /// <symbol>"); empty when it is complete.
  std::string reason() const;

  /// Never close this library (see the class comment).
  void keep() { kept_ = true; }

 private:
  void* find(const char* symbol) const;
  void close();

  void* handle_ = nullptr;
  bool kept_ = false;
  std::string name_;
  std::string reason_;
  const char* missing_ = nullptr;
};

}  // namespace traceml::timing
