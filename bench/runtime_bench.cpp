// The tracer's cost on the training thread (docs/performance.md): one step
// with a wrapped fetch and three phases, against the same loop untraced and a
// bare clock read, measured side by side in one process.
//
// Tracing runs in standalone mode into a temporary directory. The sender
// drains every 50 ms while the benchmark records millions of steps per
// second, so most steps are dropped at the full ring: the cost of a dropped
// step equals that of a kept one (the same push attempt), which is what the
// training thread pays either way.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <traceml/traceml.hpp>

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

// One traced step: the fetch through wrap_dataloader, StepScope, three phases.
void BM_StepTraced(benchmark::State& state) {
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
BENCHMARK(BM_StepTraced);

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
