// Speed of the diagnosis engine and of JSONL import (docs/performance.md).
//
//   cmake --build build --target analysis_bench && ./build/bench/analysis_bench
//
// BM_DiagnoseLargeRun: a synthetic run of 1,024 ranks x 2,000 steps (every
// event on both clocks, per-step memory, 1 Hz process and system samples), in
// memory; one iteration = window building + every rule of every section +
// final_summary JSON + text rendering. Counters: records_MB (the records' own
// size) and peak_extra_MB (growth of the process's peak RSS during the first
// iteration, i.e. what the analysis needs beyond the records).
// BM_ImportJsonl: parse telemetry JSONL held in memory; items/s = lines/s.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <random>
#include <sstream>

#include "analysis/summary.hpp"
#include "report/final_summary.hpp"
#include "store/jsonl_reader.hpp"
#include "store/jsonl_writer.hpp"

namespace {

using namespace traceml;

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

model::Telemetry synthetic_run(int ranks, int steps, int ranks_per_node) {
  model::Telemetry t;
  t.run.run_name = "bench";
  t.run.world_size = ranks;
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> jitter(0.95, 1.05);
  const int nodes = (ranks + ranks_per_node - 1) / ranks_per_node;
  for (int r = 0; r < ranks; ++r) {
    t.ranks.push_back({r, r % ranks_per_node, r / ranks_per_node,
                       "n" + std::to_string(r / ranks_per_node), ranks_per_node, ranks});
  }
  t.step_memory.reserve(std::size_t(ranks) * std::size_t(steps));
  const double t0 = 1764662400.0;
  for (int s = 1; s <= steps; ++s) {
    for (int r = 0; r < ranks; ++r) {
      model::StepRecord rec;
      rec.global_rank = r;
      rec.step = s;
      rec.ts = t0 + s * 0.1;
      const double slow = r == 7 ? 3.0 : 1.0;  // one input straggler
      const double v[] = {2.0 * slow, 1.0, 30.0, 50.0, 8.0, 92.0};
      for (int e = 0; e < 6; ++e) {
        const double x = v[e] * jitter(rng);
        rec.events.set(model::Event(e), model::Timing{x, x * 1.01});
      }
      t.steps.push_back(rec);
      t.step_memory.push_back({r, s, "cuda:0", 2.0e10 * jitter(rng), 2.4e10 * jitter(rng)});
    }
  }
  const int seconds = steps / 10;
  for (int sec = 0; sec < seconds; ++sec) {
    for (int n = 0; n < nodes; ++n) {
      model::SystemSample sys;
      sys.node_rank = n;
      sys.ts = t0 + sec;
      sys.cpu_percent = 40.0 * jitter(rng);
      sys.ram_used_bytes = 2.0e11;
      sys.ram_total_bytes = 1.0e12;
      for (int g = 0; g < ranks_per_node; ++g) {
        sys.gpus.push_back({g, 85.0 * jitter(rng), 3.0e10, 8.0e10, 60.0, 500.0, 700.0});
      }
      t.system.push_back(sys);
    }
    for (int r = 0; r < ranks; ++r) {
      model::ProcessSample p;
      p.global_rank = r;
      p.ts = t0 + sec;
      p.cpu_percent = 110.0 * jitter(rng);
      p.cpu_cores = 96;
      p.rss_bytes = 8.0e9;
      p.ram_total_bytes = 1.0e12;
      p.gpu = model::ProcessGpu{r % ranks_per_node, 2.0e10, 2.4e10, 8.0e10};
      t.process.push_back(p);
    }
  }
  return t;
}

std::size_t records_bytes(const model::Telemetry& t) {
  std::size_t b = t.steps.bytes() + t.step_memory.size() * sizeof(model::StepMemoryRecord) +
                  t.process.size() * sizeof(model::ProcessSample);
  for (const auto& s : t.system)
    b += sizeof(s) + s.gpus.size() * sizeof(model::GpuSample);
  return b;
}

void BM_DiagnoseLargeRun(benchmark::State& state) {
  const auto t = synthetic_run(int(state.range(0)), int(state.range(1)), 8);
  const double before = peak_rss_mb();
  double extra = -1.0;
  std::string verdict;
  for (auto _ : state) {
    const analysis::Summary s = analysis::summarize(t);
    const report::FinalSummary f = report::build_final_summary(
        s, "2026-12-02T00:00:00.000000+00:00", "logs/bench/final_summary.json");
    const std::string json = report::dump_json(f.json);
    benchmark::DoNotOptimize(json.data());
    verdict = s.primary.kind;
    if (extra < 0) extra = peak_rss_mb() - before;
  }
  state.counters["records_MB"] = double(records_bytes(t)) / 1e6;
  state.counters["peak_extra_MB"] = extra * 1.048576;  // MiB -> MB
  state.SetLabel(verdict);
}
BENCHMARK(BM_DiagnoseLargeRun)->Args({1024, 2000})->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ImportJsonl(benchmark::State& state) {
  const auto t = synthetic_run(64, int(state.range(0)), 8);
  std::ostringstream os;
  store::write_telemetry_jsonl(t, os);
  const std::string text = os.str();
  const auto lines = std::count(text.begin(), text.end(), '\n');
  for (auto _ : state) {
    auto r = store::parse_telemetry_jsonl(text, "bench.jsonl");
    benchmark::DoNotOptimize(r.telemetry.steps.size());
  }
  state.SetItemsProcessed(state.iterations() * lines);
  state.SetBytesProcessed(state.iterations() * std::int64_t(text.size()));
}
BENCHMARK(BM_ImportJsonl)->Arg(2000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
