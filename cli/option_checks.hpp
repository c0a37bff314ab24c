// The range checks of the commands' numeric options, shared so that every
// command says a bad number the same way: "--flag must be in [lo, hi] unit
// (got v)".
#pragma once

#include <cstdio>
#include <optional>
#include <string>

namespace traceml::cli {

/// A number as an option's message shows it (up to 12 significant digits).
inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

/// "--flag must be in [lo, hi] unit (got v)" when v is outside or not a number.
inline std::optional<std::string> out_of_range(const char* flag, double v, double lo, double hi,
                                               const char* unit = "") {
  if (v >= lo && v <= hi) return std::nullopt;  // false for NaN
  return std::string(flag) + " must be in [" + number_text(lo) + ", " + number_text(hi) + "]" +
         unit + " (got " + number_text(v) + ")";
}

}  // namespace traceml::cli
