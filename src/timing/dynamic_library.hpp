// What the run-time loaders of CUDA, CUPTI and NVML share: finding the first
// of several library names that dlopen accepts, resolving a table of its
// entry points into the typed function pointers of an api struct, naming
// what was tried or missing in a one-line reason, and wording a result code.
#pragma once

#include <dlfcn.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <tuple>
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

/// One row of a loader's table of entry points: the symbol, the member of the
/// api struct its function pointer goes to, and whether the library is
/// refused without it. Built with required_entry() and optional_entry().
template <class Api, class Fn>
struct EntryPoint {
  const char* symbol;
  Fn Api::*member;
  bool is_required;
};

template <class Api, class Fn>
constexpr EntryPoint<Api, Fn> required_entry(const char* symbol, Fn Api::*member) {
  return {symbol, member, true};
}
template <class Api, class Fn>
constexpr EntryPoint<Api, Fn> optional_entry(const char* symbol, Fn Api::*member) {
  return {symbol, member, false};
}

/// Resolves a table (a std::tuple of EntryPoint) into `api`: every required
/// entry point in table order, then, when none is missing, the optional ones.
/// Returns lib.complete().
template <class Api, class Table>
bool resolve_entry_points(DynamicLibrary& lib, const Table& table, Api& api) {
  std::apply(
      [&](const auto&... e) {
        ((e.is_required ? lib.require(e.symbol, api.*e.member) : void()), ...);
      },
      table);
  if (!lib.complete()) return false;
  std::apply(
      [&](const auto&... e) { ((e.is_required || lib.resolve(e.symbol, api.*e.member)), ...); },
      table);
  return true;
}

/// The symbols of the optional entry points of `table` that `api` lacks (a
/// null member), in table order.
template <class Api, class Table>
std::vector<std::string> absent_entry_points(const Table& table, const Api& api) {
  std::vector<std::string> out;
  std::apply(
      [&](const auto&... e) {
        ((e.is_required || api.*e.member != nullptr ? void() : void(out.emplace_back(e.symbol))),
         ...);
      },
      table);
  return out;
}

/// What every loader does first: opens the first of `names` that loads
/// (see DynamicLibrary::open_first), names it in `out.library` and resolves
/// `table` into `api`. When the library is missing or incomplete,
/// `out.reason` says why and the library returned is not complete().
template <class Load, class Api, class Table>
DynamicLibrary open_api(Load& out, Api& api, const char* what,
                        const std::vector<std::string>& names, const Table& table,
                        std::initializer_list<int> flag_passes = {RTLD_NOW | RTLD_LOCAL}) {
  auto lib = DynamicLibrary::open_first(what, names, flag_passes);
  out.library = lib.name();
  if (!resolve_entry_points(lib, table, api)) out.reason = lib.reason();
  return lib;
}

/// A loader that never throws: `load()`'s result, or, when it throws (only
/// allocation can), a Load whose reason is "out of memory" (short enough to
/// need no allocation).
template <class Load, class Loader>
Load load_or_out_of_memory(Loader&& load) {
  try {
    return load();
  } catch (...) {
    Load out;
    out.reason = "out of memory";
    return out;
  }
}

/// "999 (CUPTI_ERROR_UNKNOWN)": a library's result code and, when the library
/// gave one (non-null, non-empty), its text.
std::string describe_code(int code, const char* text);

}  // namespace traceml::timing
