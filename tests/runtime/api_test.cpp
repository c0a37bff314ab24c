// The public API end to end inside one process: init() in standalone mode,
// the scopes over a vector, a custom iterator with a sentinel, a custom loop
// with FetchScope, steps on a second thread, an exception, shutdown(); then
// what reached the run database (begins, threads) and the summary.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include <traceml/traceml.hpp>

#include "../support/subprocess.hpp"
#include "store/run_db.hpp"

namespace {

/// A range whose end is a different type (a sentinel), counting down to 0.
struct Countdown {
  struct End {};
  struct Iter {
    int n;
    int operator*() const { return n; }
    Iter& operator++() {
      --n;
      return *this;
    }
    bool operator!=(End) const { return n > 0; }
  };
  int from;
  [[nodiscard]] Iter begin() const { return Iter{from}; }
  [[nodiscard]] End end() const { return {}; }
};

TEST(PublicApi, ScopesOverRangesCustomLoopsAndExceptionsReachTheSummary) {
  using namespace std::chrono_literals;
  traceml::testing::TempDir dir;
  traceml::Options o;
  o.logs_dir = dir.path().string();
  o.run_name = "api";
  o.sample_interval_sec = 0.05;
  traceml::init(o);
  ASSERT_TRUE(traceml::is_recording());

  std::vector<int> data(20, 1);
  int sum = 0;
  for (int& x : traceml::wrap_dataloader(data)) {  // steps 1-20
    traceml::StepScope step;
    {
      TRACEML_PHASE(Forward);
      sum += x;
    }
    {
      traceml::PhaseScope p(traceml::Phase::Backward);
      std::this_thread::sleep_for(1ms);
    }
    {
      // A phase cast from a bad integer is not timed, and writes nothing out
      // of bounds (the sanitizer builds run this).
      traceml::PhaseScope bad(static_cast<traceml::Phase>(9));
    }
  }
  for (int x : traceml::wrap_dataloader(Countdown{10})) {  // steps 21-30, an rvalue range
    TRACEML_STEP();
    sum += x;
  }
  for (int i = 0; i < 5; ++i) {  // steps 31-35: a custom loop
    {
      traceml::FetchScope fetch;
      std::this_thread::sleep_for(3ms);
    }
    traceml::StepScope step;
  }
  std::thread([] {  // steps 36-38 on a second thread: its own track in a timeline
    for (int i = 0; i < 3; ++i) {
      traceml::StepScope step;
      TRACEML_PHASE(Forward);
    }
  })
      .join();
  try {
    traceml::StepScope step;  // left by an exception: not a step
    throw 42;
  } catch (int) {
  }
  traceml::shutdown();
  EXPECT_FALSE(traceml::is_recording());
  EXPECT_EQ(sum, 20 + 55);

  const auto run = dir.path() / "api";
  const traceml::store::RunData db = traceml::store::read_run_db((run / "telemetry.db").string());
  const auto& steps = db.telemetry.steps;
  ASSERT_EQ(steps.size(), 38u);
  using traceml::model::Event;
  for (std::size_t i = 0; i < 35; ++i) {
    EXPECT_EQ(steps[i].step, std::int64_t(i + 1));
    EXPECT_EQ(steps[i].thread, 0) << i;
    // Every step has a traced time and an input wait (the loop is instrumented).
    EXPECT_TRUE(steps[i].events.cpu_ms(Event::TracedStepTime)) << i;
    EXPECT_TRUE(steps[i].events.cpu_ms(Event::InputWait)) << i;
  }
  EXPECT_GE(*steps[0].events.cpu_ms(Event::Backward), 1.0);
  EXPECT_TRUE(steps[0].events.cpu_ms(Event::Forward));
  EXPECT_FALSE(steps[0].events.has(Event::OptimizerStep));  // never timed: absent
  EXPECT_FALSE(steps[25].events.has(Event::Forward));
  for (std::size_t i = 30; i < 35; ++i) {
    EXPECT_GE(*steps[i].events.cpu_ms(Event::InputWait), 3.0) << i;
    // Fetched before the step scope opened: it began at least 3 ms before.
    EXPECT_LE(*steps[i].events.begin_ms(Event::InputWait), -3.0) << i;
  }
  // Where each phase began: forward, then backward after forward's end.
  const auto& first = steps[0].events;
  EXPECT_GE(*first.begin_ms(Event::Forward), 0.0);
  EXPECT_GE(*first.begin_ms(Event::Backward),
            *first.begin_ms(Event::Forward) + *first.cpu_ms(Event::Forward));
  EXPECT_LE(*first.begin_ms(Event::Backward) + *first.cpu_ms(Event::Backward),
            *first.cpu_ms(Event::TracedStepTime) + 1e-3);
  EXPECT_FALSE(first.begin_ms(Event::TracedStepTime));
  for (std::size_t i = 35; i < 38; ++i) {  // the second thread's
    EXPECT_EQ(steps[i].step, std::int64_t(i + 1));
    EXPECT_EQ(steps[i].thread, 1) << i;
    EXPECT_TRUE(steps[i].events.begin_ms(Event::Forward)) << i;
  }
  ASSERT_EQ(db.deliveries.size(), 1u);
  ASSERT_TRUE(db.deliveries[0].tracer);
  EXPECT_EQ(db.deliveries[0].tracer->steps_recorded, 38);
  EXPECT_EQ(db.deliveries[0].tracer->records_dropped, 0);
  EXPECT_TRUE(db.deliveries[0].clean_end);
  EXPECT_FALSE(db.telemetry.process.empty());  // the sampler ran
  EXPECT_TRUE(std::filesystem::exists(run / "final_summary.json"));
  EXPECT_TRUE(std::filesystem::exists(run / "final_summary.txt"));
  // A second shutdown, and scopes after it, do nothing.
  traceml::shutdown();
  { traceml::StepScope late; }
}

}  // namespace
