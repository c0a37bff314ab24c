// The few SVG pieces the HTML report's plots are made of: a chart frame with
// scaled axes, compact numbers, colour scales. Hand-written SVG instead of a
// charting library (docs/html-report.md says why): the bytes are a pure
// function of the data, the page needs no script, and it stays small.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace traceml::report::svg {

/// Every chart is this many user units wide and scales to the page's width.
inline constexpr double kWidth = 1000;
/// Room for the y axis's labels (rank labels such as "R63/N7" fit).
inline constexpr double kLeft = 72;
inline constexpr double kRight = 16;
inline constexpr double kTop = 8;
/// Room for the x axis's labels and its caption.
inline constexpr double kBottom = 34;

/// A coordinate or value, compactly: at most one decimal, no trailing zero.
std::string num(double v);

/// Tick values covering [lo, hi] at a 1-2-5 x 10^k spacing, about `target`
/// of them: at least two, at most target + 3, finite and ascending, for any
/// lo and hi. A range narrower than a billionth of its values (equal values,
/// values an ulp apart) is widened by a tenth of lo; values all below 1e-290
/// count as zero; a range no double step can cross (values of both signs
/// near the largest double) gets its two ends.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

/// The sequential scale of the heatmaps at t in [0, 1] (viridis: readable
/// in grey and by colour-blind readers), as "#rrggbb".
std::string heat_color(double t);

/// A categorical colour for series `i` (cycles after 10).
const char* series_color(std::size_t i);

/// The highlight colour: the rank a verdict names, stalls, the slow window.
inline constexpr const char* kAlert = "#d62728";

/// One <svg> chart: a plot area inside fixed margins, a linear y scale set
/// by y_axis, x given as a fraction of the plot width.
class Chart {
 public:
  /// `label` is the chart's accessible name (escaped here).
  Chart(double height, const std::string& label);

  [[nodiscard]] double left() const { return kLeft; }
  [[nodiscard]] double right() const { return kWidth - kRight; }
  [[nodiscard]] double top() const { return kTop; }
  [[nodiscard]] double bottom() const { return height_ - kBottom; }
  /// x of a fraction of the plot width.
  [[nodiscard]] double x(double fraction) const { return left() + fraction * (right() - left()); }
  /// y of a value on the scale y_axis set.
  [[nodiscard]] double y(double v) const;

  /// Sets the y scale to [lo, hi] widened to nice ticks, draws the grid
  /// lines and their labels (`format` writes a tick's value).
  template <typename F>
  void y_axis(double lo, double hi, F format) {
    const std::vector<double> ticks = nice_ticks(lo, hi);
    lo_ = ticks.front();
    hi_ = ticks.back();
    for (const double t : ticks)
      grid_line(y(t), format(t));
  }
  /// A label at a fraction of the x axis, with a short tick.
  void x_label(double fraction, const std::string& text);
  /// The x axis's caption, centred under the labels.
  void x_caption(const std::string& text);
  /// A shaded band over [from, to] (fractions of the width), behind what
  /// comes after it, with a hover title.
  void band(double from, double to, const std::string& title);
  /// Raw SVG (already escaped) appended inside the chart.
  void add(const std::string& element) { body_ += element; }

  /// The <svg> element.
  [[nodiscard]] std::string str() const;

 private:
  void grid_line(double y, const std::string& label);
  double height_;
  std::string label_;
  double lo_ = 0.0;
  double hi_ = 1.0;
  std::string body_;
};

/// "points" of a polyline from (x, y) pairs.
std::string points(const std::vector<std::pair<double, double>>& xy);

}  // namespace traceml::report::svg
