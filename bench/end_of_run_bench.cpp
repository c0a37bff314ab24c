// The end of a run (docs/performance.md "End of a run"): the work between the
// last rank's exit and the summary on disk, for a run of RANKS x STEPS step
// records (every CPU event timed, as bench/step_loop sends them) with 1 Hz
// process samples of every rank and system samples of every node.
//
// BM_EndOfRunFromDatabase: finalize_run(RUN_DIR) on the run database the
// collector wrote, i.e. `traceml report RUN_DIR`.
// BM_EndOfRunFromMemory: the end of `traceml run` since the run is held in
// memory (collector::RunState, fed outside the timing as the collector does
// while the run goes), then finalize from it. Built only where RunState
// exists, so that this file also measures older trees side by side.
//
// BM_ReadBlackBox: what `traceml run` adds to a rank's end since the black
// box (docs/launchers.md): reading a full box (4,096 journaled steps, every
// CPU event timed, a memory peak each) back into records.
//
// Counter peak_extra_MB: growth of the process's peak RSS during the first
// iteration, beyond what the setup used.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <filesystem>
#include <random>
#include <string>
#include <type_traits>

#include "collector/finalize.hpp"
#include "store/run_db.hpp"
#if __has_include("store/black_box.hpp")
#include "model/black_box.hpp"
#include "store/black_box.hpp"
#define TRACEML_BENCH_BLACK_BOX 1
#endif
#if __has_include("collector/run_state.hpp")
#include "collector/run_state.hpp"
#define TRACEML_BENCH_RUN_STATE 1
#endif

namespace {

using namespace traceml;
namespace fs = std::filesystem;

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0 * 1.048576;  // KiB -> MB
}

/// Whether `Sink` takes every record through one add() (model::Record);
/// older trees' sinks have one call per kind.
template <class Sink, class = void>
struct takes_records : std::false_type {};
template <class Sink>
struct takes_records<
    Sink, std::void_t<decltype(std::declval<Sink&>().add(std::declval<const model::RunInfo&>()))>>
    : std::true_type {};

/// Hands `r` to `sink` the way its tree takes records, so that this bench
/// builds in older trees too and their numbers stand beside today's.
template <class Sink, class R>
void give(Sink& sink, const R& r) {
  if constexpr (takes_records<Sink>::value)
    sink.add(r);
  else if constexpr (std::is_same_v<R, model::RunInfo>)
    sink.set_run_info(r);
  else if constexpr (std::is_same_v<R, model::RankIdentity>)
    sink.add_rank(r);
  else if constexpr (std::is_same_v<R, model::StepRecord>)
    sink.add_step(r);
  else if constexpr (std::is_same_v<R, model::SystemSample>)
    sink.add_system(r);
  else if constexpr (std::is_same_v<R, model::ProcessSample>)
    sink.add_process(r);
  else
    sink.set_delivery(r);
}

/// Feeds a synthetic run to `sink` in the order a collector receives it (a
/// template: older trees' writer has the same calls without the RunSink base).
template <typename Sink>
void synthetic_run(Sink& sink, int ranks, int steps) {
  model::RunInfo info;
  info.run_name = "bench";
  info.world_size = ranks;
  give(sink, info);
  for (int r = 0; r < ranks; ++r)
    give(sink, model::RankIdentity{r, r % 8, r / 8, "n" + std::to_string(r / 8), 8, ranks});
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> jitter(0.95, 1.05);
  const double t0 = 1764662400.0;
  constexpr int kStepsPerSecond = 100;
  for (int s = 1; s <= steps; ++s) {
    for (int r = 0; r < ranks; ++r) {
      model::StepRecord rec;
      rec.global_rank = r;
      rec.step = s;
      rec.ts = t0 + s * 0.01;
      const double v[] = {r == 7 ? 1.5 : 0.5, 0.0, 0.2, 0.3, 0.1, 0.65};
      for (int e = 0; e < 6; ++e)
        if (e != 1) rec.events.set(model::Event(e), model::Timing{v[e] * jitter(rng), {}});
      give(sink, rec);
    }
    if (s % kStepsPerSecond != 0) continue;
    for (int n = 0; n < (ranks + 7) / 8; ++n) {
      model::SystemSample y;
      y.node_rank = n;
      y.ts = t0 + s * 0.01;
      y.cpu_percent = 40.0 * jitter(rng);
      y.ram_used_bytes = 2.0e10;
      y.ram_total_bytes = 2.5e10;
      give(sink, y);
    }
    for (int r = 0; r < ranks; ++r) {
      model::ProcessSample p;
      p.global_rank = r;
      p.ts = t0 + s * 0.01;
      p.cpu_percent = 90.0 * jitter(rng);
      p.cpu_cores = 2;
      p.rss_bytes = 1.0e8;
      p.ram_total_bytes = 2.5e10;
      give(sink, p);
    }
  }
  for (int r = 0; r < ranks; ++r) {
    store::RankDelivery d;
    d.global_rank = r;
    d.records_received = steps + steps / kStepsPerSecond;
    d.clean_end = true;
    model::TracerStats t;
    t.global_rank = r;
    t.steps_recorded = steps;
    t.records_sent = d.records_received;
    t.overhead_ns_per_step = 300.0;
    d.tracer = t;
    give(sink, d);
  }
}

std::string summary_kind(const report::FinalSummary& f) {
  return f.json["primary_diagnosis"]["kind"].get<std::string>();
}

void BM_EndOfRunFromDatabase(benchmark::State& state) {
  const fs::path dir = fs::temp_directory_path() / "traceml_end_of_run_bench";
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    store::RunDbWriter w((dir / store::kRunDbFileName).string());
    synthetic_run(w, int(state.range(0)), int(state.range(1)));
    w.flush();
  }
  const double before = peak_rss_mb();
  double extra = -1.0;
  for (auto _ : state) {
    const report::FinalSummary f = collector::finalize_run(dir.string(), 10000);
    state.SetLabel(summary_kind(f));
    if (extra < 0) extra = peak_rss_mb() - before;
  }
  state.counters["peak_extra_MB"] = extra;
  fs::remove_all(dir);
}
BENCHMARK(BM_EndOfRunFromDatabase)
    ->Args({64, 20000})
    ->Args({8, 125000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

#ifdef TRACEML_BENCH_RUN_STATE
void BM_EndOfRunFromMemory(benchmark::State& state) {
  const fs::path dir = fs::temp_directory_path() / "traceml_end_of_run_bench_memory";
  fs::remove_all(dir);
  fs::create_directories(dir);
  { store::RunDbWriter w((dir / store::kRunDbFileName).string()); }  // outcome, counts: none
  double extra = -1.0;
  for (auto _ : state) {
    state.PauseTiming();
    auto run = std::make_unique<collector::RunState>(10000);
    synthetic_run(*run, int(state.range(0)), int(state.range(1)));
    const double before = peak_rss_mb();
    state.ResumeTiming();
    const report::FinalSummary f = collector::finalize_run(dir.string(), run->take(), 10000);
    state.SetLabel(summary_kind(f));
    if (extra < 0) extra = peak_rss_mb() - before;
  }
  state.counters["peak_extra_MB"] = extra;
  fs::remove_all(dir);
}
BENCHMARK(BM_EndOfRunFromMemory)
    ->Args({64, 20000})
    ->Args({8, 125000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
#endif

#ifdef TRACEML_BENCH_BLACK_BOX
void BM_ReadBlackBox(benchmark::State& state) {
  auto region = std::make_unique<model::BlackBoxRegion>();
  region->header.attached.store(1);
  for (std::int64_t step = 1; step <= 2 * std::int64_t{model::kBlackBoxSlots}; ++step) {
    model::journal_step(*region, [step](model::BlackBoxStep& s) {
      s.step = step;
      s.end_ticks = step * 1'000'000;
      s.mask = 0x3f;
      for (std::size_t e = 0; e < model::kEventCount; ++e)
        s.ticks[e] = 100'000 + std::int64_t(e);
      s.has_memory = 1;
      s.peak_allocated_bytes = 1e9;
    });
  }
  std::size_t steps = 0;
  for (auto _ : state) {
    const store::BlackBoxReading r = store::read_black_box(*region);
    steps = r.steps.size();
    benchmark::DoNotOptimize(r.steps.data());
  }
  state.counters["steps"] = double(steps);
}
BENCHMARK(BM_ReadBlackBox)->Unit(benchmark::kMicrosecond);
#endif

}  // namespace

BENCHMARK_MAIN();
