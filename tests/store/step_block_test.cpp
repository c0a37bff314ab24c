// The step block codec: decode(encode(x)) == x for steps with every mix of
// events, clocks and GPU activity, step ids in any order and at the ends of
// their range; the bytes a row takes; and a block cut anywhere is refused.
#include "store/step_block.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "../support/telemetry_compare.hpp"

namespace traceml::store {
namespace {

using model::Event;

std::vector<model::StepRecord> decode(const StepBlockEncoder& e, int rank) {
  StepBlockDecoder d(e.bytes(), rank, e.rows());
  std::vector<model::StepRecord> out;
  model::StepRecord r;
  while (d.next(r))
    out.push_back(r);
  return out;
}

/// Random steps of rank 3: each event present or not, each clock present or
/// not, GPU activity on some, step ids jumping back and forth.
std::vector<model::StepRecord> random_steps(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<double> ms(0.0, 1e4);
  std::vector<model::StepRecord> out;
  std::int64_t step = 1;
  for (int i = 0; i < n; ++i) {
    model::StepRecord r;
    r.global_rank = 3;
    const auto jump = static_cast<std::int64_t>(rng() % 7) - 2;
    step = std::max<std::int64_t>(1, step + jump);
    r.step = rng() % 50 == 0 ? std::numeric_limits<std::int64_t>::max() - i : step;
    r.ts = 1.7e9 + ms(rng);
    for (std::size_t e = 0; e < model::kEventCount; ++e) {
      const auto bits = rng() % 5;
      if (bits == 0) continue;
      model::Timing t;
      if (bits & 1u) t.cpu_ms = ms(rng);
      if (bits & 2u) t.gpu_ms = rng() % 3 == 0 ? 0.0 : ms(rng);
      r.events.set(static_cast<Event>(e), t);
    }
    // Begins on some CPU values: whole nanoseconds, as a rank records
    // them, or (rarely, as a file may hold) any double in range.
    for (std::size_t e = 0; e + 1 < model::kEventCount; ++e) {
      const auto ev = static_cast<Event>(e);
      if (!r.events.cpu_ms(ev) || rng() % 3 == 0) continue;
      const double ns = double(static_cast<std::int64_t>(rng() % 4000000000ULL) - 1000000000);
      r.events.set_begin(ev, rng() % 10 == 0 ? ms(rng) - 5e3 : ns * 1e-6);
    }
    if (rng() % 4 == 0) r.thread = static_cast<int>(rng() % 65536);
    if (rng() % 3 == 0) {
      model::StepGpuActivity a;
      a.h2d_ms = ms(rng);
      a.h2d_bytes = 1e9;
      a.h2d_copies = static_cast<std::int64_t>(rng() % 5000000000ULL);
      a.h2d_pageable_copies = a.h2d_copies / 2;
      a.h2d_pageable_bytes = 5e8;
      a.collective_ms = ms(rng);
      a.busy_ms = ms(rng);
      r.gpu_activity = a;
    }
    out.push_back(r);
  }
  return out;
}

TEST(StepBlock, RandomStepsReadBackExactly) {
  std::mt19937_64 rng(20261204);
  for (int round = 0; round < 20; ++round) {
    const auto steps = random_steps(rng, 1 + static_cast<int>(rng() % 1500));
    StepBlockEncoder e;
    for (const auto& r : steps)
      e.add(r);
    ASSERT_EQ(e.rows(), static_cast<int>(steps.size()));
    testing::expect_same_list(steps, decode(e, 3), "steps");
    std::int64_t lo = steps[0].step, hi = steps[0].step;
    for (const auto& r : steps) {
      lo = std::min(lo, r.step);
      hi = std::max(hi, r.step);
    }
    EXPECT_EQ(e.min_step(), lo);
    EXPECT_EQ(e.max_step(), hi);
  }
}

TEST(StepBlock, ExtremeStepJumpsAndValuesReadBack) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  StepBlockEncoder e;
  std::vector<model::StepRecord> steps;
  for (const std::int64_t id :
       {std::int64_t{1}, kMax, std::int64_t{1}, kMax - 1, std::int64_t{2}}) {
    model::StepRecord r;
    r.global_rank = 0;
    r.step = id;
    r.ts = id == 1 ? 0.0 : 1e300;
    r.events.set(Event::TracedStepTime, {std::numeric_limits<double>::denorm_min(), 1e300});
    r.events.set(Event::Backward, {std::nullopt, std::nullopt});  // present, no clock
    steps.push_back(r);
    e.add(r);
  }
  testing::expect_same_list(steps, decode(e, 0), "steps");
  EXPECT_EQ(e.min_step(), 1);
  EXPECT_EQ(e.max_step(), kMax);
}

TEST(StepBlock, ACpuStepWithEveryPhaseTakesFiftyNineBytes) {
  model::StepRecord r;
  r.step = 1;
  r.ts = 1.7e9;
  for (std::size_t e = 0; e < model::kEventCount; ++e)
    r.events.set(static_cast<Event>(e), {1.0, std::nullopt});
  StepBlockEncoder e;
  e.add(r);
  EXPECT_EQ(e.bytes().size(), 1u + 59u);  // the codec byte, then the row
  e.clear();
  EXPECT_EQ(e.bytes().size(), 1u);
  EXPECT_EQ(e.rows(), 0);
}

TEST(StepBlock, BeginsTakeAVarintOfNanosecondsAndTheThreadOneMore) {
  // The step of the test above, as a rank records it: five begins in whole
  // nanoseconds (the fetch before the step negative) on thread 2.
  model::StepRecord r;
  r.step = 1;
  r.ts = 1.7e9;
  for (std::size_t e = 0; e < model::kEventCount; ++e)
    r.events.set(static_cast<Event>(e), {1.0, std::nullopt});
  const std::int64_t begins_ns[] = {-1000001, 0, 250000, 1500000, 20123456};
  for (std::size_t e = 0; e + 1 < model::kEventCount; ++e)
    r.events.set_begin(static_cast<Event>(e), double(begins_ns[e]) * 1e-6);
  r.thread = 2;
  StepBlockEncoder e;
  e.add(r);
  // The flags take 2 bytes more (bits up to 25); the begins' zigzag
  // varints 3 + 1 + 3 + 4 + 4 bytes; the thread 1.
  EXPECT_EQ(e.bytes().size(), 1u + 59u + 2u + 15u + 1u);
  const auto back = decode(e, 0);
  ASSERT_EQ(back.size(), 1u);
  testing::expect_same(r, back[0], "step");
  EXPECT_EQ(back[0].events.begin_ms(Event::InputWait), -1000001 * 1e-6);

  // One begin that is not a whole nanosecond: every begin as 8 bytes.
  r.events.set_begin(Event::H2D, 0.1234567891);
  e.clear();
  e.add(r);
  EXPECT_EQ(e.bytes().size(), 1u + 59u + 2u + 5u * 8u + 1u);
  testing::expect_same(r, decode(e, 0)[0], "step");
}

TEST(StepBlock, ABeginOfMinusZeroKeepsItsSign) {
  // -0.0 equals 0.0 but is not the same value: stored as nanoseconds it would
  // read back as +0.0 (fuzz_step_block, CI of 03d1417). Such a begin goes as
  // a real, with its sign.
  model::StepRecord r;
  r.step = 1;
  r.ts = 1.7e9;
  r.events.set(Event::Forward, {1.0, std::nullopt});
  r.events.set_begin(Event::Forward, -0.0);
  StepBlockEncoder e;
  e.add(r);
  const auto back = decode(e, 0);
  ASSERT_EQ(back.size(), 1u);
  ASSERT_TRUE(back[0].events.begin_ms(Event::Forward).has_value());
  EXPECT_TRUE(std::signbit(*back[0].events.begin_ms(Event::Forward)));
  // +0.0 still takes a one-byte varint.
  r.events.set_begin(Event::Forward, 0.0);
  StepBlockEncoder plus;
  plus.add(r);
  EXPECT_EQ(plus.bytes().size() + 7u, e.bytes().size());
  EXPECT_FALSE(std::signbit(*decode(plus, 0)[0].events.begin_ms(Event::Forward)));
}

TEST(StepBlock, BlocksOfCodecOneStillReadAndMayNotUseTheNewFlags) {
  // A codec 1 block, as schema-version-2 databases before begins hold it:
  // the same row bytes behind the codec byte 1.
  model::StepRecord r;
  r.step = 4;
  r.ts = 1.7e9;
  r.events.set(Event::Forward, {2.0, std::nullopt});
  StepBlockEncoder e;
  e.add(r);
  std::string old_block = e.bytes();
  old_block[0] = 1;
  StepBlockDecoder d(old_block, 5, 1);
  model::StepRecord back;
  ASSERT_TRUE(d.next(back));
  EXPECT_EQ(back.step, 4);
  EXPECT_EQ(back.global_rank, 5);
  EXPECT_EQ(back.events.begin_mask(), 0u);
  // The same with a begin: codec 1 does not define the flag.
  r.events.set_begin(Event::Forward, 0.5);
  e.clear();
  e.add(r);
  old_block = e.bytes();
  old_block[0] = 1;
  try {
    StepBlockDecoder old(old_block, 5, 1);
    old.next(back);
    FAIL() << "a begin read from a codec 1 block";
  } catch (const StepBlockError& err) {
    EXPECT_NE(std::string(err.what()).find("block codec 1 does not define"), std::string::npos)
        << err.what();
  }
  // Codec 3 is not known yet.
  old_block[0] = 3;
  EXPECT_THROW(StepBlockDecoder(old_block, 5, 1), StepBlockError);
}

TEST(StepBlock, BeginsAndThreadsOutOfRangeAreRefused) {
  model::StepRecord r;
  r.step = 1;
  r.events.set(Event::Forward, {2.0, std::nullopt});
  r.events.set_begin(Event::Forward, 0.5);
  r.thread = 1;
  StepBlockEncoder e;
  e.add(r);
  const std::string good = e.bytes();
  // The row ends: ... begin varint zigzag(500000) = 3 bytes, thread 01.
  ASSERT_EQ(good.back(), 1);
  std::string zero_thread = good;
  zero_thread.back() = 0;  // the flag says a thread other than 0
  EXPECT_THROW(
      {
        StepBlockDecoder d(zero_thread, 0, 1);
        d.next(r);
      },
      StepBlockError);
  // A begin beyond the checks' bound, stored as a real: refused by check_step.
  r.events.set_begin(Event::Forward, 2e9);
  e.clear();
  e.add(r);
  try {
    StepBlockDecoder d(e.bytes(), 0, 1);
    d.next(r);
    FAIL() << "a begin of 2e9 ms read back";
  } catch (const StepBlockError& err) {
    EXPECT_NE(std::string(err.what()).find("begin_ms"), std::string::npos) << err.what();
  }
}

TEST(StepBlock, EveryCutOfABlockIsRefusedWithoutReadingPastIt) {
  std::mt19937_64 rng(7);
  const auto steps = random_steps(rng, 40);
  StepBlockEncoder e;
  for (const auto& r : steps)
    e.add(r);
  const std::string& bytes = e.bytes();
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    // A copy of exactly `cut` bytes: ASan sees any read beyond it.
    const std::string part = bytes.substr(0, cut);
    try {
      StepBlockDecoder d(part, 3, e.rows());
      model::StepRecord r;
      while (d.next(r)) {
      }
      FAIL() << "a block cut to " << cut << " of " << bytes.size() << " bytes read";
    } catch (const StepBlockError& err) {
      EXPECT_EQ(std::string(err.what()), cut == 0 ? "the block is empty (no codec byte)"
                                                  : "the block ends inside the record")
          << cut;
    }
  }
}

// fuzz_step_block's seed of a block with begins and threads: its input is
// the block's rows (u16, little-endian), its rank (u8), then its bytes. The
// committed seed is what today's encoder writes; TRACEML_UPDATE_GOLDEN=1
// rewrites it.
TEST(StepBlock, TheFuzzSeedWithBeginsIsTheEncodersBytes) {
  std::mt19937_64 rng(15);
  StepBlockEncoder e;
  unsigned begins = 0, threads = 0;
  for (const auto& r : random_steps(rng, 12)) {
    e.add(r);
    begins += r.events.begin_mask() != 0;
    threads += r.thread != 0;
  }
  ASSERT_GT(begins, 0u);  // the seed exercises what codec 2 added
  ASSERT_GT(threads, 0u);
  std::string seed = {char(e.rows()), char(0), char(3)};
  seed += e.bytes();
  const auto path = std::filesystem::path(TRACEML_TEST_DATA_DIR) / "fuzz" / "corpus" /
                    "fuzz_step_block" / "timeline.bin";
  if (std::getenv("TRACEML_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << seed;
    GTEST_SKIP() << "seed rewritten";
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path << " missing; run with TRACEML_UPDATE_GOLDEN=1";
  const std::string stored((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(stored, seed);
}

}  // namespace
}  // namespace traceml::store
