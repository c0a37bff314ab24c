// Where each rank is while the run goes: when it was last heard from, the
// highest step it has sent, and (from its heartbeats) the step and phase it
// is in now. The collector's I/O thread feeds it; the live view reads it, and
// it turns a rank that stops talking (silent) or stops advancing (stalled)
// into a Stall that the run's summary lists (docs/live.md).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "model/position.hpp"

namespace traceml::collector {

using LiveClock = std::chrono::steady_clock;

/// How a rank stands now.
enum class RankCondition : std::uint8_t {
  Waiting,  ///< connected, no step yet
  Running,  ///< steps advance
  /// Between steps for long while no rank waits for it (an evaluation pass,
  /// the work after its last step): no stall (DECISIONS 15).
  Idle,
  Stalled,  ///< it is heard from, but its step has not advanced for long
  Silent,   ///< nothing heard from it for 3 intervals
  Ended,    ///< its connection closed
};
const char* condition_name(RankCondition c);

/// One rank as the live view draws it.
struct RankLive {
  int global_rank = 0;
  std::optional<int> node_rank;
  RankCondition condition = RankCondition::Waiting;
  std::int64_t max_step = 0;  ///< highest step id received (0: none)
  /// From the latest heartbeat (absent for a rank that sends none).
  std::optional<model::RankPosition> position;
  double quiet_s = 0.0;              ///< seconds since anything arrived from the rank
  double stuck_s = 0.0;              ///< seconds since its step last advanced
  std::int64_t records_dropped = 0;  ///< the tracer's own count, as last reported

  /// Steps the rank has finished: its records' or its heartbeat's count,
  /// whichever is ahead (steps past --trace-max-steps send no record).
  [[nodiscard]] std::int64_t steps_done() const {
    return position ? std::max(position->steps_done, max_step) : max_step;
  }
  /// The step the rank is in or about to begin.
  [[nodiscard]] std::int64_t current_step() const { return steps_done() + 1; }
};

/// When the rules call a rank stalled or silent.
struct StallRules {
  double interval_s = 1.0;  ///< the ranks' heartbeat and flush interval
  /// A rank is stalled when its step has not advanced for this many of its
  /// median step times, and never sooner than kSilentIntervals intervals
  /// (steps reach the collector once an interval).
  double step_multiple = 20.0;
};
inline constexpr double kSilentIntervals = 3.0;

class LiveBoard {
 public:
  explicit LiveBoard(StallRules rules, double started_unix);

  // ---- the collector's I/O thread; `now` read once per batch ----
  void connected(int rank, std::optional<int> node_rank, LiveClock::time_point now);
  void heard(int rank, std::int64_t max_step, LiveClock::time_point now);
  void heartbeat(const model::RankPosition& p, LiveClock::time_point now);
  void tracer_drops(int rank, std::int64_t dropped);
  void closed(int rank, LiveClock::time_point now);

  /// Sets each rank's median step time in seconds (from the live window):
  /// the stall rule's yardstick. Ranks without one use the floor alone.
  void set_median_steps(const std::vector<std::pair<int, double>>& median_s);

  /// Classifies every rank at `now`, opening and closing stalls as they go.
  /// Called on every live refresh and by the collector's writer at least
  /// twice a second, so stalls are caught in every display mode.
  std::vector<RankLive> update(LiveClock::time_point now);

  /// Every stall so far, in the order they began; one still going counts up
  /// to `now`.
  std::vector<model::Stall> stalls(LiveClock::time_point now);

  /// update() and stalls() at one `now`, under one lock (a live refresh).
  struct Snapshot {
    std::vector<RankLive> ranks;
    std::vector<model::Stall> stalls;
  };
  Snapshot snapshot(LiveClock::time_point now);

  /// The most stalls kept; later ones are only counted (a rank that flaps
  /// between stalled and running must not grow the collector).
  static constexpr std::size_t kMaxStalls = 256;
  [[nodiscard]] std::int64_t stalls_dropped();

 private:
  struct Rank {
    RankLive live;
    LiveClock::time_point last_heard{};
    LiveClock::time_point step_advanced{};
    std::optional<double> median_step_s;
    int open = 0;
    std::optional<std::size_t> stall;  ///< index into stalls_ of the open stall
    bool stall_uncounted = false;      ///< stopped past kMaxStalls: counted once, kept not
  };
  Rank& rank(int r);
  /// The rank's condition at `now` by its own rules alone (Idle: between
  /// steps for long; whether another rank waits for it is the caller's).
  RankCondition classify(Rank& r, LiveClock::time_point now);
  /// Makes `next` the rank's condition: opens, extends or closes its stall.
  void settle(Rank& r, RankCondition next, LiveClock::time_point now);
  std::vector<RankLive> update_locked(LiveClock::time_point now);
  double unix_at(LiveClock::time_point t) const;

  std::mutex mu_;
  StallRules rules_;
  LiveClock::time_point started_;
  double started_unix_;
  std::vector<Rank> ranks_;  ///< by global rank; gaps are never-seen ranks
  std::vector<model::Stall> stalls_;
  std::int64_t stalls_dropped_ = 0;
};

}  // namespace traceml::collector
