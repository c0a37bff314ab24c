#include "report/html/svg_plot.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "report/html/html_text.hpp"

namespace traceml::report::svg {

std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  const double r = std::round(v * 10.0) / 10.0;
  // A coordinate on the drawing: a few digits, so no length limit is needed.
  if (r == std::floor(r)) return fmt::format("{:.0f}", r == 0.0 ? 0.0 : r);  // never "-0"
  return fmt::format("{:.1f}", r);
}

namespace {

/// A span narrower than this fraction of its values' size is the rounding of
/// the arithmetic that made it (quantile interpolation of equal step times
/// leaves an ulp or two), drawn as one value: ticks that close could not be
/// told apart, and stepping through them by addition stalls (at 83.386 one
/// ulp is 1.4e-14, and 83.386 + 5e-15 is 83.386).
constexpr double kMinRelativeSpan = 1e-9;
/// Values all smaller than this are zero to a plot: the spacing of ticks
/// over them would leave the range of normal doubles.
constexpr double kTiny = 1e-290;
/// The most ticks a caller may ask for: an axis holds a few labels.
constexpr int kMaxTarget = 100;

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
  if (hi < lo) hi = lo;
  const double size = std::max(std::fabs(lo), std::fabs(hi));
  if (size < kTiny) {
    lo = lo < 0.0 ? -1.0 : 0.0;
    hi = hi > 0.0 ? 1.0 : 0.0;
  }
  if (!(hi - lo > size * kMinRelativeSpan)) {
    hi = lo + (lo == 0.0 ? 1.0 : std::fabs(lo) * 0.1);
    if (!std::isfinite(hi)) {  // lo near the largest double: widen downwards
      hi = lo;
      lo = hi - std::fabs(hi) * 0.1;
    }
  }
  const int t = std::clamp(target, 1, kMaxTarget);
  const double raw = (hi - lo) / t;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  // The span exceeds the largest double (values of both signs near it): the
  // ends are the only ticks that can be written.
  if (!std::isfinite(raw) || !std::isfinite(step) || !(step > 0.0)) return {lo, hi};
  // Ticks by whole multiples of the step, counted, never by adding the step
  // to the last tick: their number is then fixed before the first is made.
  // step >= raw = (hi - lo) / t gives at most t + 2 of them.
  const double first = std::floor(lo / step);
  const double last = std::max(first + 1.0, std::ceil(hi / step - 1e-9));
  const double count = last - first + 1.0;
  if (!(count <= double(t) + 3.0)) return {lo, hi};  // + 1: the rounding of lo / step
  std::vector<double> ticks;
  ticks.reserve(std::size_t(count));
  for (int i = 0; i < int(count); ++i) {
    const double k = first + double(i);
    ticks.push_back(k == 0.0 ? 0.0 : k * step);
  }
  // A tick beyond the largest double, outside [lo, hi]: the ends instead.
  if (!std::isfinite(ticks.front()) || !std::isfinite(ticks.back())) return {lo, hi};
  return ticks;
}

std::string heat_color(double t) {
  // Viridis at nine stops, linearly interpolated.
  static constexpr std::array<std::array<int, 3>, 9> kStops = {{{68, 1, 84},
                                                                {71, 44, 122},
                                                                {59, 81, 139},
                                                                {44, 113, 142},
                                                                {33, 144, 141},
                                                                {39, 173, 129},
                                                                {92, 200, 99},
                                                                {170, 220, 50},
                                                                {253, 231, 37}}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * double(kStops.size() - 1);
  const auto i = std::min(static_cast<std::size_t>(t), kStops.size() - 2);
  const double f = t - double(i);
  int c[3];
  for (std::size_t k = 0; k < 3; ++k)
    c[k] = int(std::lround(kStops[i][k] + f * (kStops[i + 1][k] - kStops[i][k])));
  return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

const char* series_color(std::size_t i) {
  // Tableau 10 without its red, which marks the culprit and stalls.
  static constexpr std::array<const char*, 9> kColors = {"#1f77b4", "#ff7f0e", "#2ca02c",
                                                         "#9467bd", "#8c564b", "#e377c2",
                                                         "#7f7f7f", "#bcbd22", "#17becf"};
  return kColors[i % kColors.size()];
}

Chart::Chart(double height, const std::string& label) : height_(height), label_(label) {}

double Chart::y(double v) const {
  const double f = hi_ > lo_ ? (v - lo_) / (hi_ - lo_) : 0.0;
  // NaN (an infinite value on an infinite scale) at the bottom: std::clamp
  // would pass it through to the coordinates.
  return bottom() - (f > 0.0 ? std::min(f, 1.0) : 0.0) * (bottom() - top());
}

void Chart::grid_line(double at, const std::string& label) {
  body_ += "<line class=\"grid\" x1=\"" + num(left()) + "\" x2=\"" + num(right()) + "\" y1=\"" +
           num(at) + "\" y2=\"" + num(at) + "\"/><text class=\"yl\" x=\"" + num(left() - 6) +
           "\" y=\"" + num(at + 4) + "\">" + escape_html(label) + "</text>";
}

void Chart::x_label(double fraction, const std::string& text) {
  const std::string at = num(x(fraction));
  body_ += "<line class=\"axis\" x1=\"" + at + "\" x2=\"" + at + "\" y1=\"" + num(bottom()) +
           "\" y2=\"" + num(bottom() + 4) + "\"/><text class=\"xl\" x=\"" + at + "\" y=\"" +
           num(bottom() + 16) + "\">" + escape_html(text) + "</text>";
}

void Chart::x_caption(const std::string& text) {
  body_ += "<text class=\"xc\" x=\"" + num(x(0.5)) + "\" y=\"" + num(bottom() + 30) + "\">" +
           escape_html(text) + "</text>";
}

void Chart::band(double from, double to, const std::string& title) {
  const double x0 = x(std::clamp(from, 0.0, 1.0));
  const double x1 = x(std::clamp(to, 0.0, 1.0));
  body_ += "<rect class=\"band\" x=\"" + num(x0) + "\" y=\"" + num(top()) + "\" width=\"" +
           num(std::max(x1 - x0, 2.0)) + "\" height=\"" + num(bottom() - top()) + "\"><title>" +
           escape_html(title) + "</title></rect>";
}

std::string Chart::str() const {
  return "<svg viewBox=\"0 0 " + num(kWidth) + " " + num(height_) +
         "\" role=\"img\" aria-label=\"" + escape_html(label_) + "\"><line class=\"axis\" x1=\"" +
         num(left()) + "\" x2=\"" + num(right()) + "\" y1=\"" + num(bottom()) + "\" y2=\"" +
         num(bottom()) + "\"/>" + body_ + "</svg>";
}

std::string points(const std::vector<std::pair<double, double>>& xy) {
  std::string s;
  for (const auto& [x, y] : xy) {
    if (!s.empty()) s += ' ';
    s += num(x) + "," + num(y);
  }
  return s;
}

}  // namespace traceml::report::svg
