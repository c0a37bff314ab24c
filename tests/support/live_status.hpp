// A run as the collector's live board holds it, for the tests of what is
// made of it (the live view, the metrics): `ranks` running ranks of `steps`
// steps each, every step `step_ms` long of which `input_ms` wait for input
// (the rest 30 % forward, 50 % backward, 10 % optimizer, 10 % untimed).
#pragma once

#include "collector/live_snapshot.hpp"

namespace traceml::testing {

inline collector::LiveStatus live_status_of(int ranks, int steps, double input_ms, double step_ms) {
  using model::Event;
  collector::LiveStatus s;
  for (int r = 0; r < ranks; ++r) {
    model::RankIdentity id;
    id.global_rank = r;
    id.node_rank = 0;
    id.world_size = ranks;
    s.latest.telemetry.ranks.push_back(id);
    for (int i = 1; i <= steps; ++i) {
      model::StepRecord rec;
      rec.global_rank = r;
      rec.step = i;
      rec.ts = 1000.0 + i;
      const double body = step_ms - input_ms;
      rec.events.set(Event::InputWait, {input_ms, {}});
      rec.events.set(Event::Forward, {body * 0.3, {}});
      rec.events.set(Event::Backward, {body * 0.5, {}});
      rec.events.set(Event::OptimizerStep, {body * 0.1, {}});
      rec.events.set(Event::TracedStepTime, {body, {}});
      s.latest.telemetry.steps.push_back(rec);
    }
    collector::RankLive l;
    l.global_rank = r;
    l.node_rank = 0;
    l.condition = collector::RankCondition::Running;
    l.max_step = steps;
    s.ranks.push_back(l);
  }
  s.latest.telemetry.run.world_size = ranks;
  return s;
}

}  // namespace traceml::testing
