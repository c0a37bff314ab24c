// Builders for step-time test telemetry: a rank's steps with fixed phase
// durations, on the CPU clock and optionally the GPU clock.
#pragma once

#include <optional>

#include "model/telemetry.hpp"

namespace traceml::testing {

/// Phase durations of one step in ms; nullopt = the event was not recorded.
struct Phases {
  std::optional<double> input, h2d, forward, backward, optimizer, traced;
};

inline model::StepRecord step_record(int rank, std::int64_t step, const Phases& cpu,
                                     const std::optional<Phases>& gpu = std::nullopt) {
  using model::Event;
  model::StepRecord r;
  r.global_rank = rank;
  r.step = step;
  r.ts = 1764662400.0 + double(step);
  auto set = [&](Event e, std::optional<double> c, std::optional<double> g) {
    if (c || g) r.events.set(e, model::Timing{c, g});
  };
  const Phases none;
  const Phases& gp = gpu ? *gpu : none;
  set(Event::InputWait, cpu.input, gp.input);
  set(Event::H2D, cpu.h2d, gp.h2d);
  set(Event::Forward, cpu.forward, gp.forward);
  set(Event::Backward, cpu.backward, gp.backward);
  set(Event::OptimizerStep, cpu.optimizer, gp.optimizer);
  set(Event::TracedStepTime, cpu.traced, gp.traced);
  return r;
}

/// Appends steps first..first+count-1 of `rank`, all alike.
inline void add_steps(model::Telemetry& t, int rank, std::int64_t first, std::int64_t count,
                      const Phases& cpu, const std::optional<Phases>& gpu = std::nullopt) {
  for (std::int64_t s = first; s < first + count; ++s) {
    t.steps.push_back(step_record(rank, s, cpu, gpu));
  }
}

}  // namespace traceml::testing
