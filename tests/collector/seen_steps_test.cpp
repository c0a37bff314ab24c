// SeenSteps: the window of a rank's step ids the collector has, which decides
// which steps read back from a black box are stored.
#include "collector/seen_steps.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace traceml::collector {
namespace {

TEST(SeenSteps, AStepIsSeenOnceMarked) {
  SeenSteps s;
  EXPECT_FALSE(s.has(1));
  s.mark(1);
  s.mark(3);
  EXPECT_TRUE(s.has(1));
  EXPECT_FALSE(s.has(2));
  EXPECT_TRUE(s.has(3));
}

// Past the window the oldest ids slide out: they count as seen (a black box
// holds only the last steps), and their bits are free for the new ids that
// share them.
TEST(SeenSteps, TheWindowFollowsTheNewestStep) {
  SeenSteps s;
  const std::int64_t w = SeenSteps::kWindow;
  for (std::int64_t step = 1; step <= w + 100; step += 2)
    s.mark(step);
  EXPECT_TRUE(s.has(w + 99));
  EXPECT_FALSE(s.has(w + 98));  // never marked, in the window
  EXPECT_FALSE(s.has(w + 2));   // shares a bit with step 2, which slid out
  EXPECT_TRUE(s.has(50));       // below the window: counted as seen
  // A jump beyond a whole window forgets everything before it.
  s.mark(10 * w);
  EXPECT_FALSE(s.has(10 * w - 1));
  EXPECT_TRUE(s.has(10 * w));
}

TEST(SeenSteps, ExtremeIdsNeitherOverflowNorCountAsSeen) {
  SeenSteps s;
  const std::int64_t top = std::numeric_limits<std::int64_t>::max();
  EXPECT_FALSE(s.has(top));
  s.mark(top);
  EXPECT_TRUE(s.has(top));
  EXPECT_TRUE(s.has(-1));  // below the window
  s.reset();
  EXPECT_FALSE(s.has(top));
  EXPECT_FALSE(s.has(1));
}

}  // namespace
}  // namespace traceml::collector
