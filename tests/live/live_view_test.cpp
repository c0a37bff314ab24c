// The live view's model and its drawing: rows per rank from the live window,
// the verdict of the end-of-run engine on that window, silent and stalled
// ranks in words, the worst ranks first when the terminal is short, lines cut
// to the width, and the progress line of a log.
#include "live/live_view.hpp"

#include <gtest/gtest.h>

#include "../support/live_status.hpp"

#include <regex>

namespace traceml::live {
namespace {

using collector::RankCondition;

/// A run whose ranks spend `input_ms` of each `step_ms` waiting for input.
constexpr auto status_of = testing::live_status_of;

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines)
    out += l + "\n";
  return out;
}

TEST(LiveView, RowsSayEachRanksStepsStepTimeAndSplitAndTheVerdictSoFar) {
  const LiveModel m =
      build_model(collector::snapshot_of(status_of(2, 100, 30.0, 50.0)), "demo", 2, 83.0);
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].rows, 100);
  ASSERT_TRUE(m.ranks[0].median_ms);
  EXPECT_NEAR(*m.ranks[0].median_ms, 50.0, 1e-9);
  EXPECT_NEAR(m.ranks[0].input_ms, 30.0, 1e-9);
  EXPECT_NEAR(m.ranks[0].residual_ms, 2.0, 1e-9);  // 20 ms body, 18 ms timed
  EXPECT_NE(m.verdict.find("INPUT"), std::string::npos) << m.verdict;
  const std::string view = joined(render_view(m, 150, 30, false));
  EXPECT_NE(view.find("0:01:23"), std::string::npos) << view;
  EXPECT_NE(view.find("verdict so far: INPUT"), std::string::npos) << view;
  EXPECT_TRUE(std::regex_search(view, std::regex("R0/N0 +step +100 +last +50.0 ms +med +50.0 ms")))
      << view;
  EXPECT_TRUE(std::regex_search(view, std::regex("in +60%"))) << view;
  EXPECT_NE(view.find("IIII"), std::string::npos) << view;
}

TEST(LiveView, ASilentRankIsNamedWithWhereItWasAndWhoWaitsForIt) {
  collector::LiveStatus s = status_of(3, 20, 1.0, 10.0);
  s.ranks[1].condition = RankCondition::Silent;
  s.ranks[1].quiet_s = 12.3;
  s.ranks[1].max_step = 811;
  s.ranks[1].position = model::RankPosition{1, 0.0, 811, model::LoopPhase::Backward, true};
  for (int r : {0, 2}) {
    s.ranks[std::size_t(r)].condition = RankCondition::Stalled;
    s.ranks[std::size_t(r)].stuck_s = 12.0;
    s.ranks[std::size_t(r)].position =
        model::RankPosition{r, 0.0, 812, model::LoopPhase::Backward, true};
  }
  model::Stall stall;
  stall.global_rank = 1;
  stall.kind = "silent";
  stall.others_waiting = 2;
  s.stalls.push_back(stall);
  const LiveModel m = build_model(collector::snapshot_of(s), "demo", 3, 10.0);
  EXPECT_EQ(condition_text(m.ranks[1].live), "R1/N0 silent 12 s (last: step 812, backward)");
  EXPECT_EQ(waiting_text(m), "R0, R2 wait in backward, likely for R1");
  // The hang is the headline: the view's second line, the verdict after it
  // as what the steps showed before.
  const std::vector<std::string> lines = render_view(m, 120, 30, false);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[1],
            "HANG: R1/N0 silent 12 s (last: step 812, backward); R0, R2 wait in backward, likely "
            "for R1");
  EXPECT_EQ(lines[2].rfind("before the hang: INPUT", 0), 0u) << lines[2];
  const std::string view = joined(lines);
  EXPECT_EQ(view.find("verdict so far"), std::string::npos) << view;
  EXPECT_EQ(view.find("likely for R1"), view.rfind("likely for R1")) << "said once\n" << view;
  const std::string line = progress_line(m);
  EXPECT_NE(line.find("  HANG: R1/N0 silent 12 s (last: step 812, backward); R0, R2 wait in "
                      "backward, likely for R1  before the hang: INPUT"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("likely for R1"), line.rfind("likely for R1")) << line;
  // Once it runs again there is no hang: the verdict so far is back.
  LiveModel again = m;
  again.ranks[1].live.condition = RankCondition::Running;
  EXPECT_EQ(hang_text(again), "");
  EXPECT_EQ(render_view(again, 120, 30, false)[1].rfind("verdict so far: INPUT", 0), 0u);
  again.stalls[0].resumed = true;
  again.ranks[1].live.condition = RankCondition::Silent;
  EXPECT_EQ(hang_text(again), "") << "a stall that resumed is no hang";
}

TEST(LiveView, ARankBetweenStepsThatNobodyWaitsForIsIdleNotStopped) {
  collector::LiveStatus s = status_of(1, 20, 1.0, 10.0);
  s.ranks[0].condition = RankCondition::Idle;
  s.ranks[0].stuck_s = 9.4;
  s.ranks[0].max_step = 938;
  s.ranks[0].position = model::RankPosition{0, 0.0, 938, model::LoopPhase::Outside, true};
  const LiveModel m = build_model(collector::snapshot_of(s), "demo", 1, 10.0);
  EXPECT_EQ(condition_text(m.ranks[0].live), "R0/N0 idle 9 s after step 938, between steps");
  const std::string line = progress_line(m);
  EXPECT_EQ(line.find("stalled"), std::string::npos) << line;
  EXPECT_EQ(line.find("idle"), std::string::npos) << line;  // the line lists stopped ranks only
  const std::string view = joined(render_view(m, 120, 30, true));
  EXPECT_NE(view.find("\x1b[2mR0/N0 idle 9 s"), std::string::npos) << view;  // dim, not red
}

TEST(LiveView, AShortTerminalShowsTheWorstRanksAndCountsTheRest) {
  collector::LiveStatus s = status_of(64, 10, 1.0, 10.0);
  s.ranks[37].condition = RankCondition::Silent;
  s.ranks[37].quiet_s = 5.0;
  const LiveModel m = build_model(collector::snapshot_of(s), "big", 64, 1.0);
  const auto lines = render_view(m, 100, 12, false);
  EXPECT_LE(lines.size(), 12u);
  const std::string view = joined(lines);
  EXPECT_NE(view.find("R37/N0 silent"), std::string::npos) << view;
  EXPECT_TRUE(std::regex_search(view, std::regex("\\.\\.\\. [0-9]+ more ranks"))) << view;
}

TEST(LiveView, LinesAreCutToTheWidthWithColoursKeptWhole) {
  const LiveModel m = build_model(collector::snapshot_of(status_of(2, 10, 5.0, 10.0)),
                                  "a-rather-long-run-name", 2, 1.0);
  for (const bool color : {false, true}) {
    for (const std::string& line : render_view(m, 40, 20, color)) {
      std::string visible = std::regex_replace(line, std::regex("\x1b\\[[0-9;]*m"), "");
      EXPECT_LE(visible.size(), 40u) << line;
      if (color && line.find('\x1b') != std::string::npos) {
        EXPECT_EQ(line.substr(line.size() - 4), "\x1b[0m") << line;
      }
    }
  }
}

TEST(LiveView, OldValuesSayHowOld) {
  collector::LiveSnapshot snap = collector::snapshot_of(status_of(2, 10, 5.0, 10.0));
  snap.taken_unix = 1000.0;
  const LiveModel fresh = build_model(snap, "r", 2, 1.0, 1002.0);
  EXPECT_EQ(joined(render_view(fresh, 160, 20, false)).find(" old"), std::string::npos);
  EXPECT_EQ(progress_line(fresh).find(" old"), std::string::npos);
  // The writer behind (a slow disk): the view says its values' age.
  const LiveModel stale = build_model(snap, "r", 2, 1.0, 1009.0);
  EXPECT_NE(render_view(stale, 160, 20, false)[0].find("values 9 s old"), std::string::npos)
      << render_view(stale, 160, 20, false)[0];
  EXPECT_NE(progress_line(stale).find("values 9 s old"), std::string::npos);
}

TEST(LiveView, NoStepsYetSaysSo) {
  collector::LiveStatus s;
  collector::RankLive l;
  l.condition = RankCondition::Waiting;
  s.ranks.push_back(l);
  const LiveModel m = build_model(collector::snapshot_of(s), "r", 2, 0.0);
  EXPECT_TRUE(m.verdict.empty());
  EXPECT_NE(joined(render_view(m, 80, 10, false)).find("waiting for steps"), std::string::npos);
  EXPECT_NE(progress_line(m).find("1/2 ranks"), std::string::npos) << progress_line(m);
}

}  // namespace
}  // namespace traceml::live
