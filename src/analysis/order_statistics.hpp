// Order statistics shared by every section: the median (by selection, not a
// full sort) and a quantile of sorted values. One definition, so that Step
// Time, Step Memory, the sample sections and the distribution sketch cannot
// disagree on what "the median" of an even count is.
#pragma once

#include <cstddef>
#include <vector>

namespace traceml::analysis {

/// The statistical median of a multiset of `total` values, given `count` of
/// them at `v` (reordered) that hold the sorted positions [first, first +
/// count) of the whole, the middle ones among them: the middle value, or the
/// mean of the two middle values. A caller that knows where the middle lies
/// (Step Memory's bracketed per-step medians) selects among those few only.
double select_median(std::vector<double>::iterator v, std::size_t count, std::size_t first,
                     std::size_t total);

/// The median of `v` (non-empty), reordering it.
double median_in_place(std::vector<double>& v);

/// Arithmetic median (mean of the middle two for an even count). `v` non-empty.
double median_of(std::vector<double> v);

/// The `q`-quantile (clamped to [0, 1]) of ascending `sorted` (non-empty) by
/// linear interpolation between order statistics (numpy.percentile's default).
double quantile_of_sorted(const std::vector<double>& sorted, double q);

}  // namespace traceml::analysis
