// The report's plots and trace stay bounded on valid but extreme telemetry
// (issue 30): each test is a spot that went wrong before -- a heatmap cell
// of infinity indexed far outside its colour levels, step ids near 2^63
// overflowed the memory plot's column arithmetic, a single sample put an
// x label at NaN, durations near the largest double overflowed the trace's
// nanoseconds.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/degenerate_runs.hpp"
#include "report/chrome_trace.hpp"
#include "report/html/html_plots.hpp"
#include "report/html/plot_data.hpp"
#include "report/summary_view.hpp"
#include "store/jsonl_reader.hpp"

namespace traceml::report {
namespace {

using testing::degenerate::Writer;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kMaxStep = std::numeric_limits<std::int64_t>::max();

model::Telemetry read(const Writer& w) {
  return store::parse_telemetry_jsonl(w.str(), "test.jsonl").telemetry;
}

PlotData plots_of(const model::Telemetry& t) {
  static const json_read::Json summary = json_read::Json::object();
  return plot_data(view_summary(summary), t);
}

// Steps of the largest doubles sum to an infinite step time. The heatmap's
// scale then ended at infinity, a cell's level was inf / inf = NaN, and
// lround(NaN) indexed its colour paths 2^63 entries out (a crash).
TEST(PlotBounds, HeatmapWithInfiniteCells) {
  PlotData d;
  d.clock = "cpu";
  d.steps = {1, 2, 3};
  d.columns = make_buckets(3);
  RankSteps r;
  r.label = "R0";
  r.step_ms = std::vector<double>{kInf, 1.0, 2.0};
  r.input_ms = std::vector<double>{kInf, kInf, kInf};
  r.step_quantiles = Quantiles{1.0, 1.5, 2.0, kInf, kInf, kInf};
  d.ranks.push_back(r);
  const std::string html = plots_html(d, std::nullopt);
  EXPECT_NE(html.find("id=\"plot-heatmap-step\""), std::string::npos);
  EXPECT_NE(html.find("id=\"plot-heatmap-input\""), std::string::npos);
  EXPECT_EQ(html.find("nan"), std::string::npos);
}

// The memory plot cuts the span of step ids into columns by
// (step - first) * columns / span, which overflowed int64 for ids near
// 2^63 (and put every step into column 0 where it wrapped).
TEST(PlotBounds, MemoryColumnsOfStepIdsNear2To63) {
  Writer w("ids");
  w.rank(0);
  double ts = 1e9;
  for (const std::int64_t s : {std::int64_t(1), std::int64_t(2), kMaxStep / 2, kMaxStep}) {
    w.flat_step(0, s, ts += 1.0, 10.0, 1.0);
    w.memory(0, s, double(s), 1.0);
  }
  const PlotData d = plots_of(read(w));
  ASSERT_EQ(d.memory.columns, kMaxColumns);
  ASSERT_EQ(d.memory.series.size(), 1u);
  const auto& y = d.memory.series[0].y;
  ASSERT_EQ(y.size(), kMaxColumns);
  EXPECT_EQ(y[0], 2.0);  // steps 1 and 2, the larger
  EXPECT_EQ(y[119], double(kMaxStep / 2));
  EXPECT_EQ(y[kMaxColumns - 1], double(kMaxStep));
  int present = 0;
  for (const auto& v : y)
    present += v ? 1 : 0;
  EXPECT_EQ(present, 3);
}

// One system sample spans 0 s: every x tick's fraction was 0 / 0, which
// passed the range check and drew a label at x = 0, left of the plot.
TEST(PlotBounds, ASingleSampleDrawsNoLabelAtNaN) {
  Writer w("one_sample");
  w.rank(0);
  for (std::int64_t s = 1; s <= 5; ++s)
    w.flat_step(0, s, 1e9 + double(s), 10.0, 1.0);
  w.system(0, 1e9, 50.0, 90.0, 1e10);
  const std::string html = plots_html(plots_of(read(w)), std::nullopt);
  const auto at = html.find("id=\"plot-host-cpu\"");
  ASSERT_NE(at, std::string::npos);
  const std::string figure = html.substr(at, html.find("</figure>", at) - at);
  EXPECT_EQ(figure.find("x1=\"0\" x2=\"0\""), std::string::npos) << figure;
}

// Durations near the largest doubles, begins at +-1e9 ms (the most the
// format allows): the trace's nanoseconds went through llround of values
// beyond int64 and sums that overflowed. Every time now stays within a few
// 2^59 ns of the origin, and no duration is negative.
TEST(PlotBounds, ChromeTraceOfExtremeDurations) {
  Writer w("extreme");
  w.rank(0);
  for (std::int64_t s = 1; s <= 4; ++s) {
    w.step(0, s, 1e9 + double(s),
           {{"input_wait", 1.0, 1.0, -1e9},
            {"forward", DBL_MAX, DBL_MAX, 1e9},
            {"backward", 5.0, 1e300, 0.0},
            {"traced_step_time", 1e300, DBL_MAX}});
    w.flat_step(0, s + 4, 1e9 + double(s) + 10, 1e300, 1e300);
  }
  std::ostringstream out;
  const TimelineStats stats = write_chrome_trace(read(w), {1, 8}, "test", out);
  EXPECT_EQ(stats.steps, 8);
  const auto trace = nlohmann::json::parse(out.str());
  const double most_us = 576460752303423488.0 / 1e3 * 8;  // 2^59 ns, eight of them
  int slices = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ++slices;
    const double ts = e.at("ts").get<double>();
    const double dur = e.at("dur").get<double>();
    EXPECT_GE(dur, 0.0);
    EXPECT_LE(std::fabs(ts), most_us) << e.dump();
    EXPECT_LE(dur, most_us) << e.dump();
  }
  EXPECT_GT(slices, 8);
}

}  // namespace
}  // namespace traceml::report
