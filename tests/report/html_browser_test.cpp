// final_summary.html in a real browser (headless Chromium): the verdict and
// the plots are in the DOM it builds, and its console stays silent. Two
// control pages show that the console check sees what it must: a script
// error, and anything the page's security policy refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "../support/chromium.hpp"
#include "../support/html_fixtures.hpp"
#include "report/html/html_report.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines)
    s += l + "\n";
  return s;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

std::string straggler_page() {
  RunShape shape;
  shape.ranks = 8;
  shape.steps = 300;
  shape.slow_rank = 5;
  shape.spike = {2, 200};
  const model::Telemetry t = synthetic_run(shape);
  return report::render_html(summary_of(t, shape).json, &t, {"logs/run"});
}

TEST(HtmlBrowser, ThePageRendersItsVerdictAndPlotsWithASilentConsole) {
  TRACEML_NEED_CHROMIUM();
  TempDir dir;
  const fs::path page = dir.path() / "final_summary.html";
  std::ofstream(page, std::ios::binary) << straggler_page();
  const Rendered r = render_in_chromium(page);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_TRUE(r.console.empty()) << joined(r.console);
  EXPECT_NE(r.dom.find("Verdict: INPUT STRAGGLER"), std::string::npos) << r.dom.substr(0, 2000);
  EXPECT_NE(r.dom.find("R5/N0 waits"), std::string::npos);
  EXPECT_EQ(count(r.dom, "<svg"), 9u + 2u);  // nine plots, two heatmap grids inside
  EXPECT_EQ(count(r.dom, "<figure"), 9u);
  EXPECT_NE(r.dom.find("id=\"plot-heatmap-input\""), std::string::npos);
  EXPECT_NE(r.dom.find("Full evidence: logs/run/final_summary.json"), std::string::npos);
}

TEST(HtmlBrowser, TheConsoleCheckSeesAScriptError) {
  TRACEML_NEED_CHROMIUM();
  TempDir dir;
  const fs::path page = dir.path() / "broken.html";
  std::ofstream(page) << "<!DOCTYPE html><html><body><p>x</p><script>console.error('deliberate');"
                         "no_such_function();</script></body></html>";
  const Rendered r = render_in_chromium(page);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const std::string console = joined(r.console);
  EXPECT_NE(console.find("deliberate"), std::string::npos) << r.log;
  EXPECT_NE(console.find("no_such_function is not defined"), std::string::npos) << r.log;
}

TEST(HtmlBrowser, WhatThePagesPolicyRefusesShowsOnTheConsole) {
  TRACEML_NEED_CHROMIUM();
  // A script or an external image slipped into the page (a renderer bug):
  // the policy refuses both, and says so where the check looks.
  std::string html = straggler_page();
  const auto body = html.rfind("</body>");
  ASSERT_NE(body, std::string::npos);
  html.insert(body,
              "<script>document.title = 'ran';</script><img src=\"https://example.com/x.png\">");
  TempDir dir;
  const fs::path page = dir.path() / "injected.html";
  std::ofstream(page, std::ios::binary) << html;
  const Rendered r = render_in_chromium(page);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const std::string console = joined(r.console);
  EXPECT_NE(console.find("Content Security Policy"), std::string::npos) << r.log;
  EXPECT_GE(r.console.size(), 2u) << console;
  EXPECT_EQ(r.dom.find("<title>ran</title>"), std::string::npos);
}

}  // namespace
}  // namespace traceml::testing
