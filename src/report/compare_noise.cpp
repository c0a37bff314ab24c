#include "report/compare_noise.hpp"

#include <cmath>

#include "analysis/distribution.hpp"
#include "analysis/number_format.hpp"
#include "analysis/thresholds.hpp"
#include "report/json_read.hpp"
#include "report/text_format.hpp"

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

std::string count_text(const Json* n) {
  const auto v = number(n);
  return v ? std::to_string(std::llround(*v)) : "n/a";
}

}  // namespace

Json step_time_noise(const Json* lhs, const Json* rhs, const std::optional<std::string>& clock,
                     const Json& step_metric) {
  const auto delta = number(child(&step_metric, "delta"));
  if (!clock || !delta) return Json{{"available", false}};
  const Json* ea = spread_entry(lhs, *clock);
  const Json* eb = spread_entry(rhs, *clock);
  const auto a = band_of(ea);
  const auto b = band_of(eb);
  if (!a || !b) return Json{{"available", false}};
  const double band = std::max(a->ms, b->ms);
  const char* basis = (a->from_std && b->from_std)     ? "std"
                      : (!a->from_std && !b->from_std) ? "iqr"
                                                       : "iqr_std";
  const auto ma = number(child(ea, "median"));
  const auto mb = number(child(eb, "median"));
  std::optional<double> median_delta;
  if (ma && mb) median_delta = *mb - *ma;
  // The band is a spread around the median: compare it with the median shift
  // when both runs report medians, else with the change of the means.
  const double shift = median_delta.value_or(*delta);
  const bool beyond_band = std::fabs(shift) > band;

  Json test = nullptr;
  std::string unavailable;
  const auto sa = sketch_in(ea);
  const auto sb = sketch_in(eb);
  bool significant_same_way = false;
  if (!sa || !sb) {
    unavailable = std::string("run ") + (!sa ? "A" : "B") +
                  "'s summary has no per-step distribution (TraceML's or an older one)";
  } else if (const auto t = analysis::mann_whitney(*sa, *sb)) {
    const bool significant = t->p_value < th::kCompareAlpha;
    significant_same_way = significant && (t->prob_b_slower > 0.5) == (shift > 0);
    test = Json{{"method", "mann_whitney_u"},
                {"alpha", th::kCompareAlpha},
                {"p_value", t->p_value},
                {"z", t->z},
                {"prob_b_slower", t->prob_b_slower},
                {"n_lhs", sa->count},
                {"n_rhs", sb->count},
                {"n_eff_lhs", t->n_eff_a},
                {"n_eff_rhs", t->n_eff_b},
                {"significant", significant}};
  } else {
    unavailable = "too few independent steps for the rank test (fewer than " +
                  fixed(analysis::kMinRankTestCount, 0) + " on a side after autocorrelation)";
  }
  const bool beyond = beyond_band && (test.is_null() || significant_same_way);

  Json n;
  n["available"] = true;
  n["basis"] = basis;
  n["delta_ms"] = *delta;
  n["threshold_ms"] = band;
  n["beyond_noise"] = beyond;
  n["method"] = test.is_null() ? "iqr_band" : "rank_test_and_iqr_band";
  n["median_delta_ms"] = opt_json(median_delta);
  n["beyond_band"] = beyond_band;
  n["rank_test"] = test;
  if (test.is_null()) n["rank_test_unavailable"] = unavailable;
  n["direction"] = !beyond ? "none" : shift > 0 ? "slower" : "faster";
  return n;
}

bool change_counts(const Json& noise, bool slower) {
  if (!flag(child(&noise, "available")).value_or(false)) return true;
  const auto d = json_read::text(child(&noise, "direction"));
  return d == (slower ? "slower" : "faster");
}

std::string noise_evidence(const Json& noise) {
  if (!flag(child(&noise, "available")).value_or(false)) return "";
  const auto md = number(child(&noise, "median_delta_ms"));
  const auto d = number(child(&noise, "delta_ms"));
  const auto band = number(child(&noise, "threshold_ms"));
  const bool beyond_noise = flag(child(&noise, "beyond_noise")).value_or(false);
  const bool beyond_band = flag(child(&noise, "beyond_band")).value_or(beyond_noise);
  const std::string basis = json_read::text(child(&noise, "basis")).value_or("iqr");
  std::string band_clause =
      md ? "median shift " + signed_ms(*md) : "mean shift " + signed_ms(d.value_or(0.0));
  band_clause += std::string(beyond_band ? " exceeds" : " is inside") + " the " +
                 (basis == "std" ? "std-based band " : "IQR band ") +
                 (band ? fixed(*band, 1) + " ms" : std::string("n/a"));

  std::string test_clause;
  bool test_blocks = false;  // the rank test is what keeps the change within noise
  const Json* t = child(&noise, "rank_test");
  if (t != nullptr && t->is_object()) {
    const double p = number(child(t, "p_value")).value_or(1.0);
    const double alpha = number(child(t, "alpha")).value_or(th::kCompareAlpha);
    const bool significant = flag(child(t, "significant")).value_or(false);
    test_clause = "Mann-Whitney U " + p_text(p) + (significant ? " < " : " >= ") + "alpha " +
                  fixed(alpha, 2) + ", n=" + count_text(child(t, "n_lhs")) + "/" +
                  count_text(child(t, "n_rhs")) + " steps";
    if (significant && beyond_band && !beyond_noise) test_clause += ", ranks shifted the other way";
    test_blocks = beyond_band && !beyond_noise;
  } else {
    test_clause = "no rank test: " +
                  json_read::text(child(&noise, "rank_test_unavailable")).value_or("no data");
  }
  return test_blocks ? test_clause + "; " + band_clause : band_clause + "; " + test_clause;
}

}  // namespace traceml::report
