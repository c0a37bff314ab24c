// The run's timeline plan (report/run_timeline): which steps timeline.json
// draws for a window of aligned steps, bounded by ranks, with the slow window
// drawn too when it lies before the latest steps.
#include "report/run_timeline.hpp"

#include <gtest/gtest.h>

namespace traceml::report {
namespace {

analysis::StepWindow window(std::int64_t first, std::int64_t last, int ranks) {
  analysis::StepWindow w;
  for (std::int64_t s = first; s <= last; ++s)
    w.steps.push_back(s);
  for (int r = 0; r < ranks; ++r) {
    analysis::RankFacts f;
    f.rank = r;
    w.facts.push_back(f);
  }
  return w;
}

nlohmann::ordered_json slow(std::int64_t first, std::int64_t last) {
  return {{"first_step", first}, {"last_step", last}};
}

TEST(RunTimeline, TheLatestThousandStepsOfFewRanksFewerOfMany) {
  const auto one = plan_run_timeline(window(1, 20000, 1), nullptr);
  ASSERT_TRUE(one);
  EXPECT_EQ(ranges_text(one->ranges), "19001:20000");
  EXPECT_EQ(one->latest_steps, 1000);
  EXPECT_EQ(one->aligned_steps, 20000);
  const auto many = plan_run_timeline(window(1, 20000, 64), nullptr);
  ASSERT_TRUE(many);
  EXPECT_EQ(ranges_text(many->ranges), "19876:20000");  // 8,000 rank-steps
  const auto huge = plan_run_timeline(window(1, 20000, 4096), nullptr);
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->latest_steps, kTimelineMinSteps);
  const auto short_run = plan_run_timeline(window(5, 40, 2), nullptr);
  ASSERT_TRUE(short_run);
  EXPECT_EQ(ranges_text(short_run->ranges), "5:40");
  EXPECT_FALSE(plan_run_timeline(analysis::StepWindow{}, nullptr));
}

TEST(RunTimeline, TheSlowWindowIsDrawnTooWhereverItLies) {
  const auto before = slow(800, 819);
  const auto apart = plan_run_timeline(window(1, 20000, 1), &before);
  ASSERT_TRUE(apart);
  EXPECT_EQ(ranges_text(apart->ranges), "800:819,19001:20000");
  EXPECT_EQ(timeline_json(*apart)["slow_window"], "800:819");
  EXPECT_EQ(timeline_json(*apart)["latest"], "19001:20000");
  const auto inside = slow(19500, 19519);
  EXPECT_EQ(ranges_text(plan_run_timeline(window(1, 20000, 1), &inside)->ranges), "19001:20000");
  const auto touching = slow(18990, 19009);  // overlaps the latest steps: one range
  EXPECT_EQ(ranges_text(plan_run_timeline(window(1, 20000, 1), &touching)->ranges), "18990:20000");
  const nlohmann::ordered_json nonsense = {{"first_step", 9}, {"last_step", 3}};
  const auto ignored = plan_run_timeline(window(1, 20000, 1), &nonsense);
  EXPECT_EQ(ranges_text(ignored->ranges), "19001:20000");
  EXPECT_TRUE(timeline_json(*ignored)["slow_window"].is_null());
}

}  // namespace
}  // namespace traceml::report
