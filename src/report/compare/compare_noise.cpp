#include "report/compare/compare_noise.hpp"

#include <cmath>

#include "analysis/distribution.hpp"
#include "analysis/number_format.hpp"
#include "analysis/thresholds.hpp"
#include "report/json_read.hpp"
#include "report/text/text_format.hpp"

namespace traceml::report {

namespace {

namespace th = analysis::thresholds;
using analysis::fixed;
using namespace json_read;

/// The spread entry that describes `clock`: the per-clock entry, or the
/// selected-clock `step_time_ms` when the run's diagnosis clock is `clock`.
const Json* spread_entry(const Json* sec, const std::string& clock) {
  const Json* spread = object_child(object_child(sec, "global"), "spread");
  const std::string per_clock = "step_time_" + clock + "_ms";
  if (const Json* e = object_child(spread, per_clock.c_str())) return e;
  const auto c = json_read::text(json_read::path(sec, {"global", "window", "diagnosis_clock"}));
  return c == clock ? object_child(spread, "step_time_ms") : nullptr;
}

struct Band {
  double ms = 0.0;
  bool from_std = false;
};

/// p75 - p25, or a std scaled to the IQR of a normal distribution.
std::optional<Band> band_of(const Json* entry) {
  const auto p25 = number(child(entry, "p25"));
  const auto p75 = number(child(entry, "p75"));
  if (p25 && p75 && *p75 >= *p25) return Band{*p75 - *p25, false};
  const auto sd = number(child(entry, "std_ms"));
  if (sd && *sd >= 0) return Band{th::kNormalIqrPerStd * *sd, true};
  return std::nullopt;
}

/// The distribution sketch of an entry; nothing when absent or malformed.
std::optional<analysis::DistributionSketch> sketch_in(const Json* entry) {
  const Json* q = child(entry, "quantiles");
  const auto steps = number(child(entry, "steps"));
  if (q == nullptr || !q->is_array() || q->size() != analysis::kSketchQuantiles || !steps ||
      *steps < 1 || *steps > 1e12 || std::floor(*steps) != *steps)
    return std::nullopt;
  analysis::DistributionSketch s;
  s.count = std::int64_t(*steps);
  for (const Json& v : *q) {
    const auto x = number(&v);
    if (!x || (!s.quantiles.empty() && *x < s.quantiles.back())) return std::nullopt;
    s.quantiles.push_back(*x);
  }
  const Json* r = child(entry, "lag1_autocorrelation");
  if (const auto lag = number(r); lag && *lag >= -1.0 && *lag <= 1.0) {
    s.lag1 = *lag;
  } else if (r != nullptr && !r->is_null()) {
    return std::nullopt;
  }
  return s;
}

std::string signed_ms(double x) {
  return signed_fixed(x) + " ms";
}

std::string p_text(double p) {
  if (p < 0.001) return "p<0.001";
  return "p=" + fixed(p, p < 0.01 ? 3 : 2);
}

std::string count_text(std::int64_t n) {
  // As read back from the JSON number: a double, rounded.
  return std::to_string(std::llround(double(n)));
}

/// The number as a file would hold it: a non-finite double is written as
/// null and read back as absent.
std::optional<double> finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::optional<double> finite(const std::optional<double>& v) {
  return v ? finite(*v) : std::nullopt;
}

}  // namespace

std::optional<double> median_step_ms(const Json* sec, const std::string& clock) {
  return finite(number(child(spread_entry(sec, clock), "median")));
}

NoiseDecision step_time_noise(const Json* lhs, const Json* rhs,
                              const std::optional<std::string>& clock,
                              const MetricDelta& step_metric) {
  NoiseDecision n;
  const auto delta = finite(step_metric.delta);
  if (!clock || !delta) return n;
  const Json* ea = spread_entry(lhs, *clock);
  const Json* eb = spread_entry(rhs, *clock);
  const auto a = band_of(ea);
  const auto b = band_of(eb);
  if (!a || !b) return n;
  const double band = std::max(a->ms, b->ms);
  n.basis = (a->from_std && b->from_std)     ? "std"
            : (!a->from_std && !b->from_std) ? "iqr"
                                             : "iqr_std";
  const auto ma = number(child(ea, "median"));
  const auto mb = number(child(eb, "median"));
  if (ma && mb) n.median_delta_ms = *mb - *ma;
  // The band is a spread around the median: compare it with the median shift
  // when both runs report medians, else with the change of the means.
  const double shift = n.median_delta_ms.value_or(*delta);
  n.beyond_band = std::fabs(shift) > band;

  const auto sa = sketch_in(ea);
  const auto sb = sketch_in(eb);
  bool significant_same_way = false;
  if (!sa || !sb) {
    n.rank_test_unavailable = std::string("run ") + (!sa ? "A" : "B") +
                              "'s summary has no per-step distribution (TraceML's or an older one)";
  } else if (const auto t = analysis::mann_whitney(*sa, *sb)) {
    const bool significant = t->p_value < th::kCompareAlpha;
    significant_same_way = significant && (t->prob_b_slower > 0.5) == (shift > 0);
    n.rank_test = RankTest{th::kCompareAlpha, t->p_value, t->z,       t->prob_b_slower, sa->count,
                           sb->count,         t->n_eff_a, t->n_eff_b, significant};
  } else {
    n.rank_test_unavailable = "too few independent steps for the rank test (fewer than " +
                              fixed(analysis::kMinRankTestCount, 0) +
                              " on a side after autocorrelation)";
  }
  n.available = true;
  n.delta_ms = *delta;
  n.threshold_ms = band;
  n.beyond_noise = n.beyond_band && (!n.rank_test || significant_same_way);
  n.direction = !n.beyond_noise ? NoiseDirection::None
                : shift > 0     ? NoiseDirection::Slower
                                : NoiseDirection::Faster;
  return n;
}

bool change_counts(const NoiseDecision& noise, bool slower) {
  if (!noise.available) return true;
  return noise.direction == (slower ? NoiseDirection::Slower : NoiseDirection::Faster);
}

std::string noise_evidence(const NoiseDecision& noise) {
  if (!noise.available) return "";
  const auto md = finite(noise.median_delta_ms);
  const auto band = finite(noise.threshold_ms);
  std::string band_clause = md ? "median shift " + signed_ms(*md)
                               : "mean shift " + signed_ms(finite(noise.delta_ms).value_or(0.0));
  band_clause += std::string(noise.beyond_band ? " exceeds" : " is inside") + " the " +
                 (std::string(noise.basis) == "std" ? "std-based band " : "IQR band ") +
                 (band ? fixed(*band, 1) + " ms" : std::string("n/a"));

  std::string test_clause;
  bool test_blocks = false;  // the rank test is what keeps the change within noise
  if (const auto& t = noise.rank_test) {
    const double p = finite(t->p_value).value_or(1.0);
    const double alpha = finite(t->alpha).value_or(th::kCompareAlpha);
    test_clause = "Mann-Whitney U " + p_text(p) + (t->significant ? " < " : " >= ") + "alpha " +
                  fixed(alpha, 2) + ", n=" + count_text(t->n_lhs) + "/" + count_text(t->n_rhs) +
                  " steps";
    if (t->significant && noise.beyond_band && !noise.beyond_noise)
      test_clause += ", ranks shifted the other way";
    test_blocks = noise.beyond_band && !noise.beyond_noise;
  } else {
    test_clause = "no rank test: " + noise.rank_test_unavailable;
  }
  return test_blocks ? test_clause + "; " + band_clause : band_clause + "; " + test_clause;
}

Json noise_json(const NoiseDecision& noise) {
  if (!noise.available) return Json{{"available", false}};
  Json n;
  n["available"] = true;
  n["basis"] = noise.basis;
  n["delta_ms"] = noise.delta_ms;
  n["threshold_ms"] = noise.threshold_ms;
  n["beyond_noise"] = noise.beyond_noise;
  n["method"] = noise.rank_test ? "rank_test_and_iqr_band" : "iqr_band";
  n["median_delta_ms"] = opt_json(noise.median_delta_ms);
  n["beyond_band"] = noise.beyond_band;
  Json test = nullptr;
  if (const auto& t = noise.rank_test) {
    test = Json{{"method", "mann_whitney_u"},
                {"alpha", t->alpha},
                {"p_value", t->p_value},
                {"z", t->z},
                {"prob_b_slower", t->prob_b_slower},
                {"n_lhs", t->n_lhs},
                {"n_rhs", t->n_rhs},
                {"n_eff_lhs", t->n_eff_lhs},
                {"n_eff_rhs", t->n_eff_rhs},
                {"significant", t->significant}};
  }
  n["rank_test"] = test;
  if (!noise.rank_test) n["rank_test_unavailable"] = noise.rank_test_unavailable;
  n["direction"] = noise.direction == NoiseDirection::None     ? "none"
                   : noise.direction == NoiseDirection::Slower ? "slower"
                                                               : "faster";
  return n;
}

}  // namespace traceml::report
