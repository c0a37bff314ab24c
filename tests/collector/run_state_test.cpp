// RunState, the run held in memory: whatever it leaves out, the diagnosis of
// what it keeps is the diagnosis of the whole run, byte for byte (the golden
// runs and randomized runs with resent, reordered, missing and lagging steps,
// at windows small enough that most rows are dropped); it stays bounded; and
// a reader can take snapshots while records arrive.
#include "collector/run_state.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "analysis/history.hpp"
#include "analysis/summary.hpp"
#include "collector/finalize.hpp"
#include "report/final_summary.hpp"
#include "store/jsonl_reader.hpp"

namespace traceml::collector {
namespace {

namespace fs = std::filesystem;
using model::Event;

/// What a user reads of a diagnosis: final_summary.json and .txt.
std::string artifacts(const model::Telemetry& t, std::int64_t window) {
  analysis::Options o;
  o.window = window;
  const report::FinalSummary f = report::build_final_summary(
      analysis::summarize(t, o), "2026-12-03T00:00:00.000000+00:00", "logs/x/final_summary.json");
  return report::dump_json(f.json) + "\n----\n" + f.text;
}

void expect_same_diagnosis(const model::Telemetry& full, std::int64_t window,
                           const std::string& what) {
  RunState state(window);
  store::feed(full, state);
  const store::RunData kept = state.take();
  ASSERT_TRUE(kept.telemetry.totals.has_value());
  EXPECT_EQ(artifacts(kept.telemetry, window), artifacts(full, window))
      << what << ", window " << window << ": " << kept.telemetry.steps.size() << " of "
      << full.steps.size() << " steps kept";
  EXPECT_EQ(end_of_run(kept.telemetry), end_of_run(full)) << what;
}

TEST(RunState, GoldenRunsGiveTheSameSummaryAtEveryWindow) {
  const fs::path dir = fs::path(TRACEML_TEST_DATA_DIR) / "golden" / "data";
  int runs = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".jsonl") continue;
    const model::Telemetry t = store::read_telemetry_jsonl(e.path().string()).telemetry;
    for (const std::int64_t w : {1, 2, 3, 5, 8, 10000})
      expect_same_diagnosis(t, w, e.path().filename().string());
    ++runs;
  }
  EXPECT_GE(runs, 7);
}

/// A run that exercises every way a rank's rows can be irregular.
model::Telemetry random_run(std::uint32_t seed, int ranks, int steps) {
  std::mt19937 rng(seed);
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto around = [&](double v) { return v * std::uniform_real_distribution<double>(0.8, 1.2)(rng); };
  model::Telemetry t;
  t.run.run_name = "random-" + std::to_string(seed);
  t.run.world_size = ranks + 1;  // a declared rank that never steps
  t.run.strategy = model::Strategy::Ddp;
  for (int r = 0; r < ranks; ++r)
    t.ranks.push_back({r, r % 2, r / 2, "host-" + std::to_string(r / 2), 2, ranks + 1});
  const double t0 = 1.7e9;
  for (int r = 0; r < ranks; ++r) {
    // Ranks stop apart: by a little, or by more than a window's lookback.
    const int last = steps - int(rng() % 5) * (r == 1 ? 97 : 3);
    const bool gpu = r % 3 != 2;
    std::vector<model::StepRecord> sent;
    for (int s = 1; s <= last; ++s) {
      if (chance(0.01)) continue;  // a gap
      model::StepRecord x;
      x.global_rank = r;
      x.step = s;
      x.ts = t0 + s * 0.01 + r * 1e-4;
      if (!chance(0.01)) {  // else a record without events: not a row
        for (int e = 0; e < int(model::kEventCount); ++e) {
          if (e == int(Event::H2D) && chance(0.3)) continue;
          const double v = around(e == int(Event::InputWait) && r == 0 ? 9.0 : 3.0 + e);
          x.events.set(Event(e),
                       model::Timing{v, gpu ? std::optional<double>(v * 1.02) : std::nullopt});
        }
        if (gpu && chance(0.5)) {
          model::StepGpuActivity a;
          a.h2d_ms = around(1.0);
          a.h2d_bytes = 1e6;
          a.h2d_copies = 2;
          a.busy_ms = around(8.0);
          x.gpu_activity = a;
        }
      }
      sent.push_back(x);
      if (chance(0.02)) {  // resent later with other values
        model::StepRecord again = x;
        again.events.set(Event::Forward, model::Timing{around(50.0), std::nullopt});
        again.ts += 0.5;
        sent.push_back(again);
      }
      if (sent.size() > 2 && chance(0.01)) std::swap(sent[sent.size() - 1], sent[sent.size() - 2]);
    }
    for (const auto& row : sent)
      t.steps.push_back(row);
    for (int s = 1; s <= last; ++s) {
      if (chance(0.02)) continue;
      model::StepMemoryRecord m{r, s, "cuda:" + std::to_string(r % 2), around(2e9 + 1e6 * s),
                                chance(0.05) ? std::nullopt : std::optional<double>(3e9)};
      t.step_memory.push_back(m);
      if (chance(0.01)) t.step_memory.push_back(m);  // resent
      if (s % 2 == 0) {
        model::ProcessSample p;
        p.global_rank = r;
        p.ts = t0 + s * 0.01;
        p.cpu_percent = around(100.0);
        p.rss_bytes = around(1e9);
        // The GPU is seen early only, on two devices, its total once larger.
        if (gpu && s < steps / 3)
          p.gpu = model::ProcessGpu{s < steps / 6 ? 0 : 1, around(1e9), 2e9, s == 40 ? 9e10 : 8e10};
        t.process.push_back(p);
      }
      if (s % 2 == 0 && r % 2 == 0) {
        model::SystemSample y;
        y.node_rank = r / 2;
        y.ts = t0 + s * 0.01;
        y.cpu_percent = around(50.0);
        if (s < 100) y.gpus = {model::GpuSample{0, around(90.0), 1e9, 8e10, 60.0, 300.0, 400.0}};
        t.system.push_back(y);
      }
    }
  }
  return t;
}

TEST(RunState, RandomRunsGiveTheSameSummaryAtEveryWindow) {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    const model::Telemetry t = random_run(seed, 2 + int(seed % 4), 2600);
    for (const std::int64_t w : {1, 3, 7, 40, 300, 10000})
      expect_same_diagnosis(t, w, "seed " + std::to_string(seed));
  }
}

TEST(RunState, SampleLogsCutInsideAChunkGiveTheSameSummary) {
  // Past a window of 2,048 a sample log is compacted by half a window, not by
  // whole chunks of 1,024 rows: the oldest chunks go whole and one is cut.
  const model::Telemetry t = random_run(7, 2, 10000);
  for (const std::int64_t w : {2100, 3001})
    expect_same_diagnosis(t, w, "seed 7, long");
}

TEST(RunState, RanksApartByTheWholeLookbackStillAlignTheSameSteps) {
  // Rank 1 stops behind rank 0 by all but one window of the lookback: the
  // ranks then share exactly `window` steps, the oldest that rank 0 must
  // keep. Rank 0's rows are fed until its log has just been compacted, when
  // it holds the least it ever holds; then rank 1's.
  constexpr std::int64_t kWindow = 50;
  const std::int64_t step_lag = analysis::step_history(kWindow) - kWindow;
  const std::int64_t memory_lag = analysis::step_memory_history(kWindow) - kWindow;
  auto step = [](int r, std::int64_t s) {
    model::StepRecord x;
    x.global_rank = r;
    x.step = s;
    x.ts = double(s);
    x.events.set(Event::Forward, model::Timing{r == 0 ? 1.0 : double(s % 13), std::nullopt});
    x.events.set(Event::TracedStepTime, model::Timing{5.0, std::nullopt});
    return x;
  };
  auto memory = [](int r, std::int64_t s) {
    return model::StepMemoryRecord{r, s, "cuda:0", 1e9 + double(s % 17) * 1e6, 2e9};
  };
  model::Telemetry t;
  t.run.world_size = 2;
  RunState state(kWindow);
  auto feed_until_compacted = [&](auto make, auto add, auto& out) {
    std::int64_t s = 0;
    for (std::int64_t held = 0;;) {
      out.push_back(make(0, ++s));
      add(out.back());
      const std::int64_t now = state.rows_held();
      if (now < held && s > 3000) return s;
      held = now;
    }
  };
  const std::int64_t last_step = feed_until_compacted(
      step, [&](const auto& x) { state.add(x); }, t.steps);
  const std::int64_t last_memory = feed_until_compacted(
      memory, [&](const auto& x) { state.add(x); }, t.step_memory);
  for (std::int64_t s = 1; s <= last_step - step_lag; ++s) {
    t.steps.push_back(step(1, s));
    state.add(t.steps.back());
  }
  for (std::int64_t s = 1; s <= last_memory - memory_lag; ++s) {
    t.step_memory.push_back(memory(1, s));
    state.add(t.step_memory.back());
  }
  const std::string full = artifacts(t, kWindow);
  EXPECT_NE(full.find("\"steps_analyzed\": " + std::to_string(kWindow)), std::string::npos) << full;
  EXPECT_EQ(artifacts(state.take().telemetry, kWindow), full);
}

TEST(RunState, StaysBoundedOnALongRun) {
  constexpr std::int64_t kWindow = 100;
  RunState state(kWindow);
  const std::int64_t steps_kept = analysis::step_history(kWindow);
  const std::int64_t memory_kept = analysis::step_memory_history(kWindow);
  std::int64_t most = 0;
  for (std::int64_t s = 1; s <= 200000; ++s) {
    model::StepRecord r;
    r.step = s;
    r.ts = double(s);
    r.events.set(Event::TracedStepTime, model::Timing{1.0, std::nullopt});
    state.add(r);
    state.add(model::StepMemoryRecord{0, s, "cuda:0", 1.0, 2.0});
    model::ProcessSample p;
    p.ts = double(s);
    state.add(p);
    most = std::max(most, state.rows_held());
  }
  // Each log holds at most what it keeps plus the slack before a compaction.
  const std::int64_t bound =
      steps_kept + memory_kept + kWindow + 3 * 1024 + (steps_kept + memory_kept + kWindow) / 2;
  EXPECT_LE(most, bound);
  const store::RunData d = state.take();
  EXPECT_GE(std::int64_t(d.telemetry.steps.size()), steps_kept);
  EXPECT_EQ(d.telemetry.steps.back().step, 200000);
  EXPECT_EQ(d.telemetry.totals->step_ids, 200000);
  EXPECT_EQ(d.telemetry.totals->step_memory_ids, 200000);
  EXPECT_EQ(d.telemetry.totals->latest_ts, 200000.0);
  // The run's start survives its rows: step 1 began 1 ms before its end.
  EXPECT_DOUBLE_EQ(d.telemetry.totals->earliest_ts.value_or(0.0), 0.999);
  EXPECT_EQ(state.rows_held(), 0);  // take() leaves it empty
}

TEST(RunState, SnapshotsWhileRecordsArriveSeeEachRanksRowsInOrder) {
  RunState state(50);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::int64_t s = 1; s <= 30000; ++s)
      for (int r = 0; r < 4; ++r) {
        model::StepRecord x;
        x.global_rank = r;
        x.step = s;
        x.events.set(Event::Forward, model::Timing{1.0, std::nullopt});
        state.add(x);
      }
    done = true;
  });
  int snapshots = 0;
  std::int64_t seen = 0;
  while (!done || snapshots < 2) {
    const store::RunData d = state.snapshot();
    std::vector<std::int64_t> last(4, 0);
    for (const auto& x : d.telemetry.steps) {
      ASSERT_GT(x.step, last[std::size_t(x.global_rank)]) << "rank " << x.global_rank;
      last[std::size_t(x.global_rank)] = x.step;
    }
    // Totals are taken with the rows: never behind them.
    for (const auto l : last)
      EXPECT_LE(l, d.telemetry.totals->step_ids);
    EXPECT_GE(d.telemetry.totals->step_ids, seen);
    seen = d.telemetry.totals->step_ids;
    ++snapshots;
  }
  writer.join();
  EXPECT_EQ(state.snapshot().telemetry.totals->step_ids, 30000);
}

}  // namespace
}  // namespace traceml::collector
