// The sender against a real collector over loopback: it wakes rarely while
// the steps' rings fill slowly, and as often as they fill when steps come
// fast, also right after an idle spell (none overflows); every step it
// drains arrives, converted from ticks, in order.
#include "runtime/sender.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../support/subprocess.hpp"
#include "collector/collector.hpp"
#include "runtime/hot_path.hpp"

namespace traceml::runtime {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Rig {
  testing::TempDir dir;
  std::unique_ptr<collector::Collector> collector;
  RecorderRegistry recorders;
  SampleQueue samples;
  timing::WallMapping wall;
  std::atomic<int> ticks{0};
  std::unique_ptr<Sender> sender;

  Rig() {
    std::string why;
    timing::select_tick_source(timing::choose_tick_source(std::nullopt, why));
    collector::CollectorOptions o;
    o.token = "sender-test";
    o.run_dir = (dir.path() / "run").string();
    o.run.world_size = 1;
    collector = std::make_unique<collector::Collector>(o);
    SenderSettings s;
    s.port = collector->port();
    s.token = "sender-test";
    s.identity.global_rank = 0;
    s.on_tick = [this] { ++ticks; };
    sender =
        std::make_unique<Sender>(s, recorders, samples, wall, [] { return model::TracerStats{}; });
    sender->start();
  }
};

/// Records `n` steps of ~`each` on `r`, one every `each`.
void train(ThreadRecorder& r, int n, std::chrono::microseconds each) {
  HotState hot;
  hot.state.store(kRecording);
  for (int i = 0; i < n; ++i) {
    const std::int64_t start = hot_scope_begin(hot);
    r.enter_step();
    const auto until = Clock::now() + each;
    while (Clock::now() < until) {
    }
    hot_step_end(hot, r, start, false);
    if (r.take_filling()) wake_sender();  // as the public StepScope does
  }
}

TEST(Sender, WakesRarelyWhenIdleAndOftenWhenStepsComeFast) {
  Rig rig;
  // Idle: no step at all for 1.5 s.
  std::this_thread::sleep_for(1500ms);
  const int idle = rig.ticks.exchange(0);
  EXPECT_LE(idle, 6) << "an idle sender wakes at most every 0.5 s (after its first 50 ms)";
  EXPECT_GE(idle, 2);
  // Fast steps right after the idle time, when the sender sleeps for 0.5 s:
  // 20 us each (~50,000 a second) fill a 4,096-step ring in 80 ms. The
  // training thread wakes the sender when its ring is half full; without
  // that, the first half second alone would drop ~20,000 of them (~28 %).
  constexpr int kSteps = 75000;
  ThreadRecorder* r = rig.recorders.add();
  train(*r, kSteps, 20us);
  const int busy = rig.ticks.exchange(0);
  EXPECT_GE(busy, 15) << "fast steps keep the sender awake";
  r->retired.store(true);
  rig.sender->stop(Clock::now() + 10s);
  const std::int64_t dropped = rig.recorders.dropped();  // the retired ring's, kept
  EXPECT_LE(dropped, kSteps / 20) << "a ring overflowed for want of a drain; " << busy
                                  << " wake-ups";
  const collector::CollectionReport rep = rig.collector->finish(Clock::now() + 30s, 1);
  EXPECT_EQ(rep.records, kSteps - dropped);
  // The steps arrived in order with durations converted from ticks: ~20 us each.
  const store::RunData run = rig.collector->take_run();
  ASSERT_FALSE(run.telemetry.steps.empty());
  std::int64_t last = 0;
  int near = 0;
  for (const auto& s : run.telemetry.steps) {
    EXPECT_GT(s.step, last);
    last = s.step;
    const double ms = s.events.cpu_ms(model::Event::TracedStepTime).value_or(-1.0);
    if (ms >= 0.0199 && ms < 0.2) ++near;
  }
  EXPECT_GT(near, int(run.telemetry.steps.size()) * 8 / 10);
}

}  // namespace
}  // namespace traceml::runtime
