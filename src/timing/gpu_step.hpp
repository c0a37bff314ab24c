// What the GPU clock records for one step, and what it resolves to.
//
// A step's GPU record lists, for each scope that ran (input fetches before the
// step, phases inside it, the step itself), the pair of CUDA events recorded
// at its begin and end on the current stream. Once the GPU has passed every
// event, the resolver turns the pairs into per-event GPU milliseconds.
//
// Input wait on the GPU clock. Each fetch is bracketed by a pair of events
// like any phase (TraceML times dataloader_next with CUDA events too, spec
// §3.2). The elapsed GPU time between them is how long the GPU went without
// new work while the rank waited for input: about zero when the GPU was still
// busy with queued work (the fetch was hidden), up to the whole wait when the
// GPU ran dry. That is what "input-bound" means on the GPU clock. We do not
// copy the CPU wait into gpu_ms: the analysis reads the GPU clock only when
// every row has a GPU input wait and a GPU traced step time (spec §4.1.3,
// analysis/step_window.cpp scan_row), and would then mix a CPU wait into GPU
// step times. A step timed on the GPU that fetched nothing gets a measured GPU
// input wait of 0.0, matching the CPU side's measured 0 for such steps
// (runtime/thread_recorder.hpp), so that steps without a fetch do not push the
// whole window back to the CPU clock.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "model/telemetry.hpp"
#include "timing/event_pool.hpp"

namespace traceml::timing {

/// One timed scope: the events recorded at its begin and end.
struct GpuInterval {
  EventId start = 0;
  EventId end = 0;
  model::Event region = model::Event::TracedStepTime;
};

/// Scopes one step can time on the GPU: fetch, copies, forward, backward,
/// optimizer and the step with room for gradient accumulation. A region whose
/// scopes do not fit gets no GPU value for that step (a partial sum would
/// understate it).
inline constexpr std::size_t kMaxGpuIntervalsPerStep = 32;

/// The GPU side of one step as the training thread leaves it: a plain value
/// (about 200 bytes) that can travel through the step ring.
struct GpuStepRecord {
  std::array<GpuInterval, kMaxGpuIntervalsPerStep> intervals{};
  std::uint8_t count = 0;
  /// bit e: a scope of event e ran on this step but got no GPU timing (no free
  /// event, a failed cudaEventRecord, no room): e's GPU value is absent.
  std::uint8_t skipped_mask = 0;
};
static_assert(std::is_trivially_copyable_v<GpuStepRecord>, "records are copied through rings");

/// How a step's GPU record ended.
enum class GpuOutcome : std::uint8_t {
  Resolved,   ///< every event completed and was read
  Expired,    ///< some event did not complete within the deadline
  Failed,     ///< a CUDA call on the step's events returned an error
  Abandoned,  ///< dropped unresolved when tracing stopped
};

/// The GPU milliseconds of one step, per event. gpu_ms[e] is absent when e got
/// no GPU timing on the step (a skipped scope, or an outcome other than
/// Resolved); 0.0 when the step was timed on the GPU and no scope of e ran in
/// it (merge_gpu_times keeps it only where the CPU measured e too).
struct GpuStepTimes {
  std::int64_t step = 0;
  std::array<std::optional<double>, model::kEventCount> gpu_ms{};
  GpuOutcome outcome = GpuOutcome::Resolved;
};

/// Adds a step's GPU values to its CPU record: an event gets a GPU value only
/// where the CPU measured it, since an event is present in a record exactly
/// when the CPU timed it.
void merge_gpu_times(const GpuStepTimes& gpu, model::StepEvents& events);

}  // namespace traceml::timing
