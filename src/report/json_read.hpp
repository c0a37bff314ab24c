// Defensive reads of a summary or compare JSON: a missing key, a null or a
// value of the wrong type is "absent", never an exception. The renderers and
// compare read untrusted files (TraceML's, older ours, hand-edited) with these.
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace traceml::report::json_read {

using Json = nlohmann::ordered_json;

/// The member `key` of an object, or nullptr.
inline const Json* child(const Json* j, const char* key) {
  if (j == nullptr || !j->is_object()) return nullptr;
  const auto it = j->find(key);
  return it == j->end() ? nullptr : &*it;
}

/// The member `key` when it is an object, or nullptr.
inline const Json* object_child(const Json* j, const char* key) {
  const Json* c = child(j, key);
  return c != nullptr && c->is_object() ? c : nullptr;
}

/// A finite number, or nothing.
inline std::optional<double> number(const Json* j) {
  if (j == nullptr || !j->is_number()) return std::nullopt;
  const double v = j->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

/// A non-empty string, or nothing.
inline std::optional<std::string> text(const Json* j) {
  if (j == nullptr || !j->is_string() || j->get_ref<const std::string&>().empty())
    return std::nullopt;
  return j->get<std::string>();
}

/// A value as JSON: the number, or null.
inline Json opt_json(const std::optional<double>& v) {
  return v ? Json(*v) : Json(nullptr);
}

inline Json opt_json(const std::optional<std::string>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace traceml::report::json_read
