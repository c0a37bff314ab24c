// End-to-end, the end of a run (issue 30): a page that cannot be drawn costs
// one line, never the summary or the run's end, under `traceml run` and in a
// rank traced on its own (the user's own process, whose exit and output must
// not change); and a rank that dies before its first step is said to have
// died, with its exit status, not asked whether it calls traceml::init().
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "../support/examples.hpp"
#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"
#include "../support/traceml_run.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();

std::size_t lines_with(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

const std::string kPageStopped =
    "traceml: warning: final_summary.html not written: drawing it took longer than 1 s "
    "(TRACEML_PAGE_TIMEOUT_S); it was stopped\n";

TEST(EndOfRun, ARankThatDiesBeforeItsFirstStepIsSaidToHaveDied) {
  TempDir logs;
  const auto r = run_process(traceml_run_argv(
      kCli, logs.path(), "early", 1, {"--mode", "summary"},
      {kExamples + "/ddp", "--steps", "50", "--slow-rank", "0", "--crash-at-step", "1"}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("traceml: warning: rank 0 died before its first step (exit code 3): "
                       "traceml::init() ran, no step was recorded\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("does the program call traceml::init()"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no rank sent telemetry"), std::string::npos) << r.err;
  const Json summary = load_json(logs.path() / "early" / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << r.err;
  EXPECT_EQ(summary["run"]["status"], "failed");
}

TEST(EndOfRun, AProgramThatNeverCallsInitIsStillAskedWhether) {
  TempDir logs;
  const auto r = run_process(
      traceml_run_argv(kCli, logs.path(), "plain", 1, {"--mode", "summary"}, {"/bin/true"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("traceml: warning: no rank sent telemetry: does the program call "
                       "traceml::init()?\n"),
            std::string::npos)
      << r.err;
}

TEST(EndOfRun, ARunWhosePageNeverEndsStillEndsWithItsSummary) {
  TempDir logs;
  std::vector<std::string> argv = {"/usr/bin/env", "TRACEML_TEST_PAGE_FAULT=hang",
                                   "TRACEML_PAGE_TIMEOUT_S=1"};
  const auto run = traceml_run_argv(kCli, logs.path(), "hang", 1, {"--mode", "summary"},
                                    {kExamples + "/quickstart", "--steps", "40"});
  argv.insert(argv.end(), run.begin(), run.end());
  const auto start = Clock::now();
  const auto r = run_process(argv);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(seconds, 120.0);
  EXPECT_EQ(lines_with(r.err, kPageStopped), 1u) << r.err;
  const fs::path dir = logs.path() / "hang";
  const Json summary = load_json(dir / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << r.err;
  EXPECT_TRUE(summary.contains("primary_diagnosis"));
  EXPECT_FALSE(fs::exists(dir / "final_summary.html"));
  const std::string txt = read_file(dir / "final_summary.txt");
  EXPECT_EQ(txt.find("final_summary.html"), std::string::npos) << txt;
  EXPECT_EQ(summary["text"].get<std::string>() + "\n", txt);
  EXPECT_EQ(r.out.find("final_summary.html"), std::string::npos) << r.out;
  const Json manifest = load_json(dir / "manifest.json");
  const auto& artifacts = manifest["artifacts"];
  EXPECT_NE(std::find(artifacts.begin(), artifacts.end(), "final_summary.json"), artifacts.end());
  EXPECT_EQ(std::find(artifacts.begin(), artifacts.end(), "final_summary.html"), artifacts.end());
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(EndOfRun, ARunsPageIsNamedInTheTextOnceItExists) {
  TempDir logs;
  const auto r = run_process(traceml_run_argv(kCli, logs.path(), "named", 1, {"--mode", "summary"},
                                              {kExamples + "/quickstart", "--steps", "40"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = logs.path() / "named";
  EXPECT_TRUE(fs::is_regular_file(dir / "final_summary.html"));
  const std::string txt = read_file(dir / "final_summary.txt");
  EXPECT_NE(txt.find(" · " + (fs::weakly_canonical(dir) / "final_summary.html").string()),
            std::string::npos)
      << txt;
  EXPECT_NE(r.out.find("final_summary.html"), std::string::npos) << r.out;
  EXPECT_EQ(load_json(dir / "final_summary.json")["text"].get<std::string>() + "\n", txt);
}

/// The user's own process: a rank traced on its own draws its page at exit.
/// A page that never ends changes neither its exit code nor its output.
TEST(EndOfRun, AStandaloneRankWhosePageNeverEndsExitsAsItWouldHave) {
  const std::vector<std::string> program = {kExamples + "/quickstart", "--steps", "40"};
  std::vector<std::string> untraced = {"/usr/bin/env", "TRACEML_DISABLED=1"};
  untraced.insert(untraced.end(), program.begin(), program.end());
  const auto expected = run_process(untraced);
  ASSERT_EQ(expected.exit_code, 0) << expected.err;

  TempDir cwd;
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "-u",
                                   "TRACEML_AGGREGATOR_PORT",
                                   "-u",
                                   "RANK",
                                   "-u",
                                   "WORLD_SIZE",
                                   "TRACEML_TEST_PAGE_FAULT=hang",
                                   "TRACEML_PAGE_TIMEOUT_S=1"};
  argv.insert(argv.end(), program.begin(), program.end());
  const auto r = run_process(argv, cwd.path().string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected.out);
  EXPECT_EQ(lines_with(r.err, kPageStopped), 1u) << r.err;
  EXPECT_NE(r.err.find("traceml: summary written to logs/quickstart_"), std::string::npos) << r.err;
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(cwd.path() / "logs"))
    runs.push_back(e.path());
  ASSERT_EQ(runs.size(), 1u);
  const Json s = load_json(runs[0] / "final_summary.json");
  ASSERT_TRUE(s.is_object());
  EXPECT_TRUE(s.contains("primary_diagnosis"));
  EXPECT_TRUE(fs::exists(runs[0] / "final_summary.txt"));
  EXPECT_FALSE(fs::exists(runs[0] / "final_summary.html"));
}

// A lone rank that fails has no others to stop: the launcher's line does
// not say it stopped them (issue 47).
TEST(EndOfRun, ALoneRankThatFailsIsNotSaidToHaveStoppedOthers) {
  TempDir logs;
  const auto r =
      run_process(traceml_run_argv(kCli, logs.path(), "alone", 1, {"--mode", "summary"},
                                   {TRACEML_TINY_RANK_PATH, "--steps", "20", "--exit", "3"}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("traceml: rank 0 failed (exit code 3); its output: "), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("the other ranks were stopped"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace traceml::testing
