#include "model/position.hpp"

#include <array>
#include <cstddef>

#include "model/step_record.hpp"

namespace traceml::model {

namespace {

constexpr std::array<const char*, kMaxLoopPhase + 1> kNames = {
    "outside a step", "step", "input wait", "h2d", "forward", "backward", "optimizer step"};
/// A phase that times an event is keyed by the event's name.
constexpr const char* key_of(Event e) {
  return kEventNames[static_cast<std::size_t>(e)];
}
constexpr std::array<const char*, kMaxLoopPhase + 1> kKeys = {"outside",
                                                              "step",
                                                              key_of(Event::InputWait),
                                                              key_of(Event::H2D),
                                                              key_of(Event::Forward),
                                                              key_of(Event::Backward),
                                                              key_of(Event::OptimizerStep)};

}  // namespace

const char* loop_phase_name(LoopPhase p) {
  const auto i = static_cast<std::size_t>(p);
  return i < kNames.size() ? kNames[i] : "unknown";
}

const char* loop_phase_key(LoopPhase p) {
  const auto i = static_cast<std::size_t>(p);
  return i < kKeys.size() ? kKeys[i] : "unknown";
}

std::optional<LoopPhase> loop_phase_from_key(const std::string& key) {
  for (std::size_t i = 0; i < kKeys.size(); ++i)
    if (key == kKeys[i]) return static_cast<LoopPhase>(i);
  return std::nullopt;
}

bool collective_phase(LoopPhase p) {
  return p == LoopPhase::Backward || p == LoopPhase::OptimizerStep;
}

const Stall* hung_stall(const std::vector<Stall>& stalls) {
  const Stall* hung = nullptr;
  for (const Stall& s : stalls) {
    if (s.resumed) continue;
    const bool waited_for = s.others_waiting.value_or(0) > 0;
    if (hung == nullptr || (waited_for && hung->others_waiting.value_or(0) <= 0)) hung = &s;
  }
  return hung;
}

}  // namespace traceml::model
