// One-off stalls in a phase share (DECISIONS 23): a few steps that hold most
// of the share the verdict quotes are named in the finding's evidence, and
// the text speaks of the mean step, the stall and the median beside it,
// never of "the typical step".
#include <gtest/gtest.h>

#include <regex>

#include "analysis/summary.hpp"
#include "report/final_summary.hpp"
#include "step_time_test_support.hpp"

namespace traceml::analysis {
namespace {

using testing::add_steps;
using testing::Phases;

// 2.5 ms steps that wait 0.1 ms for input; a stall waits 6 s.
const Phases kSteady{0.1, 0.0, 0.8, 1.2, 0.2, 2.4};
const Phases kStall{6000.0, 0.0, 0.8, 1.2, 0.2, 2.4};

Summary summarize_steps(const model::Telemetry& t) {
  Options o;
  return summarize(t, o);
}

const Json& step_diagnosis(const Summary& s) {
  return s.step_time.diagnosis().evidence;
}

TEST(Stalls, OneInputStallThatMakesAnInputBoundMeanIsNamed) {
  model::Telemetry t;
  add_steps(t, 0, 1, 51, kSteady);
  add_steps(t, 0, 52, 1, kStall);
  add_steps(t, 0, 53, 248, kSteady);
  const Summary s = summarize_steps(t);
  EXPECT_EQ(s.step_time.diagnosis().kind, "INPUT_BOUND");  // TraceML's kind, a mean
  const Json& st = step_diagnosis(s).at("stalls");
  EXPECT_EQ(st["metric"], "input_wait_ms");
  ASSERT_EQ(st["steps"].size(), 1u);
  EXPECT_EQ(st["steps"][0]["rank"], 0);
  EXPECT_EQ(st["steps"][0]["step"], 52);
  EXPECT_DOUBLE_EQ(st["steps"][0]["value_ms"].get<double>(), 6000.0);
  EXPECT_GT(st["share"].get<double>(), 0.85);
  EXPECT_LT(st["share_without"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(st["median_value_ms"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(st["median_step_time_ms"].get<double>(), 2.5);

  const report::FinalSummary f = report::build_final_summary(s, "2026-12-07T00:00:00Z", "");
  EXPECT_EQ(f.text.find("of the typical step"), std::string::npos) << f.text;
  EXPECT_NE(f.text.find("Why: input wait is 89% of the mean step (CPU clock), but one stall holds "
                        "most of it: step 52 waited 6.0 s for input; the"),
            std::string::npos)
      << f.text;
  EXPECT_NE(f.text.find("median step takes 2.5 ms and waits 0.1 ms. Without it, input wait is 4% "
                        "of the step."),
            std::string::npos)
      << f.text;
  EXPECT_NE(f.text.find("Next: find what held step 52 (storage or network, a checkpoint, another "
                        "process on the node): more"),
            std::string::npos)
      << f.text;
  // Without it the run is not input-bound: no advice for workers.
  EXPECT_EQ(f.text.find("add loader workers"), std::string::npos) << f.text;
}

TEST(Stalls, TwoStallsOnOneOfTwoRanksAreNamedWithTheirRank) {
  model::Telemetry t;
  for (int rank : {0, 1}) {
    add_steps(t, rank, 1, 99, kSteady);
    add_steps(t, rank, 100, 1, rank == 1 ? kStall : kSteady);
    add_steps(t, rank, 101, 99, kSteady);
    add_steps(t, rank, 200, 1, kStall);
    add_steps(t, rank, 201, 100, kSteady);
  }
  const Summary s = summarize_steps(t);
  ASSERT_EQ(s.step_time.diagnosis().kind, "INPUT_BOUND");
  ASSERT_TRUE(step_diagnosis(s).contains("stalls")) << step_diagnosis(s).dump();
  const Json& st = step_diagnosis(s).at("stalls");
  ASSERT_EQ(st["steps"].size(), 2u);
  EXPECT_EQ(st["steps"][0]["rank"], 1);
  EXPECT_EQ(st["steps"][0]["step"], 100);
  EXPECT_EQ(st["steps"][1]["step"], 200);
  const report::FinalSummary f = report::build_final_summary(s, "2026-12-07T00:00:00Z", "");
  // The Why and Next as one line each.
  const std::string flat = std::regex_replace(f.text, std::regex("\n +"), " ");
  EXPECT_NE(flat.find("2 stalls hold most of it: R1's steps 100 (6.0 s) and 200 (6.0 s) waited for "
                      "input; the median step takes 2.5 ms and waits 0.1 ms. Without them, input "
                      "wait is 4% of the step."),
            std::string::npos)
      << f.text;
  EXPECT_NE(flat.find("more loader workers do not fix one-off stalls."), std::string::npos) << flat;
}

TEST(Stalls, ASteadilyInputBoundRunHasNone) {
  model::Telemetry t;
  add_steps(t, 0, 1, 300, Phases{3.0, 0.0, 0.8, 1.2, 0.2, 2.4});
  add_steps(t, 0, 301, 1, Phases{9.0, 0.0, 0.8, 1.2, 0.2, 2.4});  // a slow step, no stall
  const Summary s = summarize_steps(t);
  ASSERT_EQ(s.step_time.diagnosis().kind, "INPUT_BOUND");
  EXPECT_FALSE(step_diagnosis(s).contains("stalls"));
  const report::FinalSummary f = report::build_final_summary(s, "2026-12-07T00:00:00Z", "");
  EXPECT_NE(f.text.find("input wait is 56% of the typical step (CPU clock)."), std::string::npos)
      << f.text;
}

// A stall in a run that stays input-bound without it: named, and the usual
// advice follows for the rest.
TEST(Stalls, AStallInAnInputBoundRunKeepsTheAdviceForTheRest) {
  model::Telemetry t;
  const Phases waits{1.0, 0.0, 0.8, 1.2, 0.2, 2.4};
  add_steps(t, 0, 1, 150, waits);
  add_steps(t, 0, 151, 1, kStall);
  add_steps(t, 0, 152, 149, waits);
  const Summary s = summarize_steps(t);
  ASSERT_TRUE(step_diagnosis(s).contains("stalls"));
  const report::FinalSummary f = report::build_final_summary(s, "2026-12-07T00:00:00Z", "");
  EXPECT_NE(f.text.find("Without it, input wait is 29% of the step."), std::string::npos) << f.text;
  EXPECT_NE(f.text.find("for the rest, add loader workers"), std::string::npos) << f.text;
}

}  // namespace
}  // namespace traceml::analysis
