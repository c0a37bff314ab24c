// A command that exits 2 leaves no file behind (issue 30): for every command
// with an output, an output path that cannot be written (a missing directory,
// a file where a directory must go) is one `traceml: error:` line and exit 2,
// and the working directory and the output's neighbourhood hold exactly what
// they held before: nothing created, nothing overwritten.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../support/cli_expect.hpp"
#include "../support/subprocess.hpp"

namespace fs = std::filesystem;
using traceml::testing::expect_one_error_line;
using traceml::testing::ProcessResult;
using traceml::testing::read_file;
using traceml::testing::run_process;
using traceml::testing::TempDir;

namespace {

const std::string kCli = TRACEML_CLI_PATH;
const fs::path kData = fs::path(TRACEML_TEST_DATA_DIR) / "golden";
const fs::path kTelemetry = kData / "data" / "single_input_bound.jsonl";
const fs::path kA = kData / "expected" / "ddp_input_straggler" / "final_summary.json";
const fs::path kB = kData / "expected" / "ddp4_balanced" / "final_summary.json";

/// Every path under `dir` with its content ("<dir>" for directories).
std::map<std::string, std::string> tree(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    out[rel] = e.is_directory() ? "<dir>" : read_file(e.path());
  }
  return out;
}

class NoFileLeft : public ::testing::Test {
 protected:
  TempDir dir_;
  /// The working directory of the command; holds a file `blocker` (where a
  /// directory must go) and an earlier compare's output to leave alone.
  fs::path cwd() const { return dir_.path(); }
  void SetUp() override {
    std::ofstream(cwd() / "blocker") << "a file, not a directory";
    fs::create_directories(cwd() / "old");
    std::ofstream(cwd() / "old" / "cmp.json") << "OLD JSON";
    std::ofstream(cwd() / "old" / "cmp.txt") << "OLD TXT";
  }
  /// Runs traceml in cwd() and expects exit 2, one error line mentioning
  /// `contains`, and cwd() exactly as it was.
  void expect_refused(const std::vector<std::string>& args, const std::string& contains) {
    const auto before = tree(cwd());
    std::vector<std::string> argv = {kCli};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = run_process(argv, cwd().string());
    expect_one_error_line(r, contains);
    EXPECT_EQ(tree(cwd()), before) << "left behind or changed by: traceml " << args.front();
  }
};

TEST_F(NoFileLeft, CompareWithAMissingJunitDirectoryWritesNoCompareFiles) {
  // What a new user met: exit 2, and compare/A_vs_B.{json,txt} written.
  expect_refused({"compare", kA.string(), kB.string(), "--junit", "missing/dir/x.xml"},
                 "--junit missing/dir/x.xml: directory missing/dir does not exist");
  // Nor are the files of an earlier compare overwritten.
  expect_refused({"compare", kA.string(), kB.string(), "--output", "old/cmp", "--junit",
                  "missing/dir/x.xml", "--fail-on-regression"},
                 "--junit missing/dir/x.xml");
  expect_refused({"compare", kA.string(), kB.string(), "--output", "old/cmp", "--junit", "old"},
                 "--junit old: is a directory");
}

TEST_F(NoFileLeft, CompareWithAnUnwritableOutput) {
  expect_refused({"compare", kA.string(), kB.string(), "--output", "blocker/sub/cmp"},
                 "--output blocker/sub/cmp.json: blocker is not a directory");
  // The output may not replace a summary it compares.
  const fs::path a = cwd() / "old" / "a.json";
  fs::copy_file(kA, a);
  expect_refused({"compare", a.string(), kB.string(), "--output", a.string()},
                 "is one of the summaries compared");
  expect_refused(
      {"compare", a.string(), kB.string(), "--output", "new/cmp", "--junit", "old/a.json"},
      "--junit old/a.json: is one of the summaries compared");
}

TEST_F(NoFileLeft, ReportWithAnUnwritableOut) {
  expect_refused({"report", "--telemetry", kTelemetry.string(), "--out", "blocker/run"},
                 "--out blocker/run: blocker is not a directory");
  // Merging pieces into a new run directory: the merge is not written.
  expect_refused({"report", kTelemetry.string(), kTelemetry.string(), "--out", "blocker/run"},
                 "--out blocker/run");
}

TEST_F(NoFileLeft, AReportThatFailsOnALaterFileTakesBackTheEarlierOnes) {
  // final_summary.txt cannot replace a directory: the JSON, written first,
  // must go again.
  fs::create_directories(cwd() / "run" / "final_summary.txt");
  expect_refused({"report", "--telemetry", kTelemetry.string(), "--out", "run"},
                 "final_summary.txt");
  EXPECT_FALSE(fs::exists(cwd() / "run" / "final_summary.json"));
}

TEST_F(NoFileLeft, ExportWithAMissingOutDirectory) {
  // The output is checked before the run directory is read.
  fs::create_directories(cwd() / "run");
  expect_refused({"export", "run", "--out", "missing/t.jsonl"},
                 "--out missing/t.jsonl: directory missing does not exist");
  expect_refused({"export", "run", "--format", "chrome-trace", "--out", "blocker/t.json"},
                 "--out blocker/t.json: blocker is not a directory");
}

TEST_F(NoFileLeft, ViewWithAMissingHtmlDirectory) {
  expect_refused({"view", kA.string(), "--html", "missing/page.html"},
                 "--html missing/page.html: directory missing does not exist");
}

TEST_F(NoFileLeft, RunWithAnUnusableLogsDirOrRunName) {
  expect_refused({"run", "--logs-dir", "blocker/logs", "--", "/bin/true"},
                 "--logs-dir blocker/logs: blocker is not a directory");
  expect_refused({"run", "--logs-dir", ".", "--run-name", "blocker", "--", "/bin/true"},
                 "--run-name blocker: ./blocker is not a directory");
}

TEST_F(NoFileLeft, ServeWithAnUnwritableEnvFileOrLogsDir) {
  // Before, the collector had made ./logs (and a run in it) by the time the
  // env file failed.
  expect_refused({"serve", "--port", "0", "--env-file", "missing/env"},
                 "--env-file missing/env: directory missing does not exist");
  expect_refused({"serve", "--port", "0", "--logs-dir", "blocker/logs"},
                 "--logs-dir blocker/logs: blocker is not a directory");
}

}  // namespace
