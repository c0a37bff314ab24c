#include "report/html/html_plots.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "analysis/number_format.hpp"
#include "analysis/order_statistics.hpp"
#include "report/html/html_text.hpp"
#include "report/html/svg_plot.hpp"

namespace traceml::report {

namespace {

using svg::num;

/// Heatmap colours: a handful of levels keeps one <path> per level (a cell
/// is ~14 bytes instead of a ~60-byte <rect>), and 16 shades are more than
/// the eye tells apart on a sequential scale.
constexpr int kHeatLevels = 16;
/// The heatmap scale ends at this quantile of its cells (higher cells take
/// the top colour): one very slow column, a warm-up step, must not darken
/// every other one. A straggler rank is above it and shows at the top colour.
constexpr double kHeatTop = 0.99;
/// Phase colours, kPhaseNames order: waiting in warm colours, compute in blues.
constexpr std::array<const char*, kPhaseCount> kPhaseColors = {"#ff7f0e", "#9467bd", "#1f77b4",
                                                               "#6baed6", "#2ca02c", "#b0b0b0"};

/// A value as an axis label: three significant digits, with its unit.
std::string tick(double v, const char* unit) {
  return fmt::format("{:.3g}{}", v, unit);
}

/// A byte count as an axis label, in the unit of the axis's top (decimal,
/// as the text report writes bytes), so that neighbouring ticks differ.
std::string byte_tick(double v, double top) {
  if (top >= 1e9) return tick(v / 1e9, " GB");
  if (top >= 1e6) return tick(v / 1e6, " MB");
  return tick(v / 1e3, " kB");
}

std::string ms(double v) {
  return analysis::fixed(v, v < 10.0 ? 2 : 1) + " ms";
}

std::string figure(const std::string& id, const std::string& title, const std::string& note,
                   const std::string& svg, const std::string& legend = {}) {
  std::string s = "<figure class=\"plot\" id=\"" + id + "\"><figcaption>" + escape_html(title);
  if (!note.empty()) s += " <span class=\"note\">" + escape_html(note) + "</span>";
  s += "</figcaption>" + svg;
  if (!legend.empty()) s += "<div class=\"legend\">" + legend + "</div>";
  return s + "</figure>\n";
}

std::string swatch(const std::string& color, const std::string& label) {
  return "<span class=\"sw\" style=\"background:" + color + "\"></span>" + escape_html(label) + " ";
}

/// Which column of `d` holds aligned step index `s`.
std::size_t column_of_index(const PlotData& d, std::size_t s) {
  const auto& st = d.columns.starts;
  return std::size_t(std::upper_bound(st.begin(), st.end(), s) - st.begin() - 1);
}

/// The slow window as a fraction range of the columns, when its steps are
/// in the window.
std::optional<std::pair<double, double>> slow_columns(const PlotData& d,
                                                      const std::optional<SlowWindow>& slow) {
  if (!slow || d.steps.empty()) return std::nullopt;
  const auto first = std::lower_bound(d.steps.begin(), d.steps.end(), slow->first_step);
  const auto last = std::upper_bound(d.steps.begin(), d.steps.end(), slow->last_step);
  if (first >= last) return std::nullopt;
  const double n = double(d.columns.columns());
  const std::size_t c0 = column_of_index(d, std::size_t(first - d.steps.begin()));
  const std::size_t c1 = column_of_index(d, std::size_t(last - d.steps.begin()) - 1);
  return std::make_pair(double(c0) / n, double(c1 + 1) / n);
}

std::string slow_title(const PlotData& d, const SlowWindow& s) {
  std::string who = "R" + std::to_string(s.rank);
  for (const auto& r : d.ranks)
    if (r.rank == s.rank) who = r.label;
  return "slow window: the slowest " + std::to_string(s.steps) + " steps of " + who + ", " +
         std::to_string(s.first_step) + "-" + std::to_string(s.last_step) + ", " +
         analysis::fixed(s.slower_pct, 0) + "% slower than its median step";
}

/// Step ids under the columns: about six labels.
void step_labels(svg::Chart& c, const PlotData& d) {
  const std::size_t n = d.columns.columns();
  std::size_t last = n + 1;
  for (int i = 0; i <= 5; ++i) {
    const std::size_t k = std::size_t(std::lround(double(i) * double(n) / 5.0));
    if (k == last) continue;
    last = k;
    const std::int64_t step = k < n ? d.steps[d.columns.starts[k]] : d.steps.back();
    c.x_label(double(k) / double(n), std::to_string(step));
  }
  c.x_caption("step (" + std::to_string(d.steps.size()) + " aligned steps, " + std::to_string(n) +
              " columns)");
}

std::string per_column_note(const PlotData& d) {
  const std::size_t n = d.columns.columns();
  if (n == d.steps.size()) return "one column per step";
  return "each column the mean of " + std::to_string(d.steps.size() / n) + "-" +
         std::to_string((d.steps.size() + n - 1) / n) + " steps";
}

std::string clock_word(const PlotData& d) {
  return d.clock == "gpu" ? "GPU clock" : "CPU clock";
}

/// The run's recorded stalls on a plot of the step columns: a dashed line
/// at each one's column over [y0, y1]. Returns how many were drawn.
std::size_t mark_stalls_on_steps(svg::Chart& ch, const PlotData& d, double y0, double y1) {
  std::size_t drawn = 0;
  for (const RecordedStall& s : d.stalls) {
    if (!s.column) continue;
    const std::string x = num(ch.x((double(*s.column) + 0.5) / double(d.columns.columns())));
    ch.add("<line class=\"stall\" x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + num(y0) + "\" y2=\"" +
           num(y1) + "\"><title>" + escape_html("stall: " + s.text) + "</title></line>");
    ++drawn;
  }
  return drawn;
}

/// The run's recorded stalls on a plot of the samples' time axis: a band
/// over each one's duration.
std::size_t mark_stalls_on_time(svg::Chart& ch, const PlotData& d, const SeriesSet& set) {
  std::size_t drawn = 0;
  for (const RecordedStall& s : d.stalls) {
    if (!s.start_s || set.x_span <= 0.0) continue;
    const double from = (*s.start_s - set.x_first) / set.x_span;
    const double to = (*s.start_s + s.duration_s - set.x_first) / set.x_span;
    if (to < 0.0 || from > 1.0) continue;
    const double x0 = ch.x(std::clamp(from, 0.0, 1.0));
    ch.add("<rect class=\"stallband\" x=\"" + num(x0) + "\" y=\"" + num(ch.top()) + "\" width=\"" +
           num(std::max(ch.x(std::clamp(to, 0.0, 1.0)) - x0, 2.0)) + "\" height=\"" +
           num(ch.bottom() - ch.top()) + "\"><title>" + escape_html("stall: " + s.text) +
           "</title></rect>");
    ++drawn;
  }
  return drawn;
}

constexpr const char* kStallLegend = "a stall the run recorded (run.stalls)";
constexpr const char* kProfiledColor = "#7e57c2";

std::string phase_figure(const PlotData& d, const std::optional<SlowWindow>& slow) {
  const RankSteps& r = d.ranks[*d.shown];
  const std::size_t n = d.columns.columns();
  std::vector<double> total(n, 0.0);
  for (const auto& p : d.phases)
    for (std::size_t c = 0; c < n; ++c)
      total[c] += p[c];
  const double top = *std::max_element(total.begin(), total.end());
  svg::Chart ch(300, "phase time per step of " + r.label);
  ch.y_axis(0.0, top, [](double v) { return tick(v, " ms"); });
  if (const auto band = slow_columns(d, slow))
    ch.band(band->first, band->second, slow_title(d, *slow));
  std::vector<double> below(n, 0.0);
  std::string legend;
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    const std::vector<double>& v = d.phases[p];
    double mean = 0.0;
    for (std::size_t c = 0; c < n; ++c)
      mean += v[c] * double(d.columns.starts[c + 1] - d.columns.starts[c]);
    mean /= double(d.steps.size());
    if (mean <= 0.0) continue;
    // A step line: each column is flat at its mean (what a column is).
    std::vector<std::pair<double, double>> xy;
    xy.reserve(4 * n);
    for (std::size_t c = 0; c < n; ++c) {
      const double y = ch.y(below[c] + v[c]);
      xy.emplace_back(ch.x(double(c) / double(n)), y);
      xy.emplace_back(ch.x(double(c + 1) / double(n)), y);
    }
    for (std::size_t c = n; c-- > 0;) {
      const double y = ch.y(below[c]);
      xy.emplace_back(ch.x(double(c + 1) / double(n)), y);
      xy.emplace_back(ch.x(double(c) / double(n)), y);
      below[c] += v[c];
    }
    ch.add("<polygon fill=\"" + std::string(kPhaseColors[p]) + "\" points=\"" + svg::points(xy) +
           "\"><title>" + escape_html(kPhaseNames[p]) + ": " + ms(mean) +
           " per step on average</title></polygon>");
    legend += swatch(kPhaseColors[p], std::string(kPhaseNames[p]) + " " + ms(mean));
  }
  std::size_t marked = n;  // one marker a column
  std::size_t spikes = 0;
  for (const Spike& s : d.spikes) {
    if (s.rank != r.rank) continue;
    ++spikes;
    if (s.column == marked) continue;
    marked = s.column;
    const double x = ch.x((double(s.column) + 0.5) / double(n));
    ch.add("<path class=\"spike\" d=\"M" + num(x - 5) + " " + num(ch.top()) +
           "h10l-5 8z\"><title>" +
           escape_html("spike: step " + std::to_string(s.step) + ", " + ms(s.ms) + " (" +
                       analysis::fixed(s.times_median, 1) + "x its median)") +
           "</title></path>");
  }
  if (mark_stalls_on_steps(ch, d, ch.top(), ch.bottom()) > 0)
    legend += "<span class=\"sw stall\"></span>" + std::string(kStallLegend) + " ";
  // Steps profiled (any rank's): a mark under the axis where they were left out.
  std::size_t profiled = 0;
  for (const ProfiledMark& m : d.profiled) {
    if (!m.column) continue;
    ++profiled;
    const double x = ch.x(double(*m.column) / double(n));
    ch.add("<path class=\"profiled\" d=\"M" + num(x - 5) + " " + num(ch.bottom()) +
           "h10l-5 -8z\"><title>" + escape_html(m.text) + "</title></path>");
  }
  step_labels(ch, d);
  if (profiled > 0)
    legend += swatch(kProfiledColor, "steps run under LibTorch's profiler, left out (profiles/)");
  if (spikes > 0) legend += swatch(svg::kAlert, "spike (a step of 3x its median or more)");
  if (slow) legend += "<span class=\"sw band\"></span>slow window ";
  return figure("plot-phases", "Where a step's time goes: " + r.label,
                clock_word(d) + ", " + per_column_note(d) + "; phases stacked", ch.str(), legend);
}

/// The rank x step heatmap of the step time (`input` false) or input wait.
std::string heatmap_figure(const PlotData& d, bool input, const std::optional<SlowWindow>& slow) {
  std::vector<std::pair<const RankSteps*, const std::vector<double>*>> rows;
  for (const auto& r : d.ranks) {
    const auto& v = input ? r.input_ms : r.step_ms;
    if (v) rows.emplace_back(&r, &*v);
  }
  if (rows.empty()) return {};
  const std::size_t n = d.columns.columns();
  std::vector<double> cells;
  cells.reserve(rows.size() * n);
  for (const auto& [r, v] : rows)
    cells.insert(cells.end(), v->begin(), v->end());
  std::sort(cells.begin(), cells.end());
  // From zero, so that a colour says how long, not how far from the
  // fastest cell: ranks that step in lockstep look alike, noise stays faint.
  const double lo = std::min(0.0, cells.front());
  // Cells of steps near the largest double sum to infinity; the scale ends
  // at a finite value, or every level computed from it is NaN.
  const auto finite =
      std::find_if(cells.rbegin(), cells.rend(), [](double v) { return std::isfinite(v); });
  const double top = finite == cells.rend() ? lo : *finite;
  double hi = analysis::quantile_of_sorted(cells, kHeatTop);
  if (!(hi <= top)) hi = top;
  if (hi <= lo) hi = top > lo ? top : lo + 1.0;

  const double rows_n = double(rows.size());
  const double row_h = std::clamp(400.0 / rows_n, 5.0, 22.0);
  const double strip = input ? 0.0 : 12.0;  // the spike marks above the step-time rows
  svg::Chart ch(svg::kTop + strip + rows_n * row_h + svg::kBottom,
                std::string(input ? "input wait" : "step time") + " per rank and step");
  const double grid_top = ch.top() + strip;
  const double width = ch.right() - ch.left();

  std::array<std::string, kHeatLevels> paths;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::vector<double>& v = *rows[i].second;
    const auto level = [&](std::size_t c) {
      // Written so that NaN takes the bottom level: std::clamp passes NaN
      // through, and a NaN level indexes far outside `paths`.
      const double f = (v[c] - lo) / (hi - lo);
      return static_cast<std::size_t>(
          std::lround((f > 0.0 ? std::min(f, 1.0) : 0.0) * (kHeatLevels - 1)));
    };
    for (std::size_t c = 0; c < n;) {
      const std::size_t l = level(c);
      std::size_t e = c + 1;
      while (e < n && level(e) == l)
        ++e;
      const std::string len = std::to_string(e - c);
      paths[l] +=
          "M" + std::to_string(c) + " " + std::to_string(i) + "h" + len + "v1h-" + len + "z";
      c = e;
    }
  }
  std::string grid = "<svg x=\"" + num(ch.left()) + "\" y=\"" + num(grid_top) + "\" width=\"" +
                     num(width) + "\" height=\"" + num(rows_n * row_h) + "\" viewBox=\"0 0 " +
                     std::to_string(n) + " " + std::to_string(rows.size()) +
                     "\" preserveAspectRatio=\"none\" shape-rendering=\"crispEdges\">";
  for (int l = 0; l < kHeatLevels; ++l) {
    if (paths[std::size_t(l)].empty()) continue;
    grid += "<path fill=\"" + svg::heat_color(double(l) / (kHeatLevels - 1)) + "\" d=\"" +
            paths[std::size_t(l)] + "\"/>";
  }
  ch.add(grid + "</svg>");

  // Row labels (every k-th when rows are thin, the culprit always) and a
  // hover title over each row.
  const std::size_t every = std::size_t(std::ceil(11.0 / row_h));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RankSteps& r = *rows[i].first;
    const bool culprit = d.culprit && &d.ranks[*d.culprit] == &r;
    const double y = grid_top + (double(i) + 0.5) * row_h;
    if (culprit || i % every == 0) {
      ch.add("<text class=\"yl" + std::string(culprit ? " culprit" : "") + "\" x=\"" +
             num(ch.left() - 6) + "\" y=\"" + num(y + 4) + "\">" + escape_html(r.label) +
             (culprit ? " \u25B6" : "") + "</text>");
    }
    const std::vector<double>& v = *rows[i].second;
    double mean = 0.0;
    for (std::size_t c = 0; c < n; ++c)
      mean += v[c] * double(d.columns.starts[c + 1] - d.columns.starts[c]);
    mean /= double(d.steps.size());
    const std::string who = r.label + (r.host.empty() ? "" : " " + r.host);
    ch.add("<rect class=\"hover\" x=\"" + num(ch.left()) + "\" y=\"" +
           num(grid_top + double(i) * row_h) + "\" width=\"" + num(width) + "\" height=\"" +
           num(row_h) + "\"><title>" +
           escape_html(who + ": " + (input ? "input wait " : "step time ") + ms(mean) +
                       " per step on average") +
           "</title></rect>");
  }
  if (const auto band = slow_columns(d, slow)) {
    const double x0 = ch.x(band->first);
    ch.add("<rect class=\"window\" x=\"" + num(x0) + "\" y=\"" + num(grid_top) + "\" width=\"" +
           num(std::max(ch.x(band->second) - x0, 2.0)) + "\" height=\"" + num(rows_n * row_h) +
           "\"><title>" + escape_html(slow_title(d, *slow)) + "</title></rect>");
  }
  std::size_t spike_count = 0;
  if (!input) {
    std::map<std::size_t, std::map<std::string, int>> by_column;
    for (const Spike& s : d.spikes) {
      for (const auto& r : d.ranks)
        if (r.rank == s.rank) ++by_column[s.column][r.label];
      ++spike_count;
    }
    for (const auto& [c, ranks] : by_column) {
      int total = 0;
      std::string who;
      for (const auto& [label, count] : ranks) {
        total += count;
        if (who.size() < 120) who += (who.empty() ? "" : ", ") + label;
      }
      const std::size_t s0 = d.columns.starts[c];
      const std::size_t s1 = d.columns.starts[c + 1] - 1;
      const double x0 = ch.x(double(c) / double(n));
      ch.add("<rect class=\"spike\" x=\"" + num(x0) + "\" y=\"" + num(ch.top()) + "\" width=\"" +
             num(std::max(width / double(n), 2.0)) + "\" height=\"8\"><title>" +
             escape_html("steps " + std::to_string(d.steps[s0]) + "-" +
                         std::to_string(d.steps[s1]) + ": " + std::to_string(total) +
                         (total == 1 ? " spike" : " spikes") + " (" + who + ")") +
             "</title></rect>");
    }
  }
  const bool stalls =
      !input && mark_stalls_on_steps(ch, d, ch.top(), grid_top + rows_n * row_h) > 0;
  step_labels(ch, d);

  std::string scale = "<span class=\"scale\" style=\"background:linear-gradient(90deg";
  for (int i = 0; i <= 4; ++i)
    scale += "," + svg::heat_color(i / 4.0);
  scale += ")\"></span>";
  std::string legend = escape_html(ms(lo)) + " " + scale + " " +
                       escape_html((cells.back() > hi ? "\u2265 " : "") + ms(hi)) + " ";
  if (d.culprit)
    legend += swatch(svg::kAlert, "the rank the verdict names: " + d.ranks[*d.culprit].label);
  if (spike_count > 0) legend += swatch(svg::kAlert, "columns with a spike (top strip)");
  if (stalls) legend += "<span class=\"sw stall\"></span>" + std::string(kStallLegend) + " ";
  if (slow) legend += "<span class=\"sw window\"></span>slow window ";
  const std::string what = input ? "Input wait" : "Step time";
  return figure(input ? "plot-heatmap-input" : "plot-heatmap-step", what + " per rank and step",
                clock_word(d) + ", " + per_column_note(d) + "; one row per rank", ch.str(), legend);
}

std::string distribution_figure(const PlotData& d) {
  std::vector<const RankSteps*> rows;
  for (const auto& r : d.ranks)
    if (r.step_quantiles) rows.push_back(&r);
  if (rows.empty()) return {};
  double lo = rows.front()->step_quantiles->p5;
  double hi = rows.front()->step_quantiles->p95;
  for (const RankSteps* r : rows) {
    lo = std::min(lo, r->step_quantiles->p5);
    hi = std::max(hi, r->step_quantiles->p95);
  }
  svg::Chart ch(260, "step time distribution per rank");
  ch.y_axis(lo, hi, [](double v) { return tick(v, " ms"); });
  const double slot = (ch.right() - ch.left()) / double(rows.size());
  const double half = std::min(13.0, 0.3 * slot);
  const std::size_t every = std::size_t(std::ceil(double(rows.size()) / 16.0));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RankSteps& r = *rows[i];
    const Quantiles& q = *r.step_quantiles;
    const bool culprit = d.culprit && &d.ranks[*d.culprit] == &r;
    const double x = ch.x((double(i) + 0.5) / double(rows.size()));
    const std::string who = r.label + (r.host.empty() ? "" : " " + r.host);
    ch.add("<g class=\"box" + std::string(culprit ? " culprit" : "") + "\"><title>" +
           escape_html(who + ": median " + ms(q.p50) + ", p25-p75 " + ms(q.p25) + "-" + ms(q.p75) +
                       ", p5-p95 " + ms(q.p5) + "-" + ms(q.p95) + ", max " + ms(q.max)) +
           "</title><line x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" + num(ch.y(q.p5)) +
           "\" y2=\"" + num(ch.y(q.p95)) + "\"/><rect x=\"" + num(x - half) + "\" y=\"" +
           num(ch.y(q.p75)) + "\" width=\"" + num(2 * half) + "\" height=\"" +
           num(std::max(ch.y(q.p25) - ch.y(q.p75), 1.0)) + "\"/><line class=\"median\" x1=\"" +
           num(x - half) + "\" x2=\"" + num(x + half) + "\" y1=\"" + num(ch.y(q.p50)) + "\" y2=\"" +
           num(ch.y(q.p50)) + "\"/></g>");
    if (culprit || i % every == 0) ch.x_label((double(i) + 0.5) / double(rows.size()), r.label);
  }
  ch.x_caption("rank");
  return figure("plot-distribution", "Step time distribution per rank",
                clock_word(d) +
                    ", every aligned step; box p25-p75, line the median, whiskers "
                    "p5-p95 (hover a box for its max)",
                ch.str());
}

/// A line chart of `set`: one line per series, broken where a column has
/// no value; with more than nine series, one colour for all but the rank
/// the verdict names.
std::string lines_figure(const std::string& id, const std::string& title, const std::string& note,
                         const SeriesSet& set, const char* unit, bool bytes,
                         const std::string& x_caption, const std::string& culprit,
                         const std::optional<SlowWindow>& slow, const PlotData& d) {
  if (set.empty() || set.columns == 0) return {};
  double top = 0.0;
  for (const auto& s : set.series)
    for (const auto& v : s.y)
      if (v) top = std::max(top, *v);
  svg::Chart ch(220, title);
  ch.y_axis(0.0, top, [&](double v) { return bytes ? byte_tick(v, top) : tick(v, unit); });
  const bool steps = !x_caption.rfind("step", 0);
  if (slow && steps && set.x_span > 0) {
    ch.band((double(slow->first_step) - set.x_first) / set.x_span,
            (double(slow->last_step) + 1 - set.x_first) / set.x_span, slow_title(d, *slow));
  }
  const bool many = set.series.size() > 9;
  std::string legend;
  if (!steps && mark_stalls_on_time(ch, d, set) > 0)
    legend += "<span class=\"sw stall\"></span>" + std::string(kStallLegend) + " ";
  std::string last;  // the culprit's line goes on top
  for (std::size_t i = 0; i < set.series.size(); ++i) {
    const Series& s = set.series[i];
    const bool is_culprit = !culprit.empty() && s.label == culprit;
    const std::string color = is_culprit ? svg::kAlert : many ? "#1f77b4" : svg::series_color(i);
    std::string lines;
    std::vector<std::pair<double, double>> run;
    auto flush = [&] {
      if (run.size() == 1) run.emplace_back(run.front().first + 1.0, run.front().second);
      if (!run.empty()) lines += "<polyline points=\"" + svg::points(run) + "\"/>";
      run.clear();
    };
    for (std::size_t c = 0; c < s.y.size(); ++c) {
      if (!s.y[c]) {
        flush();
        continue;
      }
      run.emplace_back(ch.x((double(c) + 0.5) / double(set.columns)), ch.y(*s.y[c]));
    }
    flush();
    const std::string g = "<g class=\"line" + std::string(many && !is_culprit ? " faint" : "") +
                          "\" stroke=\"" + color + "\"><title>" + escape_html(s.title) +
                          "</title>" + lines + "</g>";
    if (is_culprit) {
      last = g;
    } else {
      ch.add(g);
    }
    if (!many || is_culprit) legend += swatch(color, s.label);
  }
  ch.add(last);
  if (many)
    legend += escape_html(std::to_string(set.series.size()) + " lines; hover one for its name");
  for (const double t : svg::nice_ticks(set.x_first, set.x_first + set.x_span, 6)) {
    const double f = (t - set.x_first) / set.x_span;
    if (!(f >= 0.0 && f <= 1.0)) continue;  // NaN too: a single sample's span is 0
    ch.x_label(f, fmt::format("{:.6g}", t));
  }
  ch.x_caption(x_caption);
  return figure(id, title, note, ch.str(), legend);
}

std::string spike_list(const PlotData& d) {
  if (d.spikes.empty())
    return "<p class=\"note\" id=\"spikes\">No spike: no step took " +
           analysis::fixed(kSpikeFactor, 0) + "x its rank's median step or more.</p>\n";
  std::map<int, int> ranks;
  for (const Spike& s : d.spikes)
    ++ranks[s.rank];
  std::string html = "<p id=\"spikes\">" + std::to_string(d.spikes.size()) +
                     (d.spikes.size() == 1 ? " step" : " steps") + " on " +
                     std::to_string(ranks.size()) + (ranks.size() == 1 ? " rank" : " ranks") +
                     " took " + analysis::fixed(kSpikeFactor, 0) +
                     "x its rank's median step or more (spikes). The longest:</p>\n"
                     "<table class=\"spikes\"><tr><th>rank</th><th>step</th><th>time</th>"
                     "<th>x median</th></tr>";
  for (std::size_t i = 0; i < d.spikes.size() && i < 5; ++i) {
    const Spike& s = d.spikes[i];
    std::string who = "R" + std::to_string(s.rank);
    for (const auto& r : d.ranks)
      if (r.rank == s.rank) who = r.label;
    html += "<tr><td>" + escape_html(who) + "</td><td>" + std::to_string(s.step) + "</td><td>" +
            escape_html(ms(s.ms)) + "</td><td>" + analysis::fixed(s.times_median, 1) + "</td></tr>";
  }
  return html + "</table>\n";
}

}  // namespace

std::string plots_html(const PlotData& d, const std::optional<SlowWindow>& slow) {
  std::string html = "<section id=\"plots\">\n<h2>Steps</h2>\n";
  if (d.steps.empty() || d.ranks.empty()) {
    html +=
        "<p class=\"note\">No step that every rank reported in the analysed window: no step "
        "plots.</p>\n";
  } else {
    if (d.shown && d.ranks[*d.shown].step_ms) html += phase_figure(d, slow);
    html += heatmap_figure(d, false, slow);
    html += heatmap_figure(d, true, slow);
    html += spike_list(d);
    html += distribution_figure(d);
  }
  const std::string culprit = d.culprit ? d.ranks[*d.culprit].label : "";
  const std::string memory = lines_figure("plot-memory", "Step memory per rank",
                                          "peak allocated, the largest of each column", d.memory,
                                          "", true, "step", culprit, slow, d);
  if (!memory.empty()) html += "<h2>Memory</h2>\n" + memory;
  std::string samples;
  samples += lines_figure("plot-host-cpu", "Host CPU per node",
                          "percent of all cores, mean of each column", d.host_cpu, "%", false,
                          "seconds from the first sample", "", slow, d);
  samples += lines_figure("plot-gpu-util", "GPU utilisation per node",
                          "mean of the node's GPUs, mean of each column", d.gpu_util, "%", false,
                          "seconds from the first sample", "", slow, d);
  samples += lines_figure("plot-process-cpu", "Process CPU per rank",
                          "percent of one core, mean of each column", d.process_cpu, "%", false,
                          "seconds from the first sample", culprit, slow, d);
  samples +=
      lines_figure("plot-process-rss", "Process RSS per rank", "mean of each column", d.process_rss,
                   "", true, "seconds from the first sample", culprit, slow, d);
  if (!samples.empty()) html += "<h2>System and process</h2>\n" + samples;
  return html + "</section>\n";
}

}  // namespace traceml::report
