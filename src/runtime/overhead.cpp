#include "runtime/overhead.hpp"

#include <algorithm>
#include <array>

#include "runtime/hot_path.hpp"

namespace traceml::runtime {

// Many short rounds, and the fastest one: the scope's own cost is what a
// round measures when nothing else ran on its core. Ranks start together and
// calibrate while their neighbours load, so most rounds are slowed by others
// (the median of a few long rounds read 0.7 - 2.9 us then, against 0.3 us).
double calibrate_ns_per_scope() {
  constexpr int kRounds = 15;
  constexpr int kStepsPerRound = 200;
  HotState state;
  state.state.store(kRecording);
  ThreadRecorder recorder(std::size_t{2} * kStepsPerRound);
  std::array<double, kRounds> per_scope{};
  for (int round = 0; round < kRounds; ++round) {
    const std::int64_t t0 = timing::now_ns();
    for (int i = 0; i < kStepsPerRound; ++i) {
      hot_fetch(state, recorder, hot_enter(state, model::Event::InputWait));
      const std::int64_t step = hot_scope_begin(state);
      recorder.enter_step();
      hot_position(state, model::LoopPhase::Step);
      hot_add(state, recorder, model::Event::Forward, hot_enter(state, model::Event::Forward));
      hot_add(state, recorder, model::Event::Backward, hot_enter(state, model::Event::Backward));
      hot_add(state, recorder, model::Event::OptimizerStep,
              hot_enter(state, model::Event::OptimizerStep));
      hot_step_end(state, recorder, step, false);
    }
    const std::int64_t t1 = timing::now_ns();
    recorder.drain([](const RawStep&) {});
    per_scope[std::size_t(round)] = double(t1 - t0) / (double(kStepsPerRound) * kCalibrationScopes);
  }
  return *std::min_element(per_scope.begin(), per_scope.end());
}

}  // namespace traceml::runtime
