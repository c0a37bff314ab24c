// End-to-end: every path the report prints works where the user is, and
// `traceml report RUN_DIR` writes the same bytes from any working directory
// (issue 47: the report kept the last two parts of a path, which failed when
// pasted from anywhere but the run's parent's parent).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../support/examples.hpp"
#include "../support/subprocess.hpp"
#include "../support/traceml_run.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();
const fs::path kGolden = fs::path(TRACEML_TEST_DATA_DIR) / "golden";

/// The path after "Full evidence: " and before " · " or the line's end.
std::string evidence_path(const std::string& text) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("Full evidence: ([^ \n]+)"))) return "";
  return m[1].str();
}

// A run whose logs directory is neither the working directory nor below it.
TEST(PathsE2e, ARunLoggedElsewhereNamesItsSummaryByAPathThatExists) {
  TempDir work;
  TempDir data;
  const fs::path logs = data.path() / "altlogs";
  const auto r = run_process(traceml_run_argv(kCli, logs, "alt", 1, {"--mode", "summary"},
                                              {kExamples + "/quickstart", "--steps", "60"}),
                             work.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string printed = evidence_path(r.out);
  ASSERT_FALSE(printed.empty()) << r.out;
  EXPECT_TRUE(fs::path(printed).is_absolute()) << printed;
  EXPECT_TRUE(fs::exists(fs::path(work.path()) / printed)) << printed;
  EXPECT_EQ(fs::weakly_canonical(printed),
            fs::weakly_canonical(logs / "alt" / "final_summary.json"));
}

// Below the working directory the terminal names it relatively, as TraceML
// does ("logs/<run>/final_summary.json"); the file names it absolutely.
TEST(PathsE2e, ARunBelowTheWorkingDirectoryIsNamedRelativelyOnTheTerminal) {
  TempDir work;
  const auto r = run_process(traceml_run_argv(kCli, "logs", "here", 1, {"--mode", "summary"},
                                              {kExamples + "/quickstart", "--steps", "60"}),
                             work.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(evidence_path(r.out), "logs/here/final_summary.json") << r.out;
  const std::string file = read_file(work.path() / "logs" / "here" / "final_summary.txt");
  EXPECT_EQ(evidence_path(file),
            (fs::weakly_canonical(work.path()) / "logs/here/final_summary.json").string());
}

// `traceml report` of a run three directories away: the same bytes as from
// the run's own parent, and the command it proposes runs when pasted.
TEST(PathsE2e, AReportFromAnotherDirectoryWritesTheSameBytesAndItsCommandRuns) {
  TempDir root;
  const fs::path run = root.path() / "deep" / "a" / "b" / "runx";
  const fs::path elsewhere = root.path() / "other" / "place";
  fs::create_directories(elsewhere);
  // A run directory (telemetry.db) from checked-in telemetry whose slow
  // window the report proposes to draw with `traceml export`.
  const auto made =
      run_process({kCli, "report", (kGolden / "data" / "residual_memory_creep.jsonl").string(),
                   "--out", run.string()});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string first_json = read_file(run / "final_summary.json");
  const std::string first_txt = read_file(run / "final_summary.txt");

  const auto again = run_process({kCli, "report", "../../deep/a/b/runx"}, elsewhere.string());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(read_file(run / "final_summary.json"), first_json);
  EXPECT_EQ(read_file(run / "final_summary.txt"), first_txt);

  // The timeline the report names exists, and its command for other steps
  // runs as printed (A:B filled in).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(again.out, m, std::regex("Timeline: ([^ ]+) "))) << again.out;
  EXPECT_TRUE(fs::exists(elsewhere / m[1].str())) << m[1].str();
  ASSERT_TRUE(std::regex_search(again.out, m, std::regex("traceml export ([^\n]+)"))) << again.out;
  std::vector<std::string> argv = {kCli, "export"};
  std::istringstream words(m[1].str());
  for (std::string w; words >> w;)
    argv.push_back(w == "A:B" ? "1:5" : w);
  const auto pasted = run_process(argv, elsewhere.string());
  EXPECT_EQ(pasted.exit_code, 0) << "traceml export " << m[1].str() << ": " << pasted.err;
  EXPECT_TRUE(fs::exists(elsewhere / "steps.json"));
}

}  // namespace
}  // namespace traceml::testing
