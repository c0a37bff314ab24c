// The columnar step log: every record reads back as it was pushed, across
// chunk boundaries, and a copy never sees rows pushed after it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "../support/telemetry_compare.hpp"
#include "model/step_log.hpp"

namespace traceml::model {
namespace {

/// A record whose events, clocks and GPU activity vary with `seed`: every
/// combination of an event with neither clock, one of them, or both.
StepRecord varied(std::uint32_t seed) {
  std::mt19937 rng(seed);
  StepRecord r;
  r.global_rank = int(rng() % 7);
  r.step = 1 + std::int64_t(rng() % 100000);
  r.ts = 1.7e9 + double(rng() % 1000) / 8.0;
  for (std::size_t e = 0; e < kEventCount; ++e) {
    switch (rng() % 5) {
      case 0:
        break;  // not recorded
      case 1:
        r.events.set(Event(e), {std::nullopt, std::nullopt});
        break;
      case 2:
        r.events.set(Event(e), {double(rng() % 1000) / 3.0, std::nullopt});
        break;
      case 3:
        r.events.set(Event(e), {std::nullopt, double(rng() % 1000) / 7.0});
        break;
      default:
        r.events.set(Event(e), {double(rng() % 1000) / 3.0, double(rng() % 1000) / 7.0});
    }
    // Some CPU values with where they began (negative: before the step).
    if (e + 1 < kEventCount && r.events.cpu_ms(Event(e)) && rng() % 2 == 0)
      r.events.set_begin(Event(e), double(int(rng() % 2000) - 500) / 9.0);
  }
  if (rng() % 4 == 0) r.thread = int(rng() % 65536);
  if (rng() % 3 == 0) {
    StepGpuActivity a;
    a.h2d_ms = 1.25;
    a.h2d_bytes = double(rng() % 100000);
    a.h2d_copies = std::int64_t(rng() % 9) + 4000000000LL;
    a.h2d_pageable_copies = 2;
    a.h2d_pageable_bytes = 17.0;
    a.collective_ms = 1e-300;
    a.busy_ms = 0.5;
    r.gpu_activity = a;
  }
  return r;
}

TEST(StepLog, ReadsBackEveryRecordAcrossChunks) {
  std::vector<StepRecord> pushed;
  StepLog log;
  const std::size_t n = 3 * StepChunk::kRows + 17;
  for (std::uint32_t i = 0; i < n; ++i) {
    pushed.push_back(varied(i));
    log.push_back(pushed.back());
  }
  ASSERT_EQ(log.size(), n);
  EXPECT_EQ(log.chunks().size(), 4u);
  testing::expect_same_list(log, pushed, "steps");  // operator[]
  std::size_t i = 0;
  for (const StepRecord& r : log) {  // the iterator
    testing::expect_same(r, pushed[i], "row " + std::to_string(i));
    ++i;
  }
  EXPECT_EQ(i, n);
}

TEST(StepLog, KeepsNonFiniteAndSignedValuesAsTheyWere) {
  // The log stores; the checks and the analysis judge.
  StepRecord r;
  r.events.set(Event::Forward, {-1.5, std::numeric_limits<double>::infinity()});
  r.events.set(Event::Backward, {std::nan(""), 0.0});
  StepLog log;
  log.push_back(r);
  const StepRecord back = log[0];
  EXPECT_EQ(back.events.cpu_ms(Event::Forward), -1.5);
  EXPECT_TRUE(std::isinf(*back.events.gpu_ms(Event::Forward)));
  EXPECT_TRUE(std::isnan(*back.events.cpu_ms(Event::Backward)));
  EXPECT_EQ(back.events.gpu_ms(Event::Backward), 0.0);
  EXPECT_FALSE(back.events.has(Event::H2D));
}

TEST(StepLog, ACopyDoesNotSeeLaterRows) {
  StepLog log;
  for (std::uint32_t i = 0; i < 10; ++i)
    log.push_back(varied(i));
  const StepLog copy = log;  // shares the partly filled chunk
  const StepLog reader = log.copy_for_reader();
  for (std::uint32_t i = 10; i < 20; ++i)
    log.push_back(varied(i));
  EXPECT_EQ(copy.size(), 10u);
  EXPECT_EQ(reader.size(), 10u);
  EXPECT_EQ(log.size(), 20u);
  std::vector<StepRecord> first;
  for (std::uint32_t i = 0; i < 10; ++i)
    first.push_back(varied(i));
  testing::expect_same_list(copy, first, "copy");
  testing::expect_same_list(reader, first, "reader");
  // The shared chunk was left as it was: the log went on in a new one.
  EXPECT_EQ(log.chunks().size(), 2u);
  EXPECT_EQ(log.chunks()[0].get(), copy.chunks()[0].get());
  // The reader's copy of a chunk with room is its own; full chunks are shared.
  EXPECT_NE(reader.chunks()[0].get(), log.chunks()[0].get());
}

TEST(StepLog, CopyForReaderSharesFullChunksOnly) {
  StepLog log;
  for (std::uint32_t i = 0; i < StepChunk::kRows + 5; ++i)
    log.push_back(varied(i));
  const StepLog reader = log.copy_for_reader();
  ASSERT_EQ(reader.chunks().size(), 2u);
  EXPECT_EQ(reader.chunks()[0].get(), log.chunks()[0].get());
  EXPECT_NE(reader.chunks()[1].get(), log.chunks()[1].get());
  log.push_back(varied(99));  // still appends to its own last chunk
  EXPECT_EQ(log.chunks().size(), 2u);
  EXPECT_EQ(reader.size(), StepChunk::kRows + 5);
}

TEST(StepLog, AppendedLogsReadInOrderThroughPartChunks) {
  // RunState hands the analysis each rank's log, each ending in a part chunk.
  std::vector<StepRecord> all;
  std::vector<StepLog> ranks(3);
  StepLog joined;
  for (std::uint32_t k = 0; k < 3; ++k) {
    for (std::uint32_t i = 0; i < 700 * (k + 1); ++i) {
      all.push_back(varied(k * 10000 + i));
      ranks[k].push_back(all.back());
    }
    joined.append(ranks[k]);
  }
  testing::expect_same_list(joined, all, "joined");
  ASSERT_EQ(joined.chunks().size(), 6u);  // 700 | 1024 + 376 | 1024 + 1024 + 52
  // The last chunk is shared with ranks[2]: a row pushed now goes to a chunk
  // of its own, and ranks[2] does not see it.
  joined.push_back(varied(5));
  all.push_back(varied(5));
  testing::expect_same_list(joined, all, "joined and pushed");
  EXPECT_EQ(joined.chunks().size(), 7u);
  EXPECT_EQ(ranks[2].size(), 2100u);
  // Its own last chunk it fills.
  joined.push_back(varied(6));
  EXPECT_EQ(joined.chunks().size(), 7u);
}

TEST(StepLog, AMovedFromLogIsEmpty) {
  StepLog log;
  for (std::uint32_t i = 0; i < 10; ++i)
    log.push_back(varied(i));
  StepLog moved = std::move(log);
  EXPECT_EQ(moved.size(), 10u);
  EXPECT_EQ(log.size(), 0u);  // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_TRUE(log.chunks().empty());
  log.push_back(varied(3));
  EXPECT_EQ(log.size(), 1u);
  testing::expect_same(log[0], varied(3), "reused");
}

TEST(StepLog, BeginsAndThreadsAreKeptOnlyWhenATimelineWantsThem) {
  StepLog with, without;
  std::size_t begins = 0, threads = 0;
  for (std::uint32_t i = 0; i < 3000; ++i) {  // across chunks; some rows name threads
    const StepRecord r = varied(i);
    begins += r.events.begin_mask() != 0;
    threads += r.thread != 0;
    with.push_back(r);
    without.push_back(r, /*timeline=*/false);
  }
  ASSERT_GT(begins, 0u);
  ASSERT_GT(threads, 0u);
  for (std::size_t i = 0; i < with.size(); ++i) {
    const StepRecord r = varied(std::uint32_t(i));
    testing::expect_same(with[i], r, "row " + std::to_string(i));
    StepRecord bare = r;
    for (std::size_t e = 0; e < kEventCount; ++e)
      bare.events.set_begin(Event(e), std::nullopt);
    bare.thread = 0;
    testing::expect_same(without[i], bare, "row " + std::to_string(i));
  }
  // Without them, the log holds no begin column and no thread column.
  EXPECT_LT(without.bytes() + 5 * 3 * StepChunk::kRows * sizeof(double), with.bytes());
}

TEST(StepLog, PushRowCopiesColumnsExactly) {
  StepLog src;
  for (std::uint32_t i = 0; i < 50; ++i)
    src.push_back(varied(i));
  StepLog dst;
  for (const auto& c : src.chunks())
    for (std::size_t j = 0; j < c->size(); j += 2)
      dst.push_row(*c, j);
  ASSERT_EQ(dst.size(), 25u);
  for (std::size_t j = 0; j < dst.size(); ++j)
    testing::expect_same(dst[j], src[2 * j], "row " + std::to_string(j));
}

TEST(StepLog, EditRewritesRowsInOrder) {
  StepLog log;
  for (std::uint32_t i = 0; i < 5; ++i)
    log.push_back(varied(i));
  log.edit(3, [](StepRecord& r) { r.ts = -1.0; });
  log.edit([](StepRecord& r) { r.gpu_activity.reset(); });
  ASSERT_EQ(log.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_FALSE(log[i].gpu_activity.has_value());
    EXPECT_EQ(log[i].ts == -1.0, i == 3);
    EXPECT_EQ(log[i].step, varied(std::uint32_t(i)).step);
  }
}

TEST(StepLog, ViewsReadTheColumnsInPlace) {
  StepLog log;
  const StepRecord r = varied(7);
  log.push_back(r);
  const StepView v{log.chunks()[0].get(), 0};
  EXPECT_EQ(v.rank(), r.global_rank);
  EXPECT_EQ(v.step(), r.step);
  EXPECT_EQ(v.event_mask(), r.events.event_mask());
  EXPECT_EQ(v.cpu_mask(), r.events.cpu_mask());
  EXPECT_EQ(v.gpu_mask(), r.events.gpu_mask());
  for (std::size_t e = 0; e < kEventCount; ++e) {
    EXPECT_EQ(v.cpu_ms(Event(e)), r.events.cpu_ms(Event(e)));
    EXPECT_EQ(v.gpu_ms(Event(e)), r.events.gpu_ms(Event(e)));
  }
  EXPECT_EQ(v.activity() != nullptr, r.gpu_activity.has_value());
}

}  // namespace
}  // namespace traceml::model
