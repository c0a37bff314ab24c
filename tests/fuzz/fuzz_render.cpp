// fuzz_render: what `traceml report` draws from a telemetry JSONL file it
// accepted, which fuzz_jsonl stops short of: the plot data, the HTML page
// (render_html, with the diagnosis's step window and without it) and the
// Chrome trace of `traceml export --format chrome-trace`. The input is a
// whole file; one the reader rejects ends the run. Promises checked, each
// aborting when broken (and a loop that never ends is a libFuzzer timeout,
// -timeout=10 in scripts/fuzz.sh):
// - none of them throws;
// - every axis the plots draw has 2 to target + 3 finite ascending ticks
//   (report/html/svg_plot.hpp), whatever the values: near-equal, tiny, huge;
// - the page is one whole document: it ends with </html>, and no
//   coordinate in it reads nan or inf;
// - the trace is JSON whose slices have a duration >= 0.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/summary.hpp"
#include "report/chrome_trace.hpp"
#include "report/final_summary.hpp"
#include "report/html/html_report.hpp"
#include "report/html/plot_data.hpp"
#include "report/html/svg_plot.hpp"
#include "report/summary_view.hpp"
#include "store/jsonl_reader.hpp"

namespace {

using namespace traceml;

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "fuzz_render: %s\n", why.c_str());
  std::abort();
}

void check_ticks(double lo, double hi, int target, const char* axis) {
  const std::vector<double> t = report::svg::nice_ticks(lo, hi, target);
  const auto bad = [&](const std::string& what) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "nice_ticks(%.17g, %.17g, %d) of %s: ", lo, hi, target, axis);
    broken(buf + what);
  };
  if (t.size() < 2 || t.size() > std::size_t(target) + 3) bad(std::to_string(t.size()) + " ticks");
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!std::isfinite(t[i])) bad("a tick that is not finite");
    if (i > 0 && !(t[i] > t[i - 1])) bad("ticks not ascending");
  }
}

/// The ranges the plots of `d` put on an axis (html_plots.cpp), each
/// through nice_ticks' promises.
void check_axes(const report::PlotData& d) {
  std::optional<double> lo, hi;
  for (const auto& r : d.ranks) {
    if (!r.step_quantiles) continue;
    lo = std::min(lo.value_or(r.step_quantiles->p5), r.step_quantiles->p5);
    hi = std::max(hi.value_or(r.step_quantiles->p95), r.step_quantiles->p95);
  }
  if (lo) check_ticks(*lo, *hi, 5, "the step distribution");
  const std::size_t n = d.columns.columns();
  double top = 0.0;
  for (std::size_t c = 0; c < n; ++c) {
    double total = 0.0;
    for (const auto& p : d.phases)
      total += c < p.size() ? p[c] : 0.0;
    top = std::max(top, total);
  }
  check_ticks(0.0, top, 5, "the phase stack");
  for (const report::SeriesSet* set :
       {&d.memory, &d.host_cpu, &d.gpu_util, &d.process_cpu, &d.process_rss}) {
    double most = 0.0;
    for (const auto& s : set->series)
      for (const auto& v : s.y)
        if (v) most = std::max(most, *v);
    check_ticks(0.0, most, 5, "a line plot's values");
    check_ticks(set->x_first, set->x_first + set->x_span, 6, "a line plot's x axis");
  }
}

void check_page(const std::string& html) {
  static constexpr std::string_view kEnd = "</html>\n";
  if (html.size() < kEnd.size() || html.compare(html.size() - kEnd.size(), kEnd.size(), kEnd) != 0)
    broken("a page that does not end with </html>");
  // Coordinates are written by svg::num, which must never print a value
  // that is not finite.
  for (const char* bad : {"=\"nan\"", "=\"inf\"", "=\"-nan\"", "=\"-inf\""}) {
    if (html.find(bad) != std::string::npos) broken(std::string("the page writes '") + bad + "'");
  }
}

void check_trace(const model::Telemetry& t, report::StepRange range) {
  std::ostringstream out;
  (void)report::write_chrome_trace(t, range, "traceml fuzz", out);
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(out.str());
  } catch (const nlohmann::json::exception& e) {
    broken(std::string("the trace is not JSON: ") + e.what());
  }
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    if (!e.at("dur").is_number() || e.at("dur").get<double>() < 0.0)
      broken("a slice with a negative or missing duration");
  }
}

template <class Step>
void guarded(const char* what, Step step) {
  try {
    step();
  } catch (const std::exception& e) {
    broken(std::string(what) + " threw: " + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<store::ReadResult> parsed;
  try {
    parsed = store::parse_telemetry_jsonl(text, "fuzz.jsonl");
  } catch (const store::TelemetryError&) {
    return 0;  // fuzz_jsonl holds the reader's promises
  }
  const model::Telemetry& t = parsed->telemetry;
  guarded("the report", [&] {
    const analysis::Summary s = analysis::summarize(t);
    const report::FinalSummary f =
        report::build_final_summary(s, "2026-01-01T00:00:00Z", "fuzz/final_summary.json");
    const report::SummaryView view = report::view_summary(f.json);
    const report::PlotData with_window = report::plot_data(view, t, s.step_window.get());
    check_axes(with_window);
    check_axes(report::plot_data(view, t));
    report::HtmlOptions opts;
    opts.run_dir = "fuzz";
    opts.step_window = s.step_window.get();
    check_page(report::render_html(f.json, &t, opts));
    check_page(report::render_html(f.json, &t));
    check_page(report::render_html(f.json, nullptr));
  });
  guarded("the trace", [&] {
    // The default range of `traceml export` (its latest steps of the
    // window), then every step the file has.
    if (const auto range = report::default_timeline_steps(t, analysis::Options{}.window, 1000))
      check_trace(t, *range);
    std::optional<report::StepRange> all;
    for (const model::StepRecord r : t.steps) {
      const std::int64_t step = r.step;
      all = report::StepRange{std::min(all ? all->first : step, step),
                              std::max(all ? all->last : step, step)};
    }
    if (all) check_trace(t, *all);
  });
  return 0;
}
