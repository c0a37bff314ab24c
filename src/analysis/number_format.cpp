#include "analysis/number_format.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace traceml::analysis {

std::string fixed(double x, int digits) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

double py_round(double x, int digits) {
  if (!std::isfinite(x)) return x;
  return std::strtod(fixed(x, digits).c_str(), nullptr);
}

long long round_half_even(double x) {
  return static_cast<long long>(std::nearbyint(x));
}

std::string percent_text(double fraction) {
  if (!std::isfinite(fraction) || fraction < 0) fraction = 0.0;
  return fixed(fraction * 100.0, 1) + "%";
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
  return (bytes < 0 ? "-" : "") + fixed(v, digits) + " " + kUnits[unit];
}

}  // namespace traceml::analysis
