// The run while it goes, computed once: per rank its step time and how the
// step splits over the latest window, where it stands (running, stalled,
// silent), the verdict so far, the hang if any, and the collector's counts.
// The collector's writer thread makes one each interval (at most twice a
// second, at least once a second) and publishes it; the live view and the
// metrics endpoint (`--metrics-port`) read the latest one, so that neither
// a refresh nor a scrape ever makes the collector work or takes its locks
// (docs/metrics.md, docs/live.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "analysis/section.hpp"
#include "collector/live_board.hpp"
#include "model/position.hpp"
#include "store/run_db.hpp"

namespace traceml::collector {

/// Rows per rank the live view diagnoses (TraceML's live window).
inline constexpr std::int64_t kLiveRows = 100;

/// The run while it goes, as the collector holds it: the latest rows and
/// the board.
struct LiveStatus {
  store::RunData latest;             ///< per rank its latest rows (RunState::latest)
  std::vector<RankLive> ranks;       ///< every rank heard from, by global rank
  std::vector<model::Stall> stalls;  ///< every stall so far
  std::int64_t invalid_records = 0;
  std::int64_t rejected_connections = 0;
};

/// One rank: where it is, and how its steps in the live window split.
struct RankRow {
  RankLive live;
  std::int64_t rows = 0;            ///< steps in the live window
  std::optional<double> last_ms;    ///< its latest step, input wait included
  std::optional<double> median_ms;  ///< median over the live window
  std::optional<double> p95_ms;     ///< 95th percentile over the live window
  bool gpu_clock = false;           ///< phases below on the GPU clock
  /// Mean ms per step over the live window, on that clock.
  double input_ms = 0.0;
  double h2d_ms = 0.0;
  double forward_ms = 0.0;
  double backward_ms = 0.0;
  double optimizer_ms = 0.0;
  double residual_ms = 0.0;  ///< the traced step less its timed phases

  /// The mean step of the window, its parts added (0 without steps).
  [[nodiscard]] double split_ms() const {
    return input_ms + h2d_ms + forward_ms + backward_ms + optimizer_ms + residual_ms;
  }
};

/// The verdict of the end of the run's engine on the live window.
struct LiveVerdict {
  std::string kind;     ///< "INPUT_BOUND", ...
  std::string status;   ///< "INPUT-BOUND", ...
  std::string summary;  ///< one sentence; may be empty
  analysis::Severity severity = analysis::Severity::Info;

  /// "INPUT-BOUND: input wait is ..." (empty before any step).
  [[nodiscard]] std::string text() const {
    return status.empty() ? std::string() : status + (summary.empty() ? "" : ": " + summary);
  }
};

/// The collector's own counts, as they stood when the snapshot was taken.
struct CollectorCounts {
  std::int64_t records_received = 0;      ///< accepted records, all ranks
  std::int64_t invalid_records = 0;       ///< refused by the value checks
  std::int64_t rejected_connections = 0;  ///< refused peers
  std::int64_t stalls_dropped = 0;        ///< stalls past LiveBoard::kMaxStalls
};

struct LiveSnapshot {
  /// When it was taken (unix seconds; 0: the empty one a collector starts with).
  double taken_unix = 0.0;
  /// How long taking it took, in seconds (docs/performance.md).
  double cost_s = 0.0;
  std::optional<int> world_size;
  std::vector<RankRow> ranks;  ///< every rank heard from, by global rank
  std::vector<model::Stall> stalls;
  /// The rank that hangs now (model::hung_stall, its rank still silent or
  /// stalled): the headline (DECISIONS 15). Absent while none hangs.
  std::optional<int> hung_rank;
  std::optional<LiveVerdict> verdict;  ///< absent before any step
  CollectorCounts counts;

  /// The tracers' dropped records, all ranks, as each last reported.
  [[nodiscard]] std::int64_t records_dropped() const;
  /// Ranks with a connection open now.
  [[nodiscard]] int ranks_connected() const;
};

/// The rank that hangs now: model::hung_stall's, while its rank is still
/// silent or stalled (one that ended, or runs again, is no hang now).
std::optional<int> hung_rank(const std::vector<model::Stall>& stalls,
                             const std::vector<RankRow>& ranks);

/// The snapshot of `status` (its latest rows and board): the rows, the
/// verdict on those rows (analysis::summarize, window kLiveRows), the hang.
/// `counts`, `world_size` and the times are the caller's.
LiveSnapshot snapshot_of(const LiveStatus& status);

/// The latest snapshot, handed from the writer thread to its readers: a
/// pointer swapped under a mutex held for no longer than the swap.
class SnapshotChannel {
 public:
  SnapshotChannel() : latest_(std::make_shared<const LiveSnapshot>()) {}
  void publish(std::shared_ptr<const LiveSnapshot> s) {
    std::lock_guard<std::mutex> lk(mu_);
    latest_ = std::move(s);
  }
  /// Never null: an empty snapshot until the first is published.
  [[nodiscard]] std::shared_ptr<const LiveSnapshot> latest() const {
    std::lock_guard<std::mutex> lk(mu_);
    return latest_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const LiveSnapshot> latest_;
};

/// How often the writer takes a snapshot: once an interval (the ranks send
/// once an interval), never more than twice a second nor less than once.
inline std::chrono::milliseconds snapshot_period(double interval_s) {
  const double s = interval_s < 0.5 ? 0.5 : interval_s > 1.0 ? 1.0 : interval_s;
  return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000.0));
}

}  // namespace traceml::collector
