// The step window's per-metric statistics across ranks (spec §4.1.7).
#include <gtest/gtest.h>

#include "analysis/step_window.hpp"
#include "step_time_test_support.hpp"

namespace traceml::analysis {
namespace {

using testing::add_steps;
using testing::Phases;

TEST(StepWindowStats, TwoRanksTieOnDistanceGoesToTheLowerValueDespiteRounding) {
  // Input waits 0.1 and 0.7 ms: the median is 0.4 and both are 0.3 away, but
  // in doubles |0.1 - 0.4| = 0.30000000000000004 > |0.7 - 0.4| =
  // 0.29999999999999993. The tie rule (lower value) must still pick rank 0.
  model::Telemetry t;
  add_steps(t, 0, 1, 10, Phases{0.1, 0.0, 2.0, 3.0, 1.0, 7.0});
  add_steps(t, 1, 1, 10, Phases{0.7, 0.0, 2.0, 3.0, 1.0, 7.0});
  const StepWindow w = build_step_window(t, 10000);
  const auto& input = w.stat(StepMetric::InputWait);
  ASSERT_TRUE(input);
  EXPECT_DOUBLE_EQ(input->median, 0.4);
  EXPECT_EQ(input->representative_rank, 0);
  EXPECT_DOUBLE_EQ(input->representative, 0.1);
  EXPECT_EQ(input->worst_rank, 1);
}

TEST(StepWindowStats, ClearlyCloserValueWinsOverTheTieRule) {
  // 1, 5, 6: median 5 is rank 1's own value.
  model::Telemetry t;
  add_steps(t, 0, 1, 10, Phases{1.0, 0.0, 2.0, 3.0, 1.0, 7.0});
  add_steps(t, 1, 1, 10, Phases{5.0, 0.0, 2.0, 3.0, 1.0, 7.0});
  add_steps(t, 2, 1, 10, Phases{6.0, 0.0, 2.0, 3.0, 1.0, 7.0});
  const StepWindow w = build_step_window(t, 10000);
  const auto& input = w.stat(StepMetric::InputWait);
  ASSERT_TRUE(input);
  EXPECT_EQ(input->representative_rank, 1);
  EXPECT_EQ(input->worst_rank, 2);
}

TEST(StepWindowProfiled, StepsRunUnderTheProfilerAreLeftOutForEveryRank) {
  // Rank 1 ran steps 11-15 under LibTorch's profiler, three times slower:
  // those steps leave the window for both ranks, and the averages are the
  // steps' own.
  model::Telemetry t;
  add_steps(t, 0, 1, 30, Phases{1.0, 0.0, 2.0, 3.0, 1.0, 7.0});
  add_steps(t, 1, 1, 10, Phases{1.0, 0.0, 2.0, 3.0, 1.0, 7.0});
  add_steps(t, 1, 11, 5, Phases{1.0, 0.0, 6.0, 9.0, 3.0, 19.0});
  add_steps(t, 1, 16, 15, Phases{1.0, 0.0, 2.0, 3.0, 1.0, 7.0});
  t.profiled_steps.push_back(model::ProfiledSteps{1, 11, 15});
  const StepWindow w = build_step_window(t, 10000);
  EXPECT_EQ(w.profiled_left_out, 5);
  EXPECT_EQ(w.steps_used(), 25);
  for (const std::int64_t s : w.steps)
    EXPECT_TRUE(s < 11 || s > 15) << s;
  const auto& forward = w.stat(StepMetric::Forward);
  ASSERT_TRUE(forward);
  EXPECT_DOUBLE_EQ(forward->worst, 2.0);

  // Without the record, the same steps count (and raise rank 1's forward).
  t.profiled_steps.clear();
  const StepWindow all = build_step_window(t, 10000);
  EXPECT_EQ(all.profiled_left_out, 0);
  EXPECT_EQ(all.steps_used(), 30);
  EXPECT_GT(all.stat(StepMetric::Forward)->worst, 2.0);
}

TEST(StepWindowProfiled, AWindowOfProfiledStepsOnlyKeepsThem) {
  // Leaving every step out would leave nothing to diagnose: they stay.
  model::Telemetry t;
  add_steps(t, 0, 1, 10, Phases{1.0, 0.0, 2.0, 3.0, 1.0, 7.0});
  t.profiled_steps.push_back(model::ProfiledSteps{0, 1, 10});
  const StepWindow w = build_step_window(t, 10000);
  EXPECT_EQ(w.profiled_left_out, 0);
  EXPECT_EQ(w.steps_used(), 10);
}

}  // namespace
}  // namespace traceml::analysis
