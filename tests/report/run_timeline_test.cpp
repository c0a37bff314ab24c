// The run's timeline plan (report/run_timeline): which steps timeline.json
// draws for a window of aligned steps, bounded by ranks, with the slow window
// drawn too when it lies before the latest steps.
#include "report/run_timeline.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "../analysis/step_time_test_support.hpp"
#include "../support/subprocess.hpp"
#include "analysis/summary.hpp"
#include "report/final_summary.hpp"

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

/// A run of 100 steps, its summary naming its timeline.
FinalSummary summary_with_timeline(const model::Telemetry& t, const std::string& dir) {
  const analysis::Summary s = analysis::summarize(t, analysis::Options{});
  const auto plan = plan_run_timeline(*s.step_window, nullptr);
  return build_final_summary(s, "2026-12-07T00:00:00Z", evidence_hint_for(dir), std::nullopt,
                             std::nullopt, run_dir_hint_for(dir), html_hint_for(dir), std::nullopt,
                             std::nullopt, timeline_json(*plan));
}

// The summary names the timeline only once it exists: written while the
// page draws, and left out of the summary (and said) when it cannot be.
TEST(RunTimeline, TheSummaryNamesItOnlyWhenItWasWritten) {
  model::Telemetry t;
  traceml::testing::add_steps(t, 0, 1, 100, {1.0, 0.0, 2.0, 3.0, 1.0, 7.0});
  traceml::testing::TempDir tmp;
  const std::string dir = (tmp.path() / "run").string();
  FinalSummary ok = summary_with_timeline(t, dir);
  bool written = false;
  write_run_report(ok, dir, &t, PageLimits{}, [&]() -> std::optional<std::string> {
    written = true;
    return std::nullopt;
  });
  EXPECT_TRUE(written);
  EXPECT_FALSE(ok.timeline_error);
  EXPECT_TRUE(ok.json.contains("timeline"));
  EXPECT_NE(ok.text.find("\nTimeline: "), std::string::npos) << ok.text;
  EXPECT_NE(
      traceml::testing::read_file(tmp.path() / "run" / "final_summary.txt").find("\nTimeline: "),
      std::string::npos);

  FinalSummary failed = summary_with_timeline(t, dir);
  write_run_report(failed, dir, &t, PageLimits{}, []() -> std::optional<std::string> {
    return "timeline.json not written: full";
  });
  ASSERT_TRUE(failed.timeline_error);
  EXPECT_EQ(*failed.timeline_error, "timeline.json not written: full");
  EXPECT_FALSE(failed.json.contains("timeline"));
  EXPECT_EQ(failed.text.find("Timeline:"), std::string::npos) << failed.text;
  const std::string on_disk =
      traceml::testing::read_file(tmp.path() / "run" / "final_summary.json");
  EXPECT_EQ(on_disk.find("\"timeline\""), std::string::npos);
  EXPECT_NE(on_disk.find("final_summary.html"), std::string::npos);  // the page still is
  // and it names no timeline either (it was drawn again without it).
  EXPECT_EQ(
      traceml::testing::read_file(tmp.path() / "run" / "final_summary.html").find("timeline.json"),
      std::string::npos);
}

}  // namespace
}  // namespace traceml::report
