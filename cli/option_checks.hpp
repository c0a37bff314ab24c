// The checks of the commands' options, shared so that every command says a
// bad value the same way: "--flag must be in [lo, hi] unit (got v)" for a
// number, "--flag <why> (got 'v')" for a name (model/env_values.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "model/env_values.hpp"

namespace traceml::cli {

/// A number as an option's message shows it (up to 12 significant digits).
inline std::string number_text(double v) {
  return fmt::format("{:.12g}", v);
}

/// "--flag must be in [lo, hi] unit (got v)" when v is outside or not a number.
inline std::optional<std::string> out_of_range(const char* flag, double v, double lo, double hi,
                                               const char* unit = "") {
  if (v >= lo && v <= hi) return std::nullopt;  // false for NaN
  return std::string(flag) + " must be in [" + number_text(lo) + ", " + number_text(hi) + "]" +
         unit + " (got " + number_text(v) + ")";
}

/// "invalid mode 'm' ..." unless `mode` is one that run and serve take.
inline std::optional<std::string> bad_mode(const std::string& mode) {
  if (mode == "summary" || mode == "live" || mode == "cli") return std::nullopt;
  return "invalid mode '" + model::quote_value(mode) +
         "' (use summary or live; cli is another name for live)";
}

/// "--flag <why> (got 'v')" when `value`, given, breaks `rule` (one of
/// model/env_values.hpp's); std::nullopt for an empty value (not given).
inline std::optional<std::string> bad_name(const char* flag, const std::string& value,
                                           std::optional<std::string> (*rule)(std::string_view)) {
  if (value.empty()) return std::nullopt;
  const auto why = rule(value);
  if (!why) return std::nullopt;
  return std::string(flag) + " " + *why + " (got '" + model::quote_value(value) + "')";
}

}  // namespace traceml::cli
