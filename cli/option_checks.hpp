// The checks of the commands' options, shared so that every command says a
// bad value the same way: "--flag must be in [lo, hi] unit (got v)" for a
// number, "--flag <why> (got 'v')" for a name (model/env_values.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

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

/// CLI11's check for a percentage limit, said in words: "must be a
/// percentage of 0 or more, e.g. 5 for 5% (got -5)" (CLI11's own range check
/// prints the largest double in 309 digits).
inline CLI::Validator percentage_limit() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        double v = 0.0;
        try {
          std::size_t used = 0;
          v = std::stod(value, &used);
          if (used != value.size()) throw std::invalid_argument(value);
        } catch (const std::exception&) {
          return "must be a number of percent, e.g. 5 for 5% (got '" + model::quote_value(value) +
                 "')";
        }
        if (!(v >= 0.0) || v > 1e6)
          return "must be a percentage from 0 to 1,000,000, e.g. 5 for 5% (got " +
                 model::quote_value(value) + ")";
        return std::string();
      },
      "PCT");
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
