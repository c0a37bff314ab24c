// End-to-end, in a real terminal (tmux): what a rank prints under `traceml
// run` shows as it prints it and is kept in rank<N>.log, also when a Ctrl-C
// ends the run. The program is the quickstart example, a real LibTorch
// training whose progress lines are `std::cout << ... << "\n"` without a
// flush, as most programs print them.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>

#include "../support/examples.hpp"
#include "../support/subprocess.hpp"
#include "../support/tmux.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();

// Three progress lines, then a long evaluation pass that prints nothing:
// on a pipe the three lines would wait in the program's buffer all along,
// and die with it at the Ctrl-C.
TEST(RankOutputE2e, LinesShowAsPrintedAndSurviveACtrlC) {
  TempDir logs;
  const std::string cmd =
      shell_quoted(kCli) + " run --logs-dir " + shell_quoted(logs.path().string()) +
      " --run-name out --aggregator-port 0 --master-port 0 -- " +
      shell_quoted(kExamples + "/quickstart") +
      " --steps 3000 --log-every 1000 --after-training-s 300; echo TRACEML_EXIT=$?; sleep 60";
  Tmux tmux(cmd, 150, 40);
  ASSERT_TRUE(tmux.started()) << "tmux: " << tmux.error()
                              << " (scripts/install-deps.sh installs tmux)";

  const std::string shown = tmux.wait_for(std::regex(R"(\[rank0\]: step 3000 loss)"), 120s);
  ASSERT_NE(shown.find("[rank0]: step 3000 loss"), std::string::npos)
      << "the rank's lines did not show while it ran:\n"
      << shown;
  EXPECT_NE(shown.find("[rank0]: step 1000 loss"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("\r"), std::string::npos);

  tmux.keys("C-c");
  const std::string done = tmux.wait_for(std::regex("TRACEML_EXIT=[0-9]+"), 60s);
  EXPECT_NE(done.find("TRACEML_EXIT=130"), std::string::npos) << done;

  const std::string log = read_file(logs.path() / "out" / "rank0.log");
  for (const char* step : {"1000", "2000", "3000"})
    EXPECT_TRUE(
        std::regex_search(log, std::regex(std::string("(^|\n)step ") + step + " loss [0-9.]+\n")))
        << "step " << step << " missing from rank0.log:\n"
        << log;
  EXPECT_TRUE(fs::exists(logs.path() / "out" / "final_summary.json"));
}

}  // namespace
}  // namespace traceml::testing
