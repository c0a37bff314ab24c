// The work of a scope on the training thread, as inline functions over an
// explicit state and recorder: the public entry points (runtime.cpp) call them
// with the process's state, and the overhead calibration (overhead.cpp) times
// exactly the same code on a private recorder.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include <traceml/traceml.hpp>

#include "model/black_box.hpp"
#include "model/position.hpp"
#include "runtime/thread_recorder.hpp"
#include "timing/tick_clock.hpp"

namespace traceml::runtime {

/// kUntraced: the collector refused this rank (protocol 4); it trains on
/// with nothing recorded.
enum RecordingState : int { kOff = 0, kRecording = 1, kMaxStepsReached = 2, kUntraced = 3 };

struct HotState {
  std::atomic<int> state{kOff};
  std::atomic<std::int64_t> last_step{0};  ///< step ids start at 1
  std::int64_t max_steps = 0;              ///< 0: no limit; set before state turns kRecording
  /// Where the training loop is (a model::LoopPhase), for the heartbeat:
  /// one relaxed store per scope edge while recording, read by the sender.
  std::atomic<std::uint8_t> position{0};
  /// Where hot_position stores: `position`, or the black box's copy of it
  /// once the rank has one, so that the launcher reads where a hung or
  /// stopped rank is from outside, exactly. Set before recording starts.
  std::atomic<std::atomic<std::uint8_t>*> where{&position};
  /// The black box every completed step is also written to (null: none);
  /// set before state turns kRecording, never unset (it stays mapped).
  model::BlackBoxRegion* black_box = nullptr;
};

/// A completed step into the black box, as the training thread left it.
inline void to_black_box(model::BlackBoxRegion& box, const RawStep& s) noexcept {
  model::journal_step(box, [&s](model::BlackBoxStep& b) noexcept {
    b.step = s.step;
    b.end_ticks = s.end_ns;
    b.ticks = s.ns;
    b.begin_ticks = s.begin_ns;
    b.mask = s.mask;
    b.begin_mask = s.begin_mask;
    b.thread = s.thread;
    b.has_memory = s.memory ? 1 : 0;
    if (s.memory) {
      b.memory_device = s.memory->device;
      b.peak_allocated_bytes = s.memory->peak_allocated_bytes;
      b.peak_reserved_bytes = s.memory->peak_reserved_bytes;
    }
  });
}

/// Publishes where the loop is now. The cost of a scope edge: one relaxed
/// load of where to store, and one relaxed byte store to a line the training
/// thread already owns (the black box's header, when there is one).
inline void hot_position(HotState& h, model::LoopPhase p) noexcept {
  h.where.load(std::memory_order_relaxed)
      ->store(static_cast<std::uint8_t>(p), std::memory_order_relaxed);
}

/// The loop phase a timed event runs in (the enums share their order).
constexpr model::LoopPhase loop_phase_of(model::Event e) noexcept {
  return model::LoopPhase(std::uint8_t(e) + std::uint8_t(model::LoopPhase::InputWait));
}

/// Where the loop is after a phase or fetch ends: back in the step body, or
/// between steps when the scope was outside any step.
inline void hot_leave(HotState& h, const ThreadRecorder& r) noexcept {
  hot_position(h, r.in_step() ? model::LoopPhase::Step : model::LoopPhase::Outside);
}

inline std::int64_t hot_scope_begin(const HotState& h) noexcept {
  return h.state.load(std::memory_order_relaxed) == kRecording ? timing::now_ticks() : 0;
}

/// The event a PhaseScope times, or nothing for a value outside traceml::Phase
/// (a cast from an integer). The enums share their values.
constexpr std::optional<model::Event> to_event(Phase p) noexcept {
  static_assert(int(Phase::H2D) == int(model::Event::H2D) &&
                    int(Phase::Forward) == int(model::Event::Forward) &&
                    int(Phase::Backward) == int(model::Event::Backward) &&
                    int(Phase::OptimizerStep) == int(model::Event::OptimizerStep),
                "traceml::Phase and model::Event must keep the same values");
  const int v = int(p);
  if (v < int(Phase::H2D) || v > int(Phase::OptimizerStep)) return std::nullopt;
  return model::Event(v);
}

/// Starts a phase or fetch scope: its start ticks (0: not recording) and,
/// when recording, the loop's position.
inline std::int64_t hot_enter(HotState& h, model::Event e) noexcept {
  const std::int64_t start = hot_scope_begin(h);
  if (start != 0) hot_position(h, loop_phase_of(e));
  return start;
}

inline void hot_add(HotState& h, ThreadRecorder& r, model::Event e, std::int64_t start) noexcept {
  r.add(e, start, timing::now_ticks());
  hot_leave(h, r);
}

inline void hot_fetch(HotState& h, ThreadRecorder& r, std::int64_t start) noexcept {
  r.add_fetch(start, timing::now_ticks());
  hot_leave(h, r);
}

/// How a step scope ended.
enum class StepEnd {
  Nested,     ///< an inner StepScope: the outer one is the step
  Dropped,    ///< left by an exception, tracing stopped, or past --trace-max-steps
  Published,  ///< queued for the sender
};

/// Ends a step: nested steps end with the outermost; a failed step (left by an
/// exception) or one past --trace-max-steps is not recorded. `before_publish`
/// sees the finished step just before it is queued (the GPU side adds to it).
template <class BeforePublish>
inline StepEnd hot_step_end(HotState& h, ThreadRecorder& r, std::int64_t start, bool failed,
                            BeforePublish&& before_publish) noexcept {
  const std::int64_t end = timing::now_ticks();
  if (!r.leave_step()) return StepEnd::Nested;
  hot_position(h, model::LoopPhase::Outside);
  if (failed || h.state.load(std::memory_order_acquire) != kRecording) {
    r.discard();
    return StepEnd::Dropped;
  }
  const std::int64_t step = h.last_step.fetch_add(1, std::memory_order_relaxed) + 1;
  if (h.max_steps > 0 && step > h.max_steps) {
    // Not recorded, so not counted: the steps done (heartbeat, black box)
    // stay the steps traced, the last position known.
    h.last_step.fetch_sub(1, std::memory_order_relaxed);
    h.state.store(kMaxStepsReached, std::memory_order_release);
    r.discard();
    return StepEnd::Dropped;
  }
  RawStep s = r.finish(step, start, end);
  before_publish(s);
  // First into the black box: a rank that dies now has it there.
  if (h.black_box != nullptr) to_black_box(*h.black_box, s);
  r.publish(s);
  return StepEnd::Published;
}

/// hot_step_end without a GPU side; true when the step was published.
inline bool hot_step_end(HotState& h, ThreadRecorder& r, std::int64_t start, bool failed) noexcept {
  return hot_step_end(h, r, start, failed, [](RawStep&) noexcept {}) == StepEnd::Published;
}

}  // namespace traceml::runtime
