// The step block codec: decode(encode(x)) == x for steps with every mix of
// events, clocks and GPU activity, step ids in any order and at the ends of
// their range; the bytes a row takes; and a block cut anywhere is refused.
#include "store/step_block.hpp"

#include <gtest/gtest.h>

#include <cstdint>
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

}  // namespace
}  // namespace traceml::store
