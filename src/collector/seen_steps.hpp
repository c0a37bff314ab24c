// Which of a rank's latest steps the collector has: a window of bits over its
// newest step ids, so that steps read back from a dead rank's black box are
// stored only where the connection did not already bring them. std only.
#pragma once

#include <array>
#include <cstdint>

namespace traceml::collector {

class SeenSteps {
 public:
  /// Step ids the window spans (2 KiB of bits): four times a black box's
  /// journal, so that every step it holds falls inside.
  static constexpr std::int64_t kWindow = 16384;

  /// A step arrived. One older than the window is not tracked.
  void mark(std::int64_t step) noexcept {
    if (step < base_) return;
    if (step - base_ >= kWindow) slide(step - kWindow + 1);
    const auto i = static_cast<std::uint64_t>(step % kWindow);
    bits_[i / 64] |= std::uint64_t{1} << (i % 64);
  }

  /// Whether the step arrived; a step older than the window counts as
  /// arrived (the window follows the newest step, and a black box holds
  /// only the last ones).
  [[nodiscard]] bool has(std::int64_t step) const noexcept {
    if (step < base_) return true;
    if (step - base_ >= kWindow) return false;
    const auto i = static_cast<std::uint64_t>(step % kWindow);
    return (bits_[i / 64] >> (i % 64) & 1u) != 0;
  }

  /// A new process of the rank: its step ids start again.
  void reset() noexcept { *this = SeenSteps(); }

 private:
  /// Moves the window's start up to `base`, forgetting the steps below it.
  void slide(std::int64_t base) noexcept {
    if (base - base_ >= kWindow) {
      bits_.fill(0);
    } else {
      for (std::int64_t s = base_; s < base; ++s) {
        const auto i = static_cast<std::uint64_t>(s % kWindow);
        bits_[i / 64] &= ~(std::uint64_t{1} << (i % 64));
      }
    }
    base_ = base;
  }

  std::int64_t base_ = 0;  // the oldest step id the window tracks (steps start at 1)
  std::array<std::uint64_t, kWindow / 64> bits_{};
};

}  // namespace traceml::collector
