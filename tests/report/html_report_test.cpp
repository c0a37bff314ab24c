// final_summary.html (report/html_report): the page from a summary and a
// synthetic run: the verdict, every plot, escaping of hostile text, no
// external resource, the page of a summary alone, the column bound and the
// size bound of a 64-rank x 20,000-step run; and write_run_report, which must
// never lose the JSON and text to a page it cannot write.
#include "report/html/html_report.hpp"

#include <gtest/gtest.h>

#include "traceml/version.hpp"

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>

#include "../support/html_fixtures.hpp"
#include "../support/subprocess.hpp"
#include "report/final_summary.hpp"
#include "report/html/html_text.hpp"
#include "report/html/plot_data.hpp"
#include "report/html/svg_plot.hpp"

namespace traceml::report {
namespace {

namespace fs = std::filesystem;
using testing::RunShape;
using testing::summary_of;
using testing::synthetic_run;

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

/// x of a fraction of a chart's plot width, as the page writes it.
std::string svg_x(double fraction) {
  return svg::num(svg::kLeft + fraction * (svg::kWidth - svg::kRight - svg::kLeft));
}

TEST(HtmlText, EscapesMarkupQuotesAndControlCharacters) {
  EXPECT_EQ(escape_html("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(escape_html("red\x1b[31m"), "red\\x1b[31m");
  EXPECT_EQ(escape_html("bad \xff byte"), "bad \xEF\xBF\xBD byte");  // U+FFFD
  EXPECT_EQ(escape_html("two\nlines\tkept"), "two\nlines\tkept");
}

TEST(PlotBuckets, CoverEveryValueOnceInAtMostTheColumnLimit) {
  const Buckets b = make_buckets(20000);
  ASSERT_EQ(b.columns(), kMaxColumns);
  EXPECT_EQ(b.starts.front(), 0u);
  EXPECT_EQ(b.starts.back(), 20000u);
  for (std::size_t c = 0; c < b.columns(); ++c) {
    const std::size_t n = b.starts[c + 1] - b.starts[c];
    EXPECT_TRUE(n == 20000 / kMaxColumns || n == 20000 / kMaxColumns + 1) << c << ": " << n;
  }
  EXPECT_EQ(make_buckets(7).columns(), 7u);  // short runs: a column per step
  EXPECT_EQ(make_buckets(0).columns(), 0u);
}

TEST(PlotBuckets, MeanAndMaxOfEachColumn) {
  const Buckets b = make_buckets(6, 3);
  const std::vector<double> v = {1, 3, 10, 20, 5, 5};
  EXPECT_EQ(bucket_mean(v, b), (std::vector<double>{2, 15, 5}));
  EXPECT_EQ(bucket_max(v, b), (std::vector<double>{3, 20, 5}));
}

TEST(HtmlReport, AStragglerRunHasTheVerdictAndEveryPlot) {
  RunShape shape;
  shape.ranks = 4;
  shape.steps = 200;
  shape.slow_rank = 2;
  shape.spike = {1, 150};  // rank 1's step 150 takes 10x
  const model::Telemetry t = synthetic_run(shape);
  const FinalSummary f = summary_of(t, shape);
  const std::string page = render_html(f.json, &t, {"logs/run"});

  EXPECT_NE(page.find("<section id=\"verdict\" class=\"critical\">"), std::string::npos);
  EXPECT_NE(page.find("Verdict: INPUT STRAGGLER"), std::string::npos);
  EXPECT_NE(page.find("<b>Why:</b> R2/N0 waits"), std::string::npos);
  for (const char* id :
       {"plot-phases", "plot-heatmap-step", "plot-heatmap-input", "plot-distribution",
        "plot-memory", "plot-host-cpu", "plot-gpu-util", "plot-process-cpu", "plot-process-rss"})
    EXPECT_NE(page.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_EQ(count(page, "<figure"), 9u);
  // The rank the verdict names is marked in both heatmaps' labels.
  EXPECT_EQ(count(page, "class=\"yl culprit\""), 2u);
  // One row per rank, one column per step (200 steps fit).
  EXPECT_EQ(count(page, "viewBox=\"0 0 200 4\""), 2u);
  // The spike: a mark over the step-time heatmap, one on the phase plot
  // only when it is the shown rank's, and the list.
  EXPECT_NE(page.find("1 step on 1 rank took 3x its rank's median step or more"),
            std::string::npos);
  EXPECT_NE(page.find("<title>steps 150-150: 1 spike (R1/N0)</title>"), std::string::npos);
  // The slow window the summary names is marked.
  ASSERT_TRUE(f.json["step_time"]["global"].contains("slow_window"));
  EXPECT_NE(page.find("class=\"band\""), std::string::npos);
  EXPECT_EQ(count(page, "class=\"window\""), 2u);
  // The text report closes the page, the page it names included.
  EXPECT_NE(page.find("Full evidence: logs/run/final_summary.json · logs/run/final_summary.html"),
            std::string::npos);
  // The footer names the producer, the schema version and when (issue 47:
  // the schema, a number, was left out).
  EXPECT_NE(page.find(std::string("<footer>traceml-cpp ") + traceml::version() +
                      " \u00B7 schema 1.7 \u00B7 "),
            std::string::npos)
      << page.substr(page.rfind("<footer>"));
  // A pure function of its input.
  EXPECT_EQ(render_html(f.json, &t, {"logs/run"}), page);
  // Drawn from the diagnosis's own alignment of the steps (as at the end of
  // a run), the page is the same.
  ASSERT_TRUE(f.step_window);
  EXPECT_EQ(render_html(f.json, &t, {"logs/run", f.step_window.get()}), page);
}

TEST(HtmlReport, StallsTheRunRecordedAreMarkedAtTheirStepAndTime) {
  RunShape shape;
  shape.ranks = 2;
  shape.steps = 120;
  const model::Telemetry t = synthetic_run(shape);
  FinalSummary f = summary_of(t, shape);
  // A run block as `traceml run` writes it; step 100 ends at 1.7e9 + 15 s.
  f.json["run"] = {{"status", "completed"},
                   {"stalls",
                    {{{"rank", 1},
                      {"kind", "stalled"},
                      {"step", 100},
                      {"phase", "backward"},
                      {"start", 1.7e9 + 9.0},
                      {"duration_s", 6.0},
                      {"resumed", true},
                      {"others_waiting", 1}}}}};
  const std::string page = render_html(f.json, &t);
  const std::string title = "<title>stall: R1 stalled for 6.0 s at step 100, backward</title>";
  // The phase plot and the step-time heatmap at step 100; the four sample
  // plots over its six seconds.
  EXPECT_EQ(count(page, "<line class=\"stall\""), 2u);
  EXPECT_EQ(count(page, "<rect class=\"stallband\""), 4u);
  EXPECT_EQ(count(page, title), 6u);
  // Steps 1..120 in 120 columns: step 100 is column 99, at its middle.
  EXPECT_NE(page.find("<line class=\"stall\" x1=\"" + svg_x((99 + 0.5) / 120.0) + "\""),
            std::string::npos);
}

TEST(HtmlReport, TheRepresentativeRankIsTheTextReportsRank) {
  RunShape shape;
  shape.ranks = 2;
  shape.steps = 120;
  shape.slow_rank = 1;
  const model::Telemetry t = synthetic_run(shape);
  const FinalSummary f = summary_of(t, shape);
  ASSERT_NE(f.text.find("STEP TIMING (Median R0/N0)"), std::string::npos) << f.text;
  const std::string page = render_html(f.json, &t);
  EXPECT_NE(page.find("Where a step&#39;s time goes: R0/N0"), std::string::npos);
}

TEST(HtmlReport, TextFromTheRunIsEscapedEverywhere) {
  RunShape shape;
  shape.ranks = 2;
  shape.steps = 120;
  shape.slow_rank = 1;
  shape.hostname = "<script>alert(1)</script>";
  shape.run_name = "\"><img src=x onerror=alert(1)>\x1b[2J";
  const model::Telemetry t = synthetic_run(shape);
  const FinalSummary f = summary_of(t, shape);
  const std::string page = render_html(f.json, &t);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_EQ(page.find('\x1b'), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;\\x1b[2J"), std::string::npos);
}

TEST(HtmlReport, ThePageLoadsNothing) {
  RunShape shape;
  shape.ranks = 2;
  shape.steps = 120;
  const model::Telemetry t = synthetic_run(shape);
  const std::string page = render_html(summary_of(t, shape).json, &t);
  EXPECT_EQ(page.find("http:"), std::string::npos);
  EXPECT_EQ(page.find("https:"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find(" href="), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  // And the browser refuses anything that would (the browser test checks it).
  EXPECT_NE(page.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
}

TEST(HtmlReport, TheHeaderSaysTheRunsDurationNotTheSpanOfItsSamples) {
  // DECISIONS 16: 2.77 s of run whose 1 Hz samples span 1.8 s.
  RunShape shape;
  shape.ranks = 1;
  shape.steps = 60;
  const model::Telemetry t = synthetic_run(shape);
  FinalSummary f = summary_of(t, shape);
  f.json["duration_s"] = 1.8;
  f.json["run_duration_s"] = 2.77;
  const std::string page = render_html(f.json, nullptr);
  const auto header = page.find("<header>");
  ASSERT_NE(header, std::string::npos);
  const std::string head = page.substr(header, page.find("</header>") - header);
  EXPECT_NE(head.find(" \u00B7 2.8s</p>"), std::string::npos) << head;
  EXPECT_EQ(head.find("1.8s"), std::string::npos) << head;
}

TEST(HtmlReport, APageFromASummaryAloneSaysThatPlotsNeedTheRunDirectory) {
  RunShape shape;
  shape.ranks = 2;
  shape.steps = 120;
  shape.slow_rank = 1;
  const model::Telemetry t = synthetic_run(shape);
  const FinalSummary f = summary_of(t, shape);
  const std::string page = render_html(f.json, nullptr);
  EXPECT_NE(page.find("Verdict: INPUT STRAGGLER"), std::string::npos);
  EXPECT_NE(page.find("Plots need the run directory"), std::string::npos);
  EXPECT_EQ(page.find("<svg"), std::string::npos);
  // The tables: the text report as written.
  EXPECT_NE(page.find("STEP TIMING (Median R0/N0)"), std::string::npos);
}

TEST(HtmlReport, ASixtyFourRankTwentyThousandStepRunStaysUnderTwoMegabytes) {
  RunShape shape;
  shape.ranks = 64;
  shape.steps = 20000;
  shape.slow_rank = 37;
  shape.window = 20000;
  shape.noise = 0.5;  // every cell its own colour: the heatmaps' worst case
  shape.spike = {5, 12345};
  const model::Telemetry t = synthetic_run(shape);
  const FinalSummary f = summary_of(t, shape);
  const std::string page = render_html(f.json, &t);
  std::cout << "64 ranks x 20,000 steps: " << page.size() << " bytes\n";
  RecordProperty("page_bytes", std::to_string(page.size()));
  EXPECT_LE(page.size(), 2u * 1024 * 1024);
  // Every rank has its row, in at most kMaxColumns columns.
  EXPECT_EQ(count(page, "viewBox=\"0 0 " + std::to_string(kMaxColumns) + " 64\""), 2u);
  EXPECT_NE(page.find("R37/N4 \u25B6"), std::string::npos);  // the culprit's label
  // Each per-rank line has at most kMaxColumns points.
  const std::regex polyline("<polyline points=\"([^\"]*)\"");
  std::size_t lines = 0;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), polyline);
       it != std::sregex_iterator(); ++it, ++lines) {
    const std::string pts = (*it)[1];
    EXPECT_LE(count(pts, ","), kMaxColumns);
  }
  EXPECT_GE(lines, 3u * 64);  // memory, process CPU, process RSS
}

TEST(WriteRunReport, TheTextNamesThePageOnlyWhenItWasWritten) {
  RunShape shape;
  shape.ranks = 2;
  shape.steps = 120;
  const model::Telemetry t = synthetic_run(shape);
  testing::TempDir dir;
  const fs::path run = dir.path() / "run";

  FinalSummary ok = summary_of(t, shape);
  write_run_report(ok, run.string(), &t, PageLimits{});
  EXPECT_FALSE(ok.html_error);
  EXPECT_TRUE(fs::is_regular_file(run / "final_summary.html"));
  EXPECT_NE(testing::read_file(run / "final_summary.txt")
                .find("Full evidence: logs/run/final_summary.json · logs/run/final_summary.html"),
            std::string::npos);

  // A directory in the page's place: the page cannot be written.
  const fs::path blocked = dir.path() / "blocked";
  fs::create_directories(blocked / "final_summary.html" / "x");
  FinalSummary f = summary_of(t, shape);
  write_run_report(f, blocked.string(), &t, PageLimits{});
  ASSERT_TRUE(f.html_error);
  EXPECT_NE(f.html_error->find("final_summary.html not written"), std::string::npos);
  const std::string txt = testing::read_file(blocked / "final_summary.txt");
  EXPECT_NE(txt.find("Full evidence: logs/run/final_summary.json\n"), std::string::npos) << txt;
  EXPECT_EQ(txt.find("final_summary.html"), std::string::npos);
  const std::string json = testing::read_file(blocked / "final_summary.json");
  EXPECT_EQ(nlohmann::ordered_json::parse(json)["text"].get<std::string>() + "\n", txt);
}

}  // namespace
}  // namespace traceml::report
