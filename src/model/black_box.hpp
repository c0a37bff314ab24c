// The black box: a rank's last moments in memory it shares with the node's
// `traceml run`, which outlive the rank. The launcher makes one region per
// rank; the rank's training threads write every step they complete into its
// journal, and its sender thread writes where the loop is and how to read the
// clock. When the rank dies (any signal) the launcher reads what it holds and
// hands the collector the steps it had not sent (store/black_box.hpp).
//
// The layout is plain data at fixed offsets, read by another process of the
// same build: nothing in it points anywhere, and each field a writer changes
// while a reader may look is an atomic of a lock-free width. std only.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "model/step_record.hpp"

namespace traceml::model {

/// "TMLBBOX" and a format number: a region another build made is not read.
inline constexpr std::uint64_t kBlackBoxMagic = 0x31584f4242'4c4d54ULL;  // "TMLBBOX1"
inline constexpr std::uint32_t kBlackBoxVersion = 1;

/// Steps a journal holds: the last ones a rank completed. 4,096 steps are
/// 4 s of 1 ms steps; a rank sends at least every 0.5 s.
inline constexpr std::uint32_t kBlackBoxSlots = 4096;

/// One completed step as the training thread left it (runtime::RawStep's
/// values: ticks, converted with the header's clock when read).
struct BlackBoxStep {
  std::int64_t step = 0;
  std::int64_t end_ticks = 0;
  std::array<std::int64_t, kEventCount> ticks{};  ///< each event's time on the step
  std::array<std::int64_t, kEventCount> begin_ticks{};
  std::uint8_t mask = 0;
  std::uint8_t begin_mask = 0;
  std::uint16_t thread = 0;
  std::uint8_t has_memory = 0;
  std::int32_t memory_device = 0;
  double peak_allocated_bytes = 0.0;
  double peak_reserved_bytes = 0.0;
};

struct alignas(64) BlackBoxSlot {
  /// The journal index this slot holds plus one, stored (release) after the
  /// step: a slot whose sequence is not its index's was torn by a death or
  /// overwritten, and is not read.
  std::atomic<std::uint64_t> sequence{0};
  BlackBoxStep step;
};

struct BlackBoxHeader {
  // ---- the launcher, before the rank starts ----
  std::uint64_t magic = kBlackBoxMagic;
  std::uint32_t version = kBlackBoxVersion;
  std::uint32_t slots = kBlackBoxSlots;
  std::uint64_t bytes = 0;  ///< the region's size
  std::int32_t global_rank = 0;

  // ---- the rank, once at init ----
  /// 0: free; 2: claimed by the rank that mapped it; 1: the fields below set.
  std::atomic<std::uint32_t> attached{0};
  std::atomic<std::int64_t> pid{0};
  std::atomic<std::uint64_t> stream{0};  ///< its protocol-4 stream (0: none)
  /// now_ns() nanoseconds to unix seconds (timing::WallMapping).
  std::atomic<double> wall_offset_s{0.0};

  // ---- the sender thread, every wake-up (a sequence lock) ----
  /// Odd while the fields below change.
  std::atomic<std::uint32_t> clock_sequence{0};
  std::atomic<std::uint32_t> tsc{0};  ///< 1: ticks are TSC counts, else now_ns()
  std::atomic<std::int64_t> anchor_ticks{0};
  std::atomic<std::int64_t> anchor_ns{0};
  std::atomic<double> ns_per_tick{1.0};
  /// The steps finished, as the heartbeat reads them, and when the sender
  /// read them (unix seconds).
  std::atomic<std::int64_t> steps_done{0};
  std::atomic<double> position_ts{0.0};

  // ---- the training threads ----
  /// Where the loop is (a LoopPhase), stored at every scope edge.
  alignas(64) std::atomic<std::uint8_t> phase{0};
  /// Journal indexes taken so far; slot i % slots holds index i.
  alignas(64) std::atomic<std::uint64_t> next{0};
};

/// The whole region: the header, then the slots.
struct BlackBoxRegion {
  BlackBoxHeader header;
  std::array<BlackBoxSlot, kBlackBoxSlots> slots;
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free &&
                  std::atomic<double>::is_always_lock_free &&
                  std::atomic<std::int64_t>::is_always_lock_free,
              "the region is shared between processes: its atomics must be lock-free");

inline constexpr std::size_t kBlackBoxBytes = sizeof(BlackBoxRegion);

/// The training thread, at a step's end: one atomic add, `fill` writing the
/// step into its slot, one release store; no lock, no allocation, no system
/// call. Several threads may journal at once (each takes its own index).
template <typename Fill>
inline void journal_step(BlackBoxRegion& box, Fill&& fill) noexcept {
  const std::uint64_t i = box.header.next.fetch_add(1, std::memory_order_relaxed);
  BlackBoxSlot& slot = box.slots[i % kBlackBoxSlots];
  slot.sequence.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  fill(slot.step);
  slot.sequence.store(i + 1, std::memory_order_release);
}

}  // namespace traceml::model
