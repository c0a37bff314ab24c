// Every degenerate run of tests/support/degenerate_runs.hpp through what
// `traceml report` and `traceml export --format chrome-trace` do with it, in
// process (the CLI's own test, tests/cli/degenerate_report_cli_test.cpp,
// runs the binary with a time limit): the reader accepts it, the summary,
// the text, the page and the trace are made, and the page is whole.
//
// TRACEML_WRITE_DEGENERATE_RUNS=DIR also writes each run to DIR/<name>.jsonl
// (how tests/fuzz/corpus/fuzz_render/ got its degenerate seeds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/degenerate_runs.hpp"
#include "analysis/summary.hpp"
#include "report/chrome_trace.hpp"
#include "report/final_summary.hpp"
#include "report/html/html_report.hpp"
#include "store/jsonl_reader.hpp"

namespace traceml::report {
namespace {

using testing::DegenerateRun;

class DegenerateRuns : public ::testing::TestWithParam<DegenerateRun> {};

TEST_P(DegenerateRuns, ReportPageAndTraceAreMade) {
  const DegenerateRun& run = GetParam();
  if (const char* dir = std::getenv("TRACEML_WRITE_DEGENERATE_RUNS"))
    std::ofstream(std::filesystem::path(dir) / (run.name + ".jsonl"), std::ios::binary)
        << run.jsonl;
  const store::ReadResult read = store::parse_telemetry_jsonl(run.jsonl, run.name + ".jsonl");
  const model::Telemetry& t = read.telemetry;
  ASSERT_GT(t.steps.size(), 0u);

  const analysis::Summary s = analysis::summarize(t);
  const FinalSummary f = build_final_summary(s, "2026-01-01T00:00:00Z", "x/final_summary.json");
  EXPECT_FALSE(f.text.empty());
  HtmlOptions opts;
  opts.step_window = s.step_window.get();
  const std::string html = render_html(f.json, &t, opts);
  EXPECT_NE(html.find("<section id=\"plots\">"), std::string::npos);
  EXPECT_EQ(html.substr(html.size() - 8), "</html>\n");

  std::optional<StepRange> all;
  for (const model::StepRecord r : t.steps) {
    const std::int64_t step = r.step;
    all =
        StepRange{std::min(all ? all->first : step, step), std::max(all ? all->last : step, step)};
  }
  std::ostringstream trace;
  const TimelineStats stats = write_chrome_trace(t, *all, "test", trace);
  EXPECT_GT(stats.steps, 0);
  const auto json = nlohmann::json::parse(trace.str());
  for (const auto& e : json.at("traceEvents")) {
    if (e.at("ph") == "X") {
      ASSERT_GE(e.at("dur").get<double>(), 0.0) << e.dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DegenerateRuns, ::testing::ValuesIn(testing::degenerate_runs()),
                         [](const ::testing::TestParamInfo<DegenerateRun>& p) {
                           return p.param.name;
                         });

}  // namespace
}  // namespace traceml::report
