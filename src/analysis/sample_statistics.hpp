// Window statistics of the two sample sections, System and Process (spec §4.2,
// §4.3, §5.4): a running mean/maximum over optional readings, the bounded
// ratio both sections use for every percent, the cross-row average / median /
// worst points of the payload, and the window and duration both report.
// Private to the analysis module.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "analysis/number_format.hpp"
#include "analysis/order_statistics.hpp"
#include "analysis/section.hpp"

namespace traceml::analysis {

/// Mean and maximum of the readings of one signal. An absent reading is
/// skipped, never counted as zero (SQL AVG/MAX semantics, which TraceML uses).
class MeanMax {
 public:
  void add(const std::optional<double>& v) {
    if (!v) return;
    sum_ += *v;
    ++count_;
    if (!max_ || *v > *max_) max_ = *v;
  }
  [[nodiscard]] std::optional<double> mean() const {
    if (count_ == 0) return std::nullopt;
    return sum_ / static_cast<double>(count_);
  }
  [[nodiscard]] const std::optional<double>& max() const { return max_; }

 private:
  double sum_ = 0.0;  // summed in arrival order, as Python's sum() does
  std::int64_t count_ = 0;
  std::optional<double> max_;
};

/// max(0, num / den); absent when either side is absent or den <= 0 (a total
/// of zero means the total was not measured, not that usage is infinite).
inline std::optional<double> bounded_fraction(const std::optional<double>& num,
                                              const std::optional<double>& den) {
  if (!num || !den || *den <= 0.0) return std::nullopt;
  return std::max(0.0, *num / *den);
}

/// bounded_fraction × 100, computed in the same order as TraceML (divide first).
inline std::optional<double> bounded_percent(const std::optional<double>& num,
                                             const std::optional<double>& den) {
  const auto f = bounded_fraction(num, den);
  if (!f) return std::nullopt;
  return *f * 100.0;
}

/// A sample section's window: its samples, no step alignment (spec §5.3).
inline Window sample_window(std::int64_t samples) {
  Window w;
  w.kind = "sample_window";
  w.alignment = "none";
  w.samples = samples;
  return w;
}

/// Seconds from the first sample to the last; absent when either is unknown
/// or the clock went backwards.
inline std::optional<double> sample_span(const std::optional<double>& first_ts,
                                         const std::optional<double>& last_ts) {
  if (!first_ts || !last_ts || *last_ts < *first_ts) return std::nullopt;
  return *last_ts - *first_ts;
}

/// A card's duration: "12.3s", or "n/a" when unknown.
inline std::string duration_text(const std::optional<double>& duration_s) {
  return duration_s ? fixed(*duration_s, 1) + "s" : std::string("n/a");
}

/// Which end of a metric is the "worst" row.
enum class WorseEnd : std::uint8_t { Higher, Lower };

namespace detail {

struct RowValue {
  long long number;  // the row key as a number: ties compare numerically
  const std::string* key;
  double value;
};

inline std::vector<RowValue> metric_values(const std::vector<GroupRow>& rows, std::size_t m) {
  std::vector<RowValue> out;
  for (const auto& row : rows) {
    if (m < row.metrics.size() && row.metrics[m]) {
      out.push_back({std::strtoll(row.key.c_str(), nullptr, 10), &row.key, *row.metrics[m]});
    }
  }
  return out;
}

}  // namespace detail

/// The average / median / worst of metric `m` over `rows` (spec §5.4). Nulls
/// are skipped; an all-null metric gives a null average and {null, null} points.
/// - average: arithmetic mean over rows, in row order;
/// - median: the row nearest the statistical median; ties to the lower value,
///   then the lower key string (TraceML's rule, unchanged by DECISIONS.md);
/// - worst: the extreme value at `worse`'s end; ties go to the lowest row
///   compared as numbers (DECISIONS.md quirk 7; TraceML takes the
///   lexicographically larger key).
struct RowStatistics {
  std::optional<double> average;
  Point median;
  Point worst;
};

inline RowStatistics row_statistics(const std::vector<GroupRow>& rows, std::size_t m,
                                    WorseEnd worse) {
  const auto values = detail::metric_values(rows, m);
  if (values.empty()) return {};
  RowStatistics out;
  double sum = 0.0;
  for (const auto& v : values)
    sum += v.value;
  out.average = sum / static_cast<double>(values.size());

  std::vector<double> all;
  all.reserve(values.size());
  for (const auto& v : values)
    all.push_back(v.value);
  const double median_value = median_in_place(all);
  const auto* med = &values.front();
  for (const auto& v : values) {
    const double d = std::fabs(v.value - median_value);
    const double best = std::fabs(med->value - median_value);
    if (d < best ||
        (d == best && (v.value < med->value || (v.value == med->value && *v.key < *med->key)))) {
      med = &v;
    }
  }
  out.median = Point{med->value, *med->key};

  const bool lower = worse == WorseEnd::Lower;
  const auto* w = &values.front();
  for (const auto& v : values) {
    const bool beyond = lower ? v.value < w->value : v.value > w->value;
    if (beyond || (v.value == w->value && v.number < w->number)) w = &v;
  }
  out.worst = Point{w->value, *w->key};
  return out;
}

/// Fills section.average / median / worst from section.rows, one entry per
/// metric name, with row_statistics; `worse[m]` is metric m's worse end
/// (Higher when absent).
inline void fill_row_statistics(Section& s, const std::vector<WorseEnd>& worse) {
  s.average.clear();
  s.median.clear();
  s.worst.clear();
  for (std::size_t m = 0; m < s.metric_names.size(); ++m) {
    const RowStatistics st =
        row_statistics(s.rows, m, m < worse.size() ? worse[m] : WorseEnd::Higher);
    s.average.push_back(st.average);
    s.median.push_back(st.median);
    s.worst.push_back(st.worst);
  }
}

}  // namespace traceml::analysis
