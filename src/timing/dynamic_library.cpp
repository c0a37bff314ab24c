#include "timing/dynamic_library.hpp"

#include <utility>

namespace traceml::timing {
namespace {

/// "a, b, c": the library names tried, for a reason line.
std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    close();
    handle_ = std::exchange(other.handle_, nullptr);
    kept_ = other.kept_;
    name_ = std::move(other.name_);
    reason_ = std::move(other.reason_);
    missing_ = std::exchange(other.missing_, nullptr);
  }
  return *this;
}

DynamicLibrary DynamicLibrary::open_first(const char* what, const std::vector<std::string>& names,
                                          std::initializer_list<int> flag_passes) {
  DynamicLibrary lib;
  for (const int flags : flag_passes) {
    for (const auto& name : names) {
      lib.handle_ = dlopen(name.c_str(), flags);
      if (lib.handle_ != nullptr) {
        lib.name_ = name;
        return lib;
      }
    }
  }
  lib.reason_ = std::string(what) + " not found (tried " + join(names) + ")";
  return lib;
}

std::string DynamicLibrary::reason() const {
  if (handle_ == nullptr) return reason_;
  if (missing_ != nullptr) return name_ + " has no " + missing_;
  return {};
}

void* DynamicLibrary::find(const char* symbol) const {
  return handle_ != nullptr ? dlsym(handle_, symbol) : nullptr;
}

void DynamicLibrary::close() {
  if (handle_ != nullptr && !kept_) dlclose(handle_);
  handle_ = nullptr;
}

std::string describe_code(int code, const char* text) {
  std::string out = std::to_string(code);
  if (text != nullptr && *text != '\0') {
    out += " (";
    out += text;
    out += ")";
  }
  return out;
}

}  // namespace traceml::timing
