#include "report/svg_plot.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "report/html_text.hpp"

namespace traceml::report::svg {

std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  const double r = std::round(v * 10.0) / 10.0;
  char buf[32];
  if (r == std::floor(r)) {
    std::snprintf(buf, sizeof buf, "%.0f", r == 0.0 ? 0.0 : r);  // never "-0"
  } else {
    std::snprintf(buf, sizeof buf, "%.1f", r);
  }
  return buf;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
  if (hi <= lo) hi = lo + (lo == 0.0 ? 1.0 : std::fabs(lo) * 0.1);
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  const double first = std::floor(lo / step) * step;
  std::vector<double> ticks;
  for (double t = first; ticks.empty() || ticks.back() < hi - step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
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
  char buf[8];
  int c[3];
  for (std::size_t k = 0; k < 3; ++k)
    c[k] = int(std::lround(kStops[i][k] + f * (kStops[i + 1][k] - kStops[i][k])));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0], c[1], c[2]);
  return buf;
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
  return bottom() - std::clamp(f, 0.0, 1.0) * (bottom() - top());
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
