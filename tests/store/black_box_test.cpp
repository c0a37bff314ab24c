// A black box made, mapped and read back in one process: what the launcher
// and a rank do with one across a fork and exec (the end-to-end tests do that).
#include "store/black_box.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace traceml::store {
namespace {

void journal(model::BlackBoxRegion& box, std::int64_t step, std::int64_t end_ticks) {
  model::journal_step(box, [&](model::BlackBoxStep& s) {
    s.step = step;
    s.end_ticks = end_ticks;
    s.ticks[std::size_t(model::Event::TracedStepTime)] = 2'000'000;  // 2 ms on the steady clock
    s.mask = std::uint8_t(1u << unsigned(model::Event::TracedStepTime));
  });
}

TEST(BlackBox, StepsJournaledByTheRankAreReadBackByTheLauncher) {
  std::string why;
  const auto box = BlackBox::create(3, why);
  ASSERT_TRUE(box) << why;
  EXPECT_GT(box->fd(), 2);
  EXPECT_FALSE(box->read().attached);  // no rank mapped it yet
  auto mapped = BlackBoxMapping::attach(::dup(box->fd()), why);
  ASSERT_TRUE(mapped) << why;
  model::BlackBoxRegion& r = mapped->region();
  r.header.wall_offset_s.store(1.7e9);
  r.header.attached.store(1);  // what the rank's sender does once it has set the clock
  for (std::int64_t step = 1; step <= 5; ++step)
    journal(r, step, step * 3'000'000);
  r.header.phase.store(std::uint8_t(model::LoopPhase::Backward));
  const BlackBoxReading read = box->read();
  ASSERT_TRUE(read.attached);
  ASSERT_EQ(read.steps.size(), 5u);
  EXPECT_EQ(read.steps[4].step, 5);
  EXPECT_EQ(read.steps[4].global_rank, 3);
  EXPECT_DOUBLE_EQ(read.steps[4].ts, 1.7e9 + 0.015);
  EXPECT_EQ(read.steps_completed(), 5);
  EXPECT_EQ(read.phase, model::LoopPhase::Backward);
  // A second process that inherited the same box cannot claim it.
  EXPECT_FALSE(BlackBoxMapping::attach(::dup(box->fd()), why));
  EXPECT_NE(why.find("not a fresh black box"), std::string::npos) << why;
}

// The rank's memory is not to be trusted by the launcher: the rank number
// is the launcher's, and the box cannot be shrunk under its reader.
TEST(BlackBox, WhatTheRankCanScribbleDoesNotMisleadTheLauncher) {
  std::string why;
  const auto box = BlackBox::create(2, why);
  ASSERT_TRUE(box) << why;
  auto mapped = BlackBoxMapping::attach(::dup(box->fd()), why);
  ASSERT_TRUE(mapped) << why;
  mapped->region().header.attached.store(1);
  journal(mapped->region(), 1, 1'000'000);
  mapped->region().header.global_rank = 7;
  const BlackBoxReading read = box->read();
  EXPECT_EQ(read.global_rank, 2);
  ASSERT_EQ(read.steps.size(), 1u);
  EXPECT_EQ(read.steps[0].global_rank, 2);
  EXPECT_NE(::ftruncate(box->fd(), 4096), 0) << "the box is sealed at its size";
}

TEST(BlackBox, ADescriptorThatIsNoBlackBoxIsIgnoredSilently) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string why;
  EXPECT_FALSE(BlackBoxMapping::attach(fds[0], why));
  EXPECT_TRUE(why.empty()) << why;
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace traceml::store
