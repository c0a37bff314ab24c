#include "analysis/number_format.hpp"

#include <charconv>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace traceml::analysis {

namespace {

/// printf reads a negative precision as none given, that is 6; fmt throws.
int precision(int digits) {
  return digits < 0 ? 6 : digits;
}

}  // namespace

std::string fixed(double x, int digits) {
  return fmt::format("{:.{}f}", x, precision(digits));
}

double py_round(double x, int digits) {
  if (!std::isfinite(x)) return x;
  // Parsed back with from_chars, which is locale-independent as fmt is
  // (strtod would stop at the '.' under a user's LC_NUMERIC with a comma).
  fmt::memory_buffer text;
  fmt::format_to(std::back_inserter(text), "{:.{}f}", x, precision(digits));
  double rounded = 0.0;
  std::from_chars(text.data(), text.data() + text.size(), rounded);
  return rounded;
}

long long round_half_even(double x) {
  return static_cast<long long>(std::nearbyint(x));
}

std::string percent_text(double fraction) {
  if (!std::isfinite(fraction) || fraction < 0) fraction = 0.0;
  return fmt::format("{:.1f}%", fraction * 100.0);
}

std::string format_bytes_binary(double bytes) {
  static const char* const kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  std::size_t unit = 0;
  double v = std::fabs(bytes);
  while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++unit;
  }
  const int digits = (v >= 100.0 || unit == 0) ? 0 : (v >= 10.0 ? 1 : 2);
  return fmt::format("{}{:.{}f} {}", bytes < 0 ? "-" : "", v, digits, kUnits[unit]);
}

}  // namespace traceml::analysis
