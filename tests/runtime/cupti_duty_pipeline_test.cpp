// The sender's step pipeline with CUPTI on a duty cycle (TRACEML_CUPTI_DUTY,
// issue 36), on a fake CUDA: a step outside the windows goes out at once with
// no activity (absent, not zero, and not a timeout), and the records of a
// closed window are flushed out as soon as the GPU has passed it, not after
// the idle wait (no later launch will ever carry their horizon). The
// duty-cycle stage itself runs on the fake CUPTI in
// tests/timing/cupti_record_test.cpp; its setting in config below.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <vector>

#include "../support/fake_cuda.hpp"
#include "runtime/config.hpp"
#include "runtime/gpu_clock.hpp"
#include "runtime/step_pipeline.hpp"

namespace traceml::runtime {
namespace {

using model::Event;
using testing_support::FakeCuda;
using TimePoint = std::chrono::steady_clock::time_point;

const TimePoint t0 = TimePoint{} + std::chrono::seconds(100);

/// Step `step` of 0.5 ms ending at `end_ns`: its body is [end_ns - 500000, end_ns].
RawStep cpu_step(std::int64_t step, std::int64_t end_ns) {
  RawStep s;
  s.step = step;
  s.end_ns = end_ns;
  s.ns[std::size_t(Event::TracedStepTime)] = 500000;
  s.mask = std::uint8_t(1u << unsigned(Event::TracedStepTime));
  return s;
}

void gpu_step(GpuClock& clock, GpuThread& t, std::int64_t step) {
  t.builder.scope_begin(step);
  t.builder.scope_end(Event::TracedStepTime, step);
  ASSERT_TRUE(clock.publish(t, step, t.builder.finish_step()));
}

struct Sink {
  std::vector<model::StepRecord> steps;
  StepPipeline::Emit emit() {
    return [this](const model::StepRecord& r, const std::optional<model::StepMemoryRecord>&) {
      steps.push_back(r);
    };
  }
  const model::StepRecord* step(std::int64_t id) const {
    for (const auto& s : steps)
      if (s.step == id) return &s;
    return nullptr;
  }
};

/// A stage on a duty cycle: the steps whose body begins at one of
/// `recorded_begins` were recorded; the window closed at `off` (if set) for
/// every step that ended before it.
class DutyActivity : public ActivityStage {
 public:
  void collect(bool) override {}
  std::optional<std::int64_t> delivered_through() const override { return through; }
  model::StepGpuActivity attribute(std::int64_t begin_ns, std::int64_t) override {
    attributed.insert(begin_ns);
    model::StepGpuActivity a;
    a.h2d_copies = 2;
    return a;
  }
  void flush_idle() override {
    ++flushes;
    through = through_after_flush;
  }
  bool records_step(std::int64_t begin_ns, std::int64_t) override {
    return recorded_begins.count(begin_ns) > 0;
  }
  std::optional<std::int64_t> records_off_after(std::int64_t end_ns) const override {
    if (off && end_ns <= *off) return off;
    return std::nullopt;
  }
  std::set<std::int64_t> recorded_begins;
  std::optional<std::int64_t> off;
  std::optional<std::int64_t> through;
  std::optional<std::int64_t> through_after_flush;
  std::set<std::int64_t> attributed;
  int flushes = 0;
};

/// Three GPU steps ending at 1, 2 and 3 ms (bodies from 0.5, 1.5, 2.5 ms).
struct ThreeSteps {
  FakeCuda fake;
  GpuClock clock{fake.api(), 1, 0, nullptr};
  timing::WallMapping wall;
  std::vector<GpuRawStep> gpu;
  void make() {
    GpuThread* t = clock.attach_thread();
    ASSERT_NE(t, nullptr);
    for (std::int64_t s = 1; s <= 3; ++s)
      gpu_step(clock, *t, s);
    clock.drain(gpu);
  }
  std::vector<RawStep> cpu() const {
    return {cpu_step(1, 1'000'000), cpu_step(2, 2'000'000), cpu_step(3, 3'000'000)};
  }
};

TEST(DutyCyclePipeline, AStepOutsideTheWindowsGoesOutAtOnceWithoutActivity) {
  ThreeSteps run;
  run.make();
  DutyActivity activity;
  activity.recorded_begins = {500'000, 2'500'000};  // steps 1 and 3; step 2 between windows
  StepPipeline pipeline(0, run.wall, &run.clock, &activity);
  Sink sink;
  pipeline.add(run.cpu(), run.gpu, t0, sink.emit());
  run.fake.complete_run(0, 6, 1.0, 1.0);  // the GPU has passed all three
  pipeline.poll(t0, sink.emit());
  // Step 2 did not wait for records that never come; 1 and 3 do.
  ASSERT_EQ(sink.steps.size(), 1u);
  EXPECT_EQ(sink.steps[0].step, 2);
  EXPECT_FALSE(sink.steps[0].gpu_activity);
  EXPECT_TRUE(sink.steps[0].events.gpu_ms(Event::TracedStepTime));  // its GPU time still counts
  EXPECT_EQ(pipeline.steps_unrecorded(), 1);
  activity.through = 3'500'000;
  pipeline.poll(t0 + std::chrono::milliseconds(10), sink.emit());
  ASSERT_EQ(sink.steps.size(), 3u);
  ASSERT_TRUE(sink.step(1)->gpu_activity);
  ASSERT_TRUE(sink.step(3)->gpu_activity);
  EXPECT_EQ(sink.step(3)->gpu_activity->h2d_copies, 2);
  EXPECT_EQ(activity.attributed, (std::set<std::int64_t>{500'000, 2'500'000}));
  EXPECT_EQ(pipeline.activity_timeouts(), 0);
}

TEST(DutyCyclePipeline, AClosedWindowIsFlushedOutOnceTheGpuHasPassedIt) {
  ThreeSteps run;
  run.make();
  DutyActivity activity;
  activity.recorded_begins = {500'000, 1'500'000};  // the window: steps 1 and 2
  activity.off = 2'100'000;                         // records off before step 3 began
  activity.through_after_flush = 2'200'000;
  StepPipeline pipeline(0, run.wall, &run.clock, &activity);
  Sink sink;
  pipeline.add(run.cpu(), run.gpu, t0, sink.emit());
  // The GPU has passed steps 1 and 2, step 3 is still on it: the window is
  // done, and its records come out now rather than after kIdleFlushWait.
  run.fake.complete_run(0, 4, 1.0, 1.0);
  pipeline.poll(t0, sink.emit());
  EXPECT_EQ(activity.flushes, 1);
  ASSERT_EQ(sink.steps.size(), 2u);
  EXPECT_TRUE(sink.step(1)->gpu_activity);
  EXPECT_TRUE(sink.step(2)->gpu_activity);
  EXPECT_EQ(pipeline.activity_timeouts(), 0);
}

TEST(DutyCyclePipeline, NoFlushWhileAStepLaunchedInTheWindowIsStillOnTheGpu) {
  ThreeSteps run;
  run.make();
  DutyActivity activity;
  activity.recorded_begins = {500'000, 1'500'000, 2'500'000};
  activity.off = 3'100'000;  // the window holds step 3 too, which the GPU has not passed
  activity.through_after_flush = 3'200'000;
  StepPipeline pipeline(0, run.wall, &run.clock, &activity);
  Sink sink;
  pipeline.add(run.cpu(), run.gpu, t0, sink.emit());
  run.fake.complete_run(0, 4, 1.0, 1.0);
  pipeline.poll(t0, sink.emit());
  EXPECT_EQ(activity.flushes, 0);  // a forced flush now would cut step 3's work short
  EXPECT_TRUE(sink.steps.empty());
  run.fake.complete_run(4, 2, 5.0, 1.0);
  pipeline.poll(t0 + std::chrono::milliseconds(1), sink.emit());
  EXPECT_EQ(activity.flushes, 1);
  EXPECT_EQ(sink.steps.size(), 3u);
}

// --- The setting --------------------------------------------------------------

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(DutyCycleConfig, OffUnlessSetAndKOfMWhenSet) {
  EXPECT_EQ(resolve_config({}, env_of({}), "h").cupti_duty, std::nullopt);
  for (const char* off : {"off", "0", ""}) {
    const Config c = resolve_config({}, env_of({{"TRACEML_CUPTI_DUTY", off}}), "h");
    EXPECT_EQ(c.cupti_duty, std::nullopt) << off;
    EXPECT_TRUE(c.problems.empty()) << off;
  }
  const Config c = resolve_config({}, env_of({{"TRACEML_CUPTI_DUTY", "8/128"}}), "h");
  EXPECT_EQ(c.cupti_duty, (timing::DutyCycle{8, 128}));
  EXPECT_TRUE(c.problems.empty());
}

TEST(DutyCycleConfig, ABadValueIsOneProblemLineAndRecordsEveryStep) {
  for (const char* bad : {"8", "128/8", "8/8", "0/128", "eight/128", "8/128\n"}) {
    const Config c = resolve_config({}, env_of({{"TRACEML_CUPTI_DUTY", bad}}), "h");
    EXPECT_EQ(c.cupti_duty, std::nullopt) << bad;
    ASSERT_EQ(c.problems.size(), 1u) << bad;
    EXPECT_EQ(c.problems[0].find('\n'), std::string::npos) << c.problems[0];
    EXPECT_EQ(c.problems[0].rfind("TRACEML_CUPTI_DUTY='", 0), 0u) << c.problems[0];
    EXPECT_NE(c.problems[0].find("is not K/M with 1 <= K < M <= 1000000 (e.g. 8/128) or off; "
                                 "CUPTI records every step"),
              std::string::npos)
        << c.problems[0];
  }
}

}  // namespace
}  // namespace traceml::runtime
