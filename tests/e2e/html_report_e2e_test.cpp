// End-to-end: a real `traceml run` of the LibTorch DDP example with a slow
// input rank writes final_summary.html beside the JSON and text; `traceml
// report RUN_DIR` writes the same page again; and headless Chromium renders
// it with the verdict and the plots and a silent console.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../support/chromium.hpp"
#include "../support/examples.hpp"
#include "../support/subprocess.hpp"
#include "../support/traceml_run.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

TEST(HtmlReportE2E, ARealRunWritesAPageThatRendersWithItsVerdictAndPlots) {
  TempDir logs;
  const auto run = run_process(traceml_run_argv(
      kCli, logs.path(), "straggler", 2, {"--interval", "0.2"},
      {kExamples + "/ddp", "--steps", "120", "--slow-rank", "1", "--slow-input-ms", "15"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const fs::path dir = logs.path() / "straggler";
  const std::string page = read_file(dir / "final_summary.html");
  ASSERT_FALSE(page.empty()) << run.err;
  EXPECT_NE(page.find("Verdict: INPUT STRAGGLER"), std::string::npos);
  // The text names the page, on screen and in the file.
  const std::string named = "/straggler/final_summary.json · " +
                            fs::weakly_canonical(dir).string() + "/final_summary.html\n";
  EXPECT_NE(run.out.find(named), std::string::npos) << run.out;
  EXPECT_NE(read_file(dir / "final_summary.txt").find(named), std::string::npos);

  // Rebuilt from the run database: the same page.
  const auto rebuilt = run_process({kCli, "report", dir.string()});
  ASSERT_EQ(rebuilt.exit_code, 0) << rebuilt.err;
  EXPECT_EQ(read_file(dir / "final_summary.html"), page);

  TRACEML_NEED_CHROMIUM();
  const Rendered r = render_in_chromium(dir / "final_summary.html");
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_TRUE(r.console.empty()) << r.log;
  EXPECT_NE(r.dom.find("Verdict: INPUT STRAGGLER"), std::string::npos);
  EXPECT_NE(r.dom.find("R1/N0 waits"), std::string::npos);
  for (const char* id : {"plot-phases", "plot-heatmap-step", "plot-heatmap-input",
                         "plot-distribution", "plot-process-cpu", "plot-process-rss"})
    EXPECT_NE(r.dom.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_GE(count(r.dom, "<svg"), 6u);
  // The rank the verdict names is marked in the heatmaps.
  EXPECT_NE(r.dom.find("R1/N0 \u25B6"), std::string::npos);
}

}  // namespace
}  // namespace traceml::testing
