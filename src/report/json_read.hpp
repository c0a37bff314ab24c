// Defensive reads of a summary or compare JSON: a missing key, a null or a
// value of the wrong type is "absent", never an exception. The renderers and
// compare read untrusted files (TraceML's, older ours, hand-edited) with these,
// and only with these, so that "absent" means one thing everywhere:
// - a number is finite: NaN and ±inf (which an in-memory result can hold and
//   a file cannot) are absent;
// - a text has something besides white space, and comes back trimmed: "",
//   "  " and a missing key are alike.
#pragma once

#include <cmath>
#include <initializer_list>
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

/// The member `key` when it is an array, or nullptr.
inline const Json* array_child(const Json* j, const char* key) {
  const Json* c = child(j, key);
  return c != nullptr && c->is_array() ? c : nullptr;
}

/// The value under nested object keys ({"global", "average"}), or nullptr
/// when any step is missing.
inline const Json* path(const Json* j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    j = child(j, k);
    if (j == nullptr) return nullptr;
  }
  return j;
}

/// A finite number, or nothing.
inline std::optional<double> number(const Json* j) {
  if (j == nullptr || !j->is_number()) return std::nullopt;
  const double v = j->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

/// An integral number (1 and 1.0 alike), or nothing.
inline std::optional<long long> integer(const Json* j) {
  if (j == nullptr) return std::nullopt;
  if (j->is_number_integer()) return j->get<long long>();
  const auto v = number(j);
  if (!v || *v != std::floor(*v) || std::fabs(*v) > 9e15) return std::nullopt;
  return static_cast<long long>(*v);
}

/// `s` without the white space around it.
inline std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

/// A string with something besides white space, trimmed; or nothing.
inline std::optional<std::string> text(const Json* j) {
  if (j == nullptr || !j->is_string()) return std::nullopt;
  std::string s = trimmed(j->get_ref<const std::string&>());
  if (s.empty()) return std::nullopt;
  return s;
}

/// text(j), or `fallback` when it is absent.
inline std::string text_or(const Json* j, const std::string& fallback = {}) {
  return text(j).value_or(fallback);
}

/// A summary's schema_version as text: "1.7", "1", a string as stored, or
/// "n/a" when absent.
inline std::string schema_version_text(const Json* summary) {
  const Json* v = child(summary, "schema_version");
  if (v == nullptr || v->is_null()) return "n/a";
  if (v->is_string()) return v->get<std::string>();
  return v->dump(-1, ' ', false, Json::error_handler_t::replace);
}

/// A boolean, or nothing (never a conversion from a number or a string).
inline std::optional<bool> flag(const Json* j) {
  if (j == nullptr || !j->is_boolean()) return std::nullopt;
  return j->get<bool>();
}

/// A value as JSON: the number, or null (a non-finite number too, as a file
/// would hold it: the result in memory reads as the file does).
inline Json opt_json(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? Json(*v) : Json(nullptr);
}

inline Json opt_json(const std::optional<std::string>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace traceml::report::json_read
