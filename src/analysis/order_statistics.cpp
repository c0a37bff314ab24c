#include "analysis/order_statistics.hpp"

#include <algorithm>
#include <cmath>

namespace traceml::analysis {

double select_median(std::vector<double>::iterator v, std::size_t count, std::size_t first,
                     std::size_t total) {
  // nth_element leaves the upper middle in place with only smaller-or-equal
  // values before it, whose maximum is the lower middle: the values a full
  // sort gives, without the sort.
  const auto at = v + static_cast<std::ptrdiff_t>(total / 2 - first);
  std::nth_element(v, at, v + static_cast<std::ptrdiff_t>(count));
  if (total % 2) return *at;
  return (*std::max_element(v, at) + *at) / 2.0;
}

double median_in_place(std::vector<double>& v) {
  return select_median(v.begin(), v.size(), 0, v.size());
}

double median_of(std::vector<double> v) {
  return median_in_place(v);
}

double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  const double pos = std::clamp(q, 0.0, 1.0) * double(sorted.size() - 1);
  const auto lo = std::size_t(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double f = pos - double(lo);
  // An order statistic itself, exactly: with an infinite neighbour (a sum
  // of values near the largest double) the interpolation is inf * 0, NaN.
  // (+ 0.0: a -0 comes out as the interpolation gives it, +0.)
  if (f == 0.0 || sorted[hi] == sorted[lo]) return sorted[lo] + 0.0;
  const double gap = sorted[hi] - sorted[lo];
  // Ends of both signs near the largest double: their difference overflows.
  if (!std::isfinite(gap)) return sorted[lo] * (1.0 - f) + sorted[hi] * f;
  return sorted[lo] + gap * f;
}

}  // namespace traceml::analysis
