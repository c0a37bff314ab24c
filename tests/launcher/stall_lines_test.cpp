// StallLines: a rank's stall is said once when first seen and once when it
// resumes; a flood of changes is cut to a few lines every ten seconds, and
// what was held back is counted on the next line.
#include "launcher/stall_lines.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace traceml::launcher {
namespace {

model::Stall stall(int rank, const char* kind, std::int64_t step, bool resumed) {
  model::Stall s;
  s.global_rank = rank;
  s.kind = kind;
  s.step = step;
  s.phase = model::LoopPhase::Backward;
  s.duration_s = 2.0;
  s.resumed = resumed;
  return s;
}

TEST(StallLines, AStallIsSaidWhenSeenAndWhenItResumesOnceEach) {
  std::vector<std::string> said;
  StallLines lines([&](const std::string& l) { said.push_back(l); });
  const auto t0 = StallLines::Clock::now();
  std::vector<model::Stall> stalls = {stall(1, "silent", 812, false)};
  stalls[0].others_waiting = 1;
  lines.update(stalls, t0);
  lines.update(stalls, t0 + std::chrono::seconds(1));  // nothing new
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0],
            "traceml: R1 turned silent: nothing heard for 2.0 s (last heard at step 812, "
            "backward); 1 rank waits for it");
  stalls[0].resumed = true;
  stalls[0].duration_s = 9.25;
  lines.update(stalls, t0 + std::chrono::seconds(2));
  lines.update(stalls, t0 + std::chrono::seconds(3));
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[1], "traceml: R1 resumed after 9.2 s silent");
}

TEST(StallLines, AStallSeenOnlyAfterItEndedIsOneLine) {
  std::vector<std::string> said;
  StallLines lines([&](const std::string& l) { said.push_back(l); });
  lines.update({stall(0, "stalled", 40, true)}, StallLines::Clock::now());
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], "traceml: R0 was stalled for 2.0 s at step 40, backward and resumed");
}

TEST(StallLines, AFloodIsCutAndCounted) {
  std::vector<std::string> said;
  StallLines lines([&](const std::string& l) { said.push_back(l); });
  const auto t0 = StallLines::Clock::now();
  std::vector<model::Stall> stalls;
  for (int r = 0; r < 10; ++r)
    stalls.push_back(stall(r, "silent", 5, false));
  lines.update(stalls, t0);
  EXPECT_EQ(said.size(), StallLines::kLinesPerWindow);
  stalls.push_back(stall(10, "stalled", 6, false));
  lines.update(stalls, t0 + StallLines::kWindow);
  ASSERT_EQ(said.size(), StallLines::kLinesPerWindow + 1);
  EXPECT_NE(said.back().find("(and 6 more stall changes not shown)"), std::string::npos)
      << said.back();
}

}  // namespace
}  // namespace traceml::launcher
