// What the GPU did, per step: turns activity records (CUPTI's, normalized by
// timing/cupti_activity_source) into the host-to-device copy, collective and
// busy time of the work each step launched.
//
// A GPU activity carries no step: it carries the correlation id of the CUDA
// API call that launched it, and that call has a CPU timestamp. A step owns
// the activities whose launching call began inside its CPU window. Pure code
// on normalized records, so that tests drive it with synthetic ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/telemetry.hpp"

namespace traceml::timing {

/// A CUDA runtime or driver API call, the CPU side of GPU work: the kernels,
/// copies and memsets it launched carry its correlation id. Most API calls
/// (cudaGetDevice, ...) launch nothing; they are records like any other.
struct ApiLaunch {
  std::uint32_t correlation_id = 0;
  std::int64_t cpu_ns = 0;  ///< when the call began, on now_ns()'s clock
};

enum class ActivityKind : std::uint8_t { Kernel, Memcpy, Memset };

/// Direction of a copy. Copies to or from CUDA arrays count with device memory
/// (an array lives on the GPU); host-to-host and unknown copies are Other.
enum class CopyKind : std::uint8_t { HostToDevice, DeviceToHost, DeviceToDevice, Other };

/// One piece of GPU work as it executed.
struct GpuActivity {
  ActivityKind kind = ActivityKind::Kernel;
  std::uint32_t correlation_id = 0;  ///< of the ApiLaunch that launched it
  std::int64_t start_ns = 0;         ///< GPU execution, on now_ns()'s clock
  std::int64_t end_ns = 0;
  CopyKind copy_kind = CopyKind::Other;  ///< Memcpy only
  bool from_pageable = false;  ///< Memcpy only: the source is pageable (unpinned) host memory
  std::uint64_t bytes = 0;     ///< Memcpy and Memset
  bool collective = false;     ///< Kernel only: an NCCL kernel
};

/// True for the kernels of NCCL: their names start with "nccl"
/// (ncclKernel_AllReduce_RING_LL_Sum_float up to NCCL 2.18,
/// ncclDevKernel_AllReduce_Sum_f32_RING_LL and ncclDevKernel_Generic since),
/// plain or Itanium-mangled as CUPTI reports them
/// (_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE).
bool is_collective_kernel(std::string_view name) noexcept;

struct AttributorSettings {
  /// Launches and activities held at once, waiting for their counterpart or
  /// their step: a few MB. A large step launches ~10k kernels and a few API
  /// calls per kernel, so this holds several steps of lag.
  std::size_t max_records = std::size_t{1} << 18;
};

/// Joins launches with activities and hands each step the activities launched
/// inside its CPU window. Streaming with bounded memory; used by one thread.
///
/// Feeding: add() takes records in any batching and order: a launch may come
/// before or after its activities, in another batch. One launch may own
/// several activities (a graph launch, a copy split by the driver).
///
/// Attributing: attribute(begin, end) is called for steps in the order they
/// ended, each once the GPU has finished the step's work and the records of
/// that work have been added (the source delivers records only once the GPU
/// has written their timestamps). It takes every activity whose launch began
/// in [begin, end] (both inclusive) and settles everything launched at or
/// before `end`:
///  - activities launched before `begin` and not taken by an earlier step ran
///    between steps (or before the first): discarded, counted in
///    outside_steps();
///  - launches at or before `end` are freed: any activity of theirs that still
///    comes is counted in late() and discarded, as is any activity whose
///    launch arrives at or before a settled time;
///  - activities whose launch never came are kept for one more step (the
///    launch may sit in a later batch), then counted in unmatched(): an
///    activity that started at or before the previous settled time can only
///    have been launched before it.
/// discard_until(t) settles like a step without taking anything: for
/// stretches without steps (evaluation, checkpoints), so that their records
/// do not fill the store.
/// When max_records are held, new records are dropped and counted in
/// dropped(); the step they belonged to is then short of them.
class ActivityAttributor {
 public:
  explicit ActivityAttributor(AttributorSettings settings = {});

  /// Takes the records of one collect.
  void add(const std::vector<ApiLaunch>& launches, const std::vector<GpuActivity>& activities);

  /// The GPU activity of the step whose body ran on the CPU in
  /// [cpu_begin_ns, cpu_end_ns]:
  ///  h2d_*: Memcpy with CopyKind::HostToDevice only (D2H and D2D are not
  ///    H2D); h2d_ms sums their durations (copies on several streams may
  ///    overlap: this is copy work, not wall time), h2d_pageable_* those from
  ///    pageable memory;
  ///  collective_ms: the union of the intervals of collective kernels;
  ///  busy_ms: the union of the intervals of all its kernels, copies and
  ///    memsets (work of other steps running at the same time not included).
  model::StepGpuActivity attribute(std::int64_t cpu_begin_ns, std::int64_t cpu_end_ns);

  /// Settles everything launched at or before `cpu_ns` as outside steps.
  void discard_until(std::int64_t cpu_ns);

  /// Records held now (launches, activities waiting for a step or a launch).
  [[nodiscard]] std::size_t stored() const noexcept {
    return launches_.size() + matched_.size() + orphans_.size();
  }

  /// The latest CPU time of a launch that owns an activity added so far:
  /// the work launched up to it has come back (a launch that owns no
  /// activity, such as cudaEventQuery, says nothing about the work).
  [[nodiscard]] std::optional<std::int64_t> latest_owning_launch() const noexcept {
    return latest_owner_ns_;
  }

  // Counters of activities (dropped: of records), since construction.
  [[nodiscard]] std::int64_t attributed() const noexcept { return attributed_; }
  [[nodiscard]] std::int64_t outside_steps() const noexcept { return outside_steps_; }
  [[nodiscard]] std::int64_t late() const noexcept { return late_; }
  [[nodiscard]] std::int64_t unmatched() const noexcept { return unmatched_; }
  [[nodiscard]] std::int64_t dropped() const noexcept { return dropped_; }

 private:
  struct Matched {
    std::int64_t launch_ns = 0;
    GpuActivity activity;
  };
  struct Interval {
    std::int64_t begin = 0;
    std::int64_t end = 0;
  };

  void place(std::int64_t launch_ns, const GpuActivity& a, bool counted_in_store);
  void settle(std::int64_t until_ns);
  [[nodiscard]] bool full() const noexcept { return stored() >= settings_.max_records; }
  /// Total length of the union of `intervals`, in ms; reorders them.
  static double union_ms(std::vector<Interval>& intervals);

  AttributorSettings settings_;
  std::unordered_map<std::uint32_t, std::int64_t> launches_;     // correlation id -> cpu_ns
  std::vector<Matched> matched_;                                 // launch known, step not yet
  std::unordered_multimap<std::uint32_t, GpuActivity> orphans_;  // launch not seen yet
  /// Launches at or before this time have been settled. Starts before any
  /// possible time so that the first step settles nothing early.
  std::int64_t settled_until_ = std::numeric_limits<std::int64_t>::min();
  std::vector<Interval> busy_;  // scratch of attribute(), kept to reuse its memory
  std::vector<Interval> collective_;

  std::optional<std::int64_t> latest_owner_ns_;
  std::int64_t attributed_ = 0;
  std::int64_t outside_steps_ = 0;
  std::int64_t late_ = 0;
  std::int64_t unmatched_ = 0;
  std::int64_t dropped_ = 0;
};

}  // namespace traceml::timing
