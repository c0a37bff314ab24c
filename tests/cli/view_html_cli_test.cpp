// `traceml view SUMMARY --html [OUT]`: the page of a summary alone, written
// beside the summary or to OUT; bad paths are one error line and exit 2,
// and a good file is never replaced by a failed or lesser page.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../support/cli_expect.hpp"
#include "../support/subprocess.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCli = TRACEML_CLI_PATH;
const fs::path kSummary = fs::path(TRACEML_TEST_DATA_DIR) / "golden" / "expected" /
                          "ddp_input_straggler" / "final_summary.json";

class ViewHtml : public ::testing::Test {
 protected:
  /// A copy of a golden summary at dir/name.
  fs::path summary_at(const std::string& name) {
    const fs::path p = dir_.path() / name;
    fs::create_directories(p.parent_path());
    fs::copy_file(kSummary, p, fs::copy_options::overwrite_existing);
    return p;
  }
  TempDir dir_;
};

TEST_F(ViewHtml, WithoutAValueWritesTheStemDotHtmlBesideTheSummary) {
  const fs::path s = summary_at("run.json");
  const auto r = run_process({kCli, "view", s.string(), "--html"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path page = dir_.path() / "run.html";
  EXPECT_EQ(r.err, "traceml: wrote HTML report: " + page.string() + "\n");
  EXPECT_EQ(r.out, "");
  const std::string html = read_file(page);
  EXPECT_NE(html.find("Verdict: INPUT STRAGGLER"), std::string::npos);
  EXPECT_NE(html.find("Plots need the run directory"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  // The tables: the summary's own text.
  EXPECT_NE(html.find("STEP TIMING (Median R0/N0), GPU Clock"), std::string::npos);
}

TEST_F(ViewHtml, WithAValueWritesThere) {
  const fs::path s = summary_at("a/final_summary.json");
  const fs::path out = dir_.path() / "page.html";
  const auto r = run_process({kCli, "view", s.string(), "--html", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_file(out).find("Verdict: INPUT STRAGGLER"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_.path() / "a" / "final_summary.html"));
}

TEST_F(ViewHtml, AnUnwritablePathIsOneErrorLine) {
  const fs::path s = summary_at("run.json");
  expect_one_error_line(run_process({kCli, "view", s.string(), "--html",
                                     (dir_.path() / "no/such/dir/x.html").string()}),
                        "choose a writable --html path");
}

TEST_F(ViewHtml, TheSummaryItselfIsNeverOverwritten) {
  const fs::path s = summary_at("run.json");
  expect_one_error_line(run_process({kCli, "view", s.string(), "--html", s.string()}),
                        "is the summary itself");
  EXPECT_EQ(read_file(s), read_file(kSummary));
}

TEST_F(ViewHtml, ABadSummaryLeavesAGoodPageAlone) {
  const fs::path bad = dir_.path() / "bad.json";
  std::ofstream(bad) << "{ not json";
  const fs::path out = dir_.path() / "page.html";
  std::ofstream(out) << "GOOD";
  const auto r = run_process({kCli, "view", bad.string(), "--html", out.string()});
  expect_one_error_line(r, "bad.json");
  EXPECT_EQ(read_file(out), "GOOD");
}

TEST_F(ViewHtml, ARunsOwnPageWithPlotsIsNotReplacedByDefault) {
  const fs::path s = summary_at("logs/run/final_summary.json");
  std::ofstream(dir_.path() / "logs/run/telemetry.db") << "";
  std::ofstream(dir_.path() / "logs/run/final_summary.html") << "PLOTS";
  const fs::path run = dir_.path() / "logs/run";
  expect_one_error_line(run_process({kCli, "view", run.string(), "--html"}),
                        "pass --html OUT to write this summary's page elsewhere");
  EXPECT_EQ(read_file(run / "final_summary.html"), "PLOTS");
  // Named explicitly, the page goes where it is asked.
  const auto r = run_process({kCli, "view", run.string(), "--html", (run / "other.html").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(ViewHtml, WithoutHtmlTheTextIsPrintedAsBefore) {
  const fs::path s = summary_at("run.json");
  const auto r = run_process({kCli, "view", s.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Verdict: INPUT STRAGGLER"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_.path() / "run.html"));
}

}  // namespace
}  // namespace traceml::testing
