// Synthetic runs for the HTML report's tests: N ranks of a DDP job (8 a
// node) with per-step phases, step memory and system/process samples, one
// rank optionally slow on input (the others then wait in backward, as in a
// real straggler), one step optionally a spike (10x); and their summary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "analysis/summary.hpp"
#include "model/telemetry.hpp"
#include "report/final_summary.hpp"

namespace traceml::testing {

struct RunShape {
  int ranks = 2;
  std::int64_t steps = 120;
  std::optional<int> slow_rank;
  double slow_input_ms = 40.0;
  double noise = 0.02;  ///< each phase times (1 + noise x u), u uniform in [-0.5, 0.5)
  std::optional<std::pair<int, std::int64_t>> spike;  ///< (rank, step) taking 10x
  std::int64_t window = 10000;
  std::string hostname = "node";
  std::string run_name = "synthetic";
};

inline model::Telemetry synthetic_run(const RunShape& s) {
  using model::Event;
  model::Telemetry t;
  t.run.run_name = s.run_name;
  t.run.world_size = s.ranks;
  for (int r = 0; r < s.ranks; ++r) {
    model::RankIdentity id;
    id.global_rank = r;
    id.local_rank = r % 8;
    id.node_rank = r / 8;
    id.hostname = s.hostname + std::to_string(r / 8);
    id.local_world_size = s.ranks < 8 ? s.ranks : 8;
    id.world_size = s.ranks;
    t.ranks.push_back(id);
  }
  std::uint64_t seed = 12345;
  auto jitter = [&] {  // a fixed LCG: the same run every time
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return 1.0 + s.noise * (double(seed >> 11) / double(1ULL << 53) - 0.5);
  };
  const double t0 = 1.7e9;
  const double wait = s.slow_rank ? s.slow_input_ms - 2.0 : 0.0;  // the others' barrier wait
  for (std::int64_t step = 1; step <= s.steps; ++step) {
    const double ts = t0 + double(step) * 0.15;
    for (int r = 0; r < s.ranks; ++r) {
      const bool slow = s.slow_rank && *s.slow_rank == r;
      model::StepRecord rec;
      rec.global_rank = r;
      rec.step = step;
      rec.ts = ts;
      const double input = (slow ? s.slow_input_ms : 2.0) * jitter();
      const double h2d = 3.0 * jitter();
      const double fwd = 30.0 * jitter();
      const double bwd = (60.0 + (slow ? 0.0 : wait)) * jitter();
      const double opt = 10.0 * jitter();
      double traced = h2d + fwd + bwd + opt + 2.0 * jitter();
      if (s.spike && s.spike->first == r && s.spike->second == step) traced *= 10.0;
      rec.events.set(Event::InputWait, {input, std::nullopt});
      rec.events.set(Event::H2D, {h2d, std::nullopt});
      rec.events.set(Event::Forward, {fwd, std::nullopt});
      rec.events.set(Event::Backward, {bwd, std::nullopt});
      rec.events.set(Event::OptimizerStep, {opt, std::nullopt});
      rec.events.set(Event::TracedStepTime, {traced, std::nullopt});
      t.steps.push_back(rec);
      t.step_memory.push_back(
          {r, step, "cuda:0", (14.0e9 + 1e7 * r) * jitter(), 16.0e9 * jitter()});
      if (step % 10 == 0) {
        model::ProcessSample p;
        p.global_rank = r;
        p.ts = ts;
        p.cpu_percent = 100.0 * jitter();
        p.cpu_cores = 8;
        p.rss_bytes = 6.0e9 * jitter();
        p.ram_total_bytes = 512e9;
        t.process.push_back(p);
      }
    }
    if (step % 10 == 0) {
      for (int node = 0; node * 8 < s.ranks; ++node) {
        model::SystemSample sys;
        sys.node_rank = node;
        sys.ts = ts;
        sys.cpu_percent = 36.0 * jitter();
        sys.ram_used_bytes = 64e9;
        sys.ram_total_bytes = 512e9;
        for (int g = 0; g < 8 && node * 8 + g < s.ranks; ++g) {
          model::GpuSample gpu;
          gpu.index = g;
          gpu.util_percent = 40.0 * jitter();
          sys.gpus.push_back(gpu);
        }
        t.system.push_back(sys);
      }
    }
  }
  return t;
}

/// The summary of `t` as finalize_run builds it for a run directory
/// logs/run that gets its page.
inline report::FinalSummary summary_of(const model::Telemetry& t, const RunShape& s) {
  analysis::Options opts;
  opts.window = s.window;
  return report::build_final_summary(analysis::summarize(t, opts),
                                     "2025-01-01T00:00:00.000000+00:00",
                                     "logs/run/final_summary.json", std::nullopt, std::nullopt,
                                     "logs/run", "logs/run/final_summary.html");
}

}  // namespace traceml::testing
