// Each rank's median step (analysis/step_median.hpp): the live board's stall
// yardstick and the tracer's overhead share are of this one step.
#include <gtest/gtest.h>

#include "analysis/step_median.hpp"
#include "step_time_test_support.hpp"

namespace traceml::analysis {
namespace {

using testing::Phases;
using testing::step_record;

TEST(StepMedian, TheWholeStepPerRankInputWaitIncluded) {
  model::Telemetry t;
  // Rows of two ranks interleaved, as a live run's latest rows come.
  for (std::int64_t s = 1; s <= 3; ++s) {
    Phases zero;
    zero.input = 1.0;
    zero.traced = 10.0 * double(s);
    t.steps.push_back(step_record(0, s, zero));
    Phases one;
    one.traced = s == 3 ? 9.0 : 5.0 + double(s);  // 6, 7, 9: no input wait measured
    t.steps.push_back(step_record(1, s, one));
  }
  Phases untraced;  // input wait alone is not a step
  untraced.input = 500.0;
  t.steps.push_back(step_record(1, 4, untraced));
  t.steps.push_back(step_record(2, 1, untraced));
  const auto m = median_step_ms(t);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(m.at(0), 21.0);
  EXPECT_DOUBLE_EQ(m.at(1), 7.0);
  EXPECT_EQ(m.count(2), 0u);
}

TEST(StepMedian, AnEvenCountTakesTheMeanOfTheMiddleTwo) {
  model::Telemetry t;
  for (const double ms : {4.0, 1.0, 3.0, 2.0}) {
    Phases p;
    p.traced = ms;
    p.input = 0.0;  // measured as nothing: adds nothing
    t.steps.push_back(step_record(5, std::int64_t(ms), p));
  }
  EXPECT_DOUBLE_EQ(median_step_ms(t).at(5), 2.5);
}

}  // namespace
}  // namespace traceml::analysis
