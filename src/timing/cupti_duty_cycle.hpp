// CUPTI on a duty cycle (TRACEML_CUPTI_DUTY=K/M): activity records for a
// window of K steps every M steps, off in between, so that a fast loop pays
// CUPTI's per-call cost on K/M of its steps only (issue 36; not the default
// until a GPU run says what it saves, docs/gpu-validation.md).
//
// The training thread switches the records at step boundaries: at the begin
// of every outermost step it compares the step id with the next boundary (one
// relaxed load and a compare; no lock, no allocation) and only at a boundary
// takes a mutex and turns CUPTI's kinds off or on. Each window keeps the CPU
// times between which the records were on; the sender's step pipeline asks
// whether a step lies inside one (its evidence is then whole) and, once a
// window closed, when: no launch after that time will ever carry the records'
// horizon past the window's last step, so the pipeline flushes them out as
// soon as the GPU has passed it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <string>

namespace traceml::timing {

class CuptiActivitySource;

/// Records for `window` steps of every `period` (1 <= window < period). Steps
/// count from 1; the windows are steps 1..window, period+1..period+window, ...
struct DutyCycle {
  std::int64_t window = 0;
  std::int64_t period = 0;

  /// Records on every step: no duty cycle, CUPTI's records lent only to
  /// LibTorch's profiler (CuptiDutyCycle::lend).
  static constexpr DutyCycle always() { return DutyCycle{1, 1}; }
  [[nodiscard]] constexpr bool is_always() const noexcept { return window >= period; }
  /// Whether step `step` (from 1) lies in a window.
  [[nodiscard]] bool records(std::int64_t step) const noexcept {
    return is_always() || (step >= 1 && (step - 1) % period < window);
  }
  /// The first step after `step` whose records() differs from step's.
  [[nodiscard]] std::int64_t next_boundary(std::int64_t step) const noexcept;
  friend bool operator==(const DutyCycle& a, const DutyCycle& b) {
    return a.window == b.window && a.period == b.period;
  }
};

/// The longest period accepted: a window every million steps is as good as off.
inline constexpr std::int64_t kMaxDutyPeriod = 1'000'000;

/// TRACEML_CUPTI_DUTY's value: "K/M" (e.g. "8/128") is a duty cycle; "off",
/// "0" or empty is none (records on every step, the default). Anything else
/// sets `why` to the reason in a few words and gives none.
std::optional<DutyCycle> parse_duty_cycle(const std::string& text, std::string& why);

/// The switch between windows, shared by the training threads (at_step_begin)
/// and the sender (covers, records_off_after). Never throws.
class CuptiDutyCycle {
 public:
  /// `source` must be running with its records on; the first window opens
  /// at `started_ns` (now_ns clock), or holds every step before too with
  /// DutyCycle::always() (whose at_step_begin never switches).
  CuptiDutyCycle(DutyCycle cycle, CuptiActivitySource& source, std::int64_t started_ns) noexcept;
  CuptiDutyCycle(const CuptiDutyCycle&) = delete;
  CuptiDutyCycle& operator=(const CuptiDutyCycle&) = delete;

  /// Training thread, before an outermost step begins, with the id that step
  /// will get. The hot path: a compare, except at a boundary.
  void at_step_begin(std::int64_t step) noexcept {
    if (step < next_boundary_.load(std::memory_order_relaxed)) return;
    switch_at(step);
  }

  /// The source is stopping or going away: no switch from now on (a training
  /// thread still inside at_step_begin finishes first).
  void detach() noexcept;

  /// LibTorch's profiler takes CUPTI (a capture begins; its training
  /// thread, at a step edge): the GPU finishes its work (settle_with), the
  /// records go off and their window closes now, the source lends CUPTI
  /// (CuptiActivitySource::lend), and no boundary switches them until
  /// take_back(). A step that ran while lent is not covered: its GPU
  /// activity is missing, never another user's. False when it could not
  /// (CUPTI refused, or the source is gone).
  bool lend() noexcept;
  /// The capture ended before step `next` begins: the source takes CUPTI
  /// back and, when the cycle records `next`, a window opens now. False when
  /// CUPTI refused the callbacks back (the source stays lent, its records
  /// off, and the next capture's end tries again) or the records back (off
  /// until the next boundary or capture's end); each counted a refused
  /// switch. True when the source has stopped meanwhile.
  bool take_back(std::int64_t next) noexcept;
  /// What lend() calls first, without a lock, on the lending thread: the
  /// device finishes its work (runtime: cudaDeviceSynchronize, guarded);
  /// false refuses the lend. Null: nothing to settle.
  void settle_with(bool (*settle)() noexcept) noexcept;
  /// Lends so far.
  [[nodiscard]] std::int64_t lends() const noexcept;

  /// Whether every launch between begin_ns and end_ns (now_ns clock) was made
  /// with the records on: the step lies inside one window.
  [[nodiscard]] bool covers(std::int64_t begin_ns, std::int64_t end_ns) const noexcept;
  /// When the records were turned off after `end_ns`, if the window that
  /// holds it has closed; absent while it is open (or none holds it).
  [[nodiscard]] std::optional<std::int64_t> records_off_after(std::int64_t end_ns) const noexcept;

  [[nodiscard]] const DutyCycle& cycle() const noexcept { return cycle_; }
  /// Windows opened (the first, at start, included).
  [[nodiscard]] std::int64_t windows() const noexcept;
  /// Switches CUPTI refused (the records stayed as they were).
  [[nodiscard]] std::int64_t failed_switches() const noexcept;
  /// Whether the records are on now.
  [[nodiscard]] bool recording() const noexcept;

 private:
  void switch_at(std::int64_t step) noexcept;
  struct Window {
    std::int64_t on_ns = 0;
    std::int64_t off_ns = std::numeric_limits<std::int64_t>::max();  ///< max while open
  };
  /// The windows a step can still wait in: the sender settles a step within
  /// seconds, and 64 windows span at least 64 periods of steps.
  static constexpr std::size_t kWindows = 64;
  const Window* holding(std::int64_t begin_ns, std::int64_t end_ns) const noexcept;

  const DutyCycle cycle_;
  std::atomic<std::int64_t> next_boundary_;
  mutable std::mutex mu_;
  CuptiActivitySource* source_;  // guarded by mu_; null once detached
  bool on_ = true;               // guarded by mu_
  bool lent_ = false;            // guarded by mu_: the source is lent
  std::atomic<bool (*)() noexcept> settle_{nullptr};
  std::int64_t lends_ = 0;                  // guarded by mu_
  std::array<Window, kWindows> windows_{};  // ring, guarded by mu_
  std::int64_t opened_ = 0;                 // windows ever opened, guarded by mu_
  std::int64_t failed_ = 0;                 // guarded by mu_
};

}  // namespace traceml::timing
