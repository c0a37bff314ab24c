// The slow window: the slowest K consecutive aligned steps of the rank the
// diagnosis names (else the median rank), in the step-time section's JSON,
// and on the text report's Next line with the command that draws them.
#include "analysis/slow_window.hpp"

#include <gtest/gtest.h>

#include "analysis/summary.hpp"
#include "report/final_summary.hpp"
#include "step_time_test_support.hpp"

namespace traceml::analysis {
namespace {

using testing::add_steps;
using testing::Phases;

const Phases kNormal{2.0, 0.0, 3.0, 4.0, 1.0, 8.0};  // 10 ms a step
const Phases kSlow{2.0, 0.0, 3.0, 4.0, 1.0, 14.0};   // 16 ms a step

TEST(SlowestRun, FindsTheSlowestRunAndPrefersTheEarliestOfEqualOnes) {
  std::vector<double> v(60, 1.0);
  for (std::size_t i = 30; i < 33; ++i)
    v[i] = 4.0;
  const auto r = slowest_run(v, 3);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, 30u);
  EXPECT_DOUBLE_EQ(r->mean, 4.0);
  const std::vector<double> flat(10, 2.0);
  EXPECT_EQ(slowest_run(flat, 5)->first, 0u);
  EXPECT_FALSE(slowest_run(flat, 6).has_value());  // fewer than 2k values
  EXPECT_FALSE(slowest_run(flat, 0).has_value());
}

TEST(SlowWindow, IsOnTheRankTheDiagnosisNamesElseTheMedianRank) {
  model::Telemetry t;
  add_steps(t, 0, 1, 100, kNormal);
  add_steps(t, 1, 1, 40, kNormal);
  add_steps(t, 1, 41, 20, kSlow);  // steps 41-60 of rank 1
  add_steps(t, 1, 61, 40, kNormal);
  const StepWindow w = build_step_window(t, 10000);
  Issue named;
  named.ranks = {1};
  const auto j = slow_window(w, named);
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ((*j)["rank"], 1);
  EXPECT_EQ((*j)["basis"], "named_rank");
  EXPECT_EQ((*j)["clock"], "cpu");
  EXPECT_EQ((*j)["first_step"], 41);
  EXPECT_EQ((*j)["last_step"], 60);
  EXPECT_EQ((*j)["steps"], 20);
  EXPECT_DOUBLE_EQ((*j)["mean_step_ms"].get<double>(), 16.0);
  EXPECT_DOUBLE_EQ((*j)["median_step_ms"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ((*j)["slower_pct"].get<double>(), 60.0);
  // Nobody named: the median rank of the step time (rank 0 here, all flat),
  // whose slowest window is the first after the warm-up (10 of 100 steps).
  const auto m = slow_window(w, Issue{});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ((*m)["basis"], "median_rank");
  EXPECT_EQ((*m)["rank"], 0);
  EXPECT_EQ((*m)["first_step"], 11);
  EXPECT_DOUBLE_EQ((*m)["slower_pct"].get<double>(), 0.0);
}

TEST(SlowWindow, NeedsTwiceItsLengthOfAlignedStepsAfterTheWarmUp) {
  model::Telemetry t;
  add_steps(t, 0, 1, 43, kNormal);  // 4 warm-up steps, then 39
  EXPECT_FALSE(slow_window(build_step_window(t, 10000), Issue{}).has_value());
  add_steps(t, 0, 44, 1, kNormal);  // 4, then 40
  EXPECT_TRUE(slow_window(build_step_window(t, 10000), Issue{}).has_value());
}

TEST(SlowWindow, TheWarmUpIsNotTheSlowWindow) {
  model::Telemetry t;
  add_steps(t, 0, 1, 10, kSlow);  // the first 10 of 100 steps: cold caches
  add_steps(t, 0, 11, 90, kNormal);
  const auto j = slow_window(build_step_window(t, 10000), Issue{});
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ((*j)["first_step"], 11);
  EXPECT_DOUBLE_EQ((*j)["slower_pct"].get<double>(), 0.0);
}

/// The text report of a run whose rank 0 had a slow stretch of `slow_steps`
/// steps 16 ms long among 10 ms ones.
std::string report_text(std::int64_t slow_steps, const std::string& run_dir) {
  model::Telemetry t;
  t.run.run_name = "sw";
  add_steps(t, 0, 1, 50, kNormal);
  add_steps(t, 0, 51, slow_steps, kSlow);
  add_steps(t, 0, 51 + slow_steps, 50, kNormal);
  const Summary s = summarize(t);
  const auto f = report::build_final_summary(s, "2026-12-04T00:00:00.000000+00:00",
                                             "logs/sw/final_summary.json", std::nullopt,
                                             std::nullopt, run_dir);
  EXPECT_TRUE(f.json["step_time"]["global"].contains("slow_window")) << f.json.dump();
  return f.text;
}

TEST(SlowWindow, TheNextLineGivesTheCommandThatDrawsIt) {
  const std::string text = report_text(20, "logs/sw");
  // The sentence ends the Next paragraph (wrapped as prose); the command
  // follows on a line of its own, whole.
  std::string prose = text;
  for (std::size_t at; (at = prose.find("\n      ")) != std::string::npos;)
    prose.replace(at, 7, " ");
  EXPECT_NE(prose.find("The slowest 20 steps of R0, 51-70, are 60% slower than its median step; "
                       "draw them: traceml export"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n      traceml export logs/sw --format chrome-trace --steps 51:70 --out "
                      "slow_steps.json\n"),
            std::string::npos)
      << text;
  // Without a run directory (a summary of telemetry JSONL), the command says where.
  EXPECT_NE(report_text(20, "").find("traceml export RUN_DIR --format chrome-trace --steps 51:70"),
            std::string::npos);
  // Two slow steps in twenty: 6 % slower, not worth a line.
  EXPECT_EQ(report_text(2, "logs/sw").find("slowest"), std::string::npos);
}

}  // namespace
}  // namespace traceml::analysis
