// The tracer's cost (docs/performance.md), measured side by side in one
// process; tracing runs in standalone mode into a temporary directory.
//
// On the training thread: one step with a wrapped fetch and three phases,
// against the same loop untraced and a bare clock read.
//  - BM_StepTracedKept/B: the hot path's code (runtime/hot_path.hpp, what the
//    public scopes run) on a recorder whose ring a consumer thread drains
//    every 100 us: every step is kept, as in a real run (counter dropped_pct).
//    B=1: each step also goes into a black box, as under `traceml run`
//    (store/black_box.hpp); B=0: none, as under serve or standalone. Compare
//    them with --benchmark_enable_random_interleaving and repetitions.
//  - BM_StepTracedDropped: the public API; the sender drains every 50 ms
//    while the loop records millions of steps a second, so nearly every step
//    finds the ring full and is dropped (counter dropped_pct).
// Off it: BM_SenderCpu/N, the sender thread's CPU per second of run while N
// threads train with ~1 ms steps (counter sender_cpu_ms_per_s).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <traceml/traceml.hpp>

#include "runtime/hot_path.hpp"
#include "store/black_box.hpp"

namespace {

std::vector<int> make_data() {
  return std::vector<int>(std::size_t{1} << 16, 1);
}

void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}
BENCHMARK(BM_ClockRead);

// The loop body without traceml: the baseline to subtract.
void BM_StepUntraced(benchmark::State& state) {
  std::vector<int> data = make_data();
  auto it = data.begin();
  for (auto _ : state) {
    if (it == data.end()) it = data.begin();
    int v = *it;
    benchmark::DoNotOptimize(v);
    benchmark::DoNotOptimize(v);
    benchmark::DoNotOptimize(v);
    ++it;
  }
}
BENCHMARK(BM_StepUntraced);

// One kept traced step: the hot path's fetch, step and three phases, each
// scope's edges read as the public scopes read them, on a recorder drained
// by a consumer thread.
void BM_StepTracedKept(benchmark::State& state) {
  using namespace traceml::runtime;
  HotState hot;
  hot.state.store(kRecording);
  std::string why;
  const auto box = state.range(0) != 0 ? traceml::store::BlackBox::create(0, why) : nullptr;
  std::unique_ptr<traceml::store::BlackBoxMapping> mapped;
  if (box) {
    mapped = traceml::store::BlackBoxMapping::attach(::dup(box->fd()), why);
    if (mapped) hot.black_box = &mapped->region();
  }
  if (state.range(0) != 0 && hot.black_box == nullptr) {
    state.SkipWithError(("no black box: " + why).c_str());
    return;
  }
  ThreadRecorder recorder;
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> consumed{0};
  // Drains every 100 us, well before the ring fills (~0.5 ms at this rate):
  // a consumer spinning on the ring would instead bounce its cache lines with
  // the training thread on every step, which the real sender (waking a few
  // times a second) does not.
  std::thread consumer([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      consumed.fetch_add(std::int64_t(recorder.drain([](const RawStep&) {})),
                         std::memory_order_relaxed);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  std::vector<int> data = make_data();
  auto it = data.begin();
  for (auto _ : state) {
    if (it == data.end()) it = data.begin();
    const std::int64_t fetch = hot_enter(hot, traceml::model::Event::InputWait);
    int v = *it;
    hot_fetch(hot, recorder, fetch);
    const std::int64_t step = hot_scope_begin(hot);
    recorder.enter_step();
    hot_position(hot, traceml::model::LoopPhase::Step);
    for (const auto e : {traceml::model::Event::Forward, traceml::model::Event::Backward,
                         traceml::model::Event::OptimizerStep}) {
      const std::int64_t phase = hot_enter(hot, e);
      benchmark::DoNotOptimize(v);
      hot_add(hot, recorder, e, phase);
    }
    hot_step_end(hot, recorder, step, false);
    ++it;
  }
  stop = true;
  consumer.join();
  consumed.fetch_add(std::int64_t(recorder.drain([](const RawStep&) {})));
  const double steps = double(state.iterations());
  state.counters["dropped_pct"] = steps > 0 ? 100.0 * double(recorder.dropped()) / steps : 0.0;
}
BENCHMARK(BM_StepTracedKept)->Arg(0)->Arg(1);

// One traced step through the public API: the fetch through wrap_dataloader,
// StepScope, three phases; nearly every step is dropped at the full ring.
void BM_StepTracedDropped(benchmark::State& state) {
  if (!traceml::is_recording()) {
    state.SkipWithError("tracing is not recording");
    return;
  }
  std::vector<int> data = make_data();
  auto loader = traceml::wrap_dataloader(data);
  auto it = loader.begin();
  auto end = loader.end();
  for (auto _ : state) {
    if (!(it != end)) it = loader.begin();
    int v = *it;
    {
      traceml::StepScope step;
      {
        traceml::PhaseScope p(traceml::Phase::Forward);
        benchmark::DoNotOptimize(v);
      }
      {
        traceml::PhaseScope p(traceml::Phase::Backward);
        benchmark::DoNotOptimize(v);
      }
      {
        traceml::PhaseScope p(traceml::Phase::OptimizerStep);
        benchmark::DoNotOptimize(v);
      }
    }
    ++it;
  }
}
BENCHMARK(BM_StepTracedDropped);

/// CPU nanoseconds the thread named `name` has run (/proc's schedstat).
std::int64_t thread_cpu_ns(const std::string& name) {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string n;
    std::getline(comm, n);
    if (n != name) continue;
    std::ifstream stat(e.path() / "schedstat");
    std::int64_t ns = -1;
    stat >> ns;
    return ns;
  }
  return -1;
}

// The sender thread's CPU per second of run while N threads train with ~1 ms
// steps (a sleep stands for the step's work): the fixed cost of its wake-ups
// and the cost of each record.
void BM_SenderCpu(benchmark::State& state) {
  const int threads = int(state.range(0));
  double cpu_ms_per_s = 0.0;
  double steps_per_s = 0.0;
  for (auto _ : state) {
    std::atomic<bool> stop{false};
    std::atomic<std::int64_t> steps{0};
    const std::int64_t cpu0 = thread_cpu_ns("traceml-send");
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> trainers;
    for (int t = 0; t < threads; ++t)
      trainers.emplace_back([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          traceml::StepScope step;
          {
            traceml::PhaseScope p(traceml::Phase::Forward);
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          { traceml::PhaseScope p(traceml::Phase::Backward); }
          { traceml::PhaseScope p(traceml::Phase::OptimizerStep); }
          steps.fetch_add(1, std::memory_order_relaxed);
        }
      });
    std::this_thread::sleep_for(std::chrono::seconds(2));
    stop = true;
    for (auto& t : trainers)
      t.join();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::int64_t cpu1 = thread_cpu_ns("traceml-send");
    if (cpu0 < 0 || cpu1 < 0) {
      state.SkipWithError("no traceml-send thread");
      return;
    }
    cpu_ms_per_s = double(cpu1 - cpu0) / 1e6 / wall;
    steps_per_s = double(steps.load()) / wall;
    state.SetIterationTime(wall);
  }
  state.counters["sender_cpu_ms_per_s"] = cpu_ms_per_s;
  state.counters["steps_per_s"] = steps_per_s;
}
BENCHMARK(BM_SenderCpu)
    ->Arg(0)
    ->Arg(1)
    ->Arg(8)
    ->Arg(64)
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const auto dir = std::filesystem::temp_directory_path() / "traceml_runtime_bench";
  std::filesystem::remove_all(dir);
  traceml::Options o;
  o.logs_dir = dir.string();
  o.run_name = "bench";
  o.trace_max_steps = std::int64_t{1} << 60;
  traceml::init(o);
  benchmark::RunSpecifiedBenchmarks();
  traceml::shutdown();
  std::filesystem::remove_all(dir);
  benchmark::Shutdown();
  return 0;
}
