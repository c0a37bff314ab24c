// Where a rank is in its training loop, as its heartbeat says, and the stalls
// the collector saw: a rank that stopped talking or stopped advancing.
// std only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace traceml::model {

/// The part of the training loop a rank is in. Values are on the wire: never
/// renumber. The phases share model::Event's order, offset by 2.
enum class LoopPhase : std::uint8_t {
  Outside = 0,        ///< between steps (or before the first)
  Step = 1,           ///< inside the step body, in no timed phase
  InputWait = 2,      ///< fetching the next batch
  H2D = 3,            ///< host-to-device copies
  Forward = 4,        ///< forward pass
  Backward = 5,       ///< backward pass (and the gradient all-reduce in it)
  OptimizerStep = 6,  ///< optimizer.step()
};
inline constexpr std::uint8_t kMaxLoopPhase = 6;

/// The name users read: "outside a step", "step", "input wait", "h2d",
/// "forward", "backward", "optimizer step".
const char* loop_phase_name(LoopPhase p);
/// The storage name (JSON, database): "outside", "step", "input_wait", ...
const char* loop_phase_key(LoopPhase p);
std::optional<LoopPhase> loop_phase_from_key(const std::string& key);
/// Phases in which data-parallel ranks run collectives (DDP's all-reduce in
/// backward; ZeRO/FSDP gathers in the optimizer step): a rank that sits in one
/// while another rank is elsewhere is likely waiting for that rank.
bool collective_phase(LoopPhase p);

/// A rank's heartbeat: sent every interval, also when no step completes.
struct RankPosition {
  int global_rank = 0;
  double ts = 0.0;              ///< unix seconds when it was read
  std::int64_t steps_done = 0;  ///< steps the rank has finished (recorded or not)
  LoopPhase phase = LoopPhase::Outside;
  /// False once the rank stopped recording (--trace-max-steps reached,
  /// tracing off): its step count no longer moves, so it cannot be called
  /// stalled, only silent.
  bool recording = true;
};

/// A time a rank was stalled or silent (docs/live.md).
struct Stall {
  int global_rank = 0;
  std::string kind;                ///< "stalled" (heard from, not advancing) or "silent"
  std::int64_t step = 0;           ///< the step it was in or about to begin (steps done + 1)
  std::optional<LoopPhase> phase;  ///< absent when the rank sent no heartbeat
  double start = 0.0;              ///< unix seconds
  double duration_s = 0.0;
  /// The rank advanced again. False while the stall goes on, and when the
  /// rank ended (or was stopped) without resuming: a hang.
  bool resumed = false;
  /// Other ranks sat in a collective phase meanwhile: they were likely
  /// waiting for this rank.
  std::optional<int> others_waiting;
  /// `step` and `phase` were read from the rank's black box after it ended
  /// (where it really was), not from its last heartbeat.
  bool from_black_box = false;
};

/// The hang of a run that ended with ranks still stalled or silent
/// (DECISIONS 15): of the stalls that never resumed, the first whose rank the
/// others waited for, else the first. Null when every stall resumed.
const Stall* hung_stall(const std::vector<Stall>& stalls);

}  // namespace traceml::model
