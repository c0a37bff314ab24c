#include "runtime/overhead.hpp"

#include <algorithm>
#include <array>

#include "runtime/hot_path.hpp"

namespace traceml::runtime {

double calibrate_ns_per_scope() {
  constexpr int kRounds = 5;
  constexpr int kStepsPerRound = 1000;
  HotState state;
  state.state.store(kRecording);
  ThreadRecorder recorder(std::size_t{2} * kStepsPerRound);
  std::array<double, kRounds> per_scope{};
  for (int round = 0; round < kRounds; ++round) {
    const std::int64_t t0 = timing::now_ns();
    for (int i = 0; i < kStepsPerRound; ++i) {
      hot_fetch(recorder, hot_scope_begin(state));
      const std::int64_t step = hot_scope_begin(state);
      recorder.enter_step();
      hot_add(recorder, model::Event::Forward, hot_scope_begin(state));
      hot_add(recorder, model::Event::Backward, hot_scope_begin(state));
      hot_add(recorder, model::Event::OptimizerStep, hot_scope_begin(state));
      hot_step_end(state, recorder, step, false);
    }
    const std::int64_t t1 = timing::now_ns();
    recorder.drain([](const RawStep&) {});
    per_scope[std::size_t(round)] = double(t1 - t0) / (double(kStepsPerRound) * kCalibrationScopes);
  }
  std::sort(per_scope.begin(), per_scope.end());
  return per_scope[kRounds / 2];
}

}  // namespace traceml::runtime
