// End-to-end: one input stall in a real LibTorch training (the input_bound
// example's --stall-at-step) is named as a stall, not read as the typical
// step (DECISIONS 23); compare against the same training without it names
// the stall that only one run has instead of calling the change noise.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "../support/examples.hpp"
#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"
#include "../support/traceml_run.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();

std::string one_line(const std::string& text) {
  return std::regex_replace(text, std::regex("\\n +| *\\|\\n\\|  +"), " ");
}

TEST(StallE2e, OneInputStallIsNamedAndCompareSaysItIsRunBsAlone) {
  TempDir work;
  // --hidden 512: without the stall, input is a minor share on LibTorch 1.13
  // and 2.x alike (2.x computes this MLP 5-8x faster: 37% and 5% here).
  const std::vector<std::string> training = {
      kExamples + "/input_bound", "--transform-us", "0", "--hidden", "512", "--steps", "300"};
  std::vector<std::string> stalled = training;
  for (const char* a : {"--stall-at-step", "52", "--stall-ms", "3000"})
    stalled.emplace_back(a);
  const auto plain =
      run_process(traceml_run_argv(kCli, "logs", "plain", 1, {"--mode", "summary"}, training),
                  work.path().string());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto stall =
      run_process(traceml_run_argv(kCli, "logs", "stall", 1, {"--mode", "summary"}, stalled),
                  work.path().string());
  ASSERT_EQ(stall.exit_code, 0) << stall.err;

  // The report: the stall, its step and length, the median beside it.
  const nlohmann::json s = load_json(work.path() / "logs" / "stall" / "final_summary.json");
  const auto& st = s["step_time"]["diagnosis"]["evidence"]["stalls"];
  ASSERT_TRUE(st.is_object()) << s["step_time"]["diagnosis"].dump();
  EXPECT_EQ(st["steps"][0]["step"], 52);
  EXPECT_GT(st["steps"][0]["value_ms"].get<double>(), 2900.0);
  const std::string report = one_line(stall.out);
  EXPECT_NE(report.find("but one stall holds most of it: step 52 waited 3.0 s for input; the "
                        "median step takes "),
            std::string::npos)
      << stall.out;
  EXPECT_EQ(report.find("of the typical step"), std::string::npos) << stall.out;
  EXPECT_NE(report.find("Next: find what held step 52"), std::string::npos) << stall.out;
  EXPECT_FALSE(load_json(work.path() / "logs" / "plain" /
                         "final_summary.json")["step_time"]["diagnosis"]["evidence"]
                   .contains("stalls"));

  // compare: the stall is run B's alone; the median step did not move.
  const auto c =
      run_process({kCli, "compare", "logs/plain", "logs/stall", "--max-step-time-regression", "5"},
                  work.path().string());
  const std::string text = one_line(c.out);
  EXPECT_NE(text.find("moved by one stall in run B that run A has not (step 52 of R0 waited 3.0 s "
                      "for input)"),
            std::string::npos)
      << c.out;
  EXPECT_NE(text.find("CPU Step Time, median step"), std::string::npos) << c.out;
  EXPECT_NE(text.find("- Run B: step 52 of R0 waited 3.0 s for input"), std::string::npos) << c.out;
  EXPECT_EQ(text.find("changed by +"), text.find("mean changed by +") + 5) << c.out;
}

}  // namespace
}  // namespace traceml::testing
