// The step alignment Step Time and Step Memory share: later arrivals replace
// earlier ones, only the latest rows count, and the common steps.
#include "analysis/step_alignment.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace traceml::analysis {
namespace {

std::vector<std::int64_t> steps_of(const std::vector<StepRow>& rows) {
  std::vector<std::int64_t> out;
  for (const auto& r : rows)
    out.push_back(r.step);
  return out;
}

TEST(StepAlignment, SortsByStepAndTheLaterArrivalWins) {
  // Arrival order is the row index: step 2 arrives twice (rows 1 and 4).
  std::vector<StepRow> rows = {{1, 0}, {2, 1}, {4, 2}, {3, 3}, {2, 4}, {5, 5}};
  sort_and_dedupe(rows);
  EXPECT_EQ(steps_of(rows), (std::vector<std::int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(rows[1].row, 4u);  // the resent step 2
  EXPECT_EQ(rows[2].row, 3u);
}

TEST(StepAlignment, AlreadySortedRowsKeepTheirOrder) {
  std::vector<StepRow> rows = {{1, 0}, {1, 1}, {2, 2}};
  sort_and_dedupe(rows);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].row, 1u);
}

TEST(StepAlignment, DistinctStepsCountsTheUnionOfTheRanks) {
  EXPECT_EQ(distinct_steps({{{1, 0}, {2, 1}, {3, 2}}, {{2, 3}, {3, 4}, {4, 5}}}), 4);
  // Steps far apart take the sorting path; negative ids count too.
  EXPECT_EQ(distinct_steps({{{-5, 0}, {1'000'000'000, 1}}, {{-5, 2}, {7, 3}}}), 3);
}

TEST(StepAlignment, LatestStartKeepsTheLatestRows) {
  EXPECT_EQ(latest_start(10, 4), 6u);
  EXPECT_EQ(latest_start(3, 4), 0u);
  EXPECT_EQ(latest_start(4, 4), 0u);
  EXPECT_EQ(latest_start(10, -1), 0u);  // no limit
}

TEST(StepAlignment, CommonStepsIntersectEveryRankFromItsStart) {
  // Spec §4.1.2: rank0 steps 1-10, rank1 steps 6-15 -> 6..10 in common.
  std::vector<std::vector<StepRow>> ranks(2);
  for (std::int64_t s = 1; s <= 10; ++s)
    ranks[0].push_back({s, 0});
  for (std::int64_t s = 6; s <= 15; ++s)
    ranks[1].push_back({s, 0});
  std::vector<std::int64_t> common = common_steps(ranks, {0, 0}, {0, 1});
  EXPECT_EQ(common, (std::vector<std::int64_t>{6, 7, 8, 9, 10}));
  keep_latest(common, 3);
  EXPECT_EQ(common, (std::vector<std::int64_t>{8, 9, 10}));
  // Rank 1 counting only its latest 6 rows (10..15): 10 is all they share,
  // whichever rank seeds the intersection.
  EXPECT_EQ(common_steps(ranks, {0, 4}, {1, 0}), (std::vector<std::int64_t>{10}));
  EXPECT_EQ(common_steps(ranks, {0, 4}, {0, 1}), (std::vector<std::int64_t>{10}));
}

TEST(StepAlignment, NoSharedStepIsEmpty) {
  const std::vector<std::vector<StepRow>> ranks = {{{1, 0}, {2, 1}}, {{3, 2}}};
  EXPECT_TRUE(common_steps(ranks, {0, 0}, {0, 1}).empty());
  std::vector<std::int64_t> few = {1, 2};
  keep_latest(few, 5);
  EXPECT_EQ(few, (std::vector<std::int64_t>{1, 2}));
}

}  // namespace
}  // namespace traceml::analysis
