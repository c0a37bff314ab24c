// The run in memory, as it arrives: what the end-of-run diagnosis reads, kept
// bounded whatever the run's length. The collector feeds it next to the run
// database, `traceml report RUN_DIR` feeds it from the database, and both
// diagnose the same state, so the two summaries are the same bytes.
//
// What is kept (docs/run-database.md "In memory"): per rank, the rows of its
// latest analysis::step_history(window) distinct steps and of its latest
// analysis::step_memory_history(window) step-memory steps; per rank and per
// node, at least the latest `window` samples and the few older ones that
// whole-run facts rest on (a GPU seen, its largest memory); and the run's
// totals (model::RunTotals). Rows arrive in chunks that are sealed once full:
// a snapshot copies pointers to sealed chunks under the lock and reads them
// outside it, so a reader never holds ingest up for more than a chunk.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "store/run_db.hpp"

namespace traceml::collector {

class RunState final : public store::RunSink {
 public:
  /// `window`: the analysis window the run will be diagnosed with (>= 1).
  explicit RunState(std::int64_t window);
  ~RunState() override;
  RunState(const RunState&) = delete;
  RunState& operator=(const RunState&) = delete;

  void add(const model::Record& r) override;

  /// Runs `f` with a sink into this state under one lock: a batch of records
  /// pays for the lock once. `f` must not call back into this state.
  template <typename F>
  void apply(F&& f) {
    std::lock_guard<std::mutex> lk(mu_);
    f(*unlocked_);
  }

  /// The run as it stands, for a reader on any thread while records arrive.
  /// Each rank's rows keep their arrival order; steps come rank by rank,
  /// the other records interleaved row by row across ranks.
  /// `telemetry.totals` is always set.
  [[nodiscard]] store::RunData snapshot() const;

  /// The run's latest part, for the live view: per rank its latest `rows`
  /// step, step-memory and process rows, per node its latest `rows` system
  /// samples, the identities and the totals. Copies at most that many rows
  /// under the lock (64 ranks x 100 rows: 6,400), whatever the run's length.
  [[nodiscard]] store::RunData latest(std::int64_t rows) const;

  /// The run, moved out at its end: chunks are freed as they are copied, so
  /// the peak is the result plus a chunk per rank. The state is empty after.
  [[nodiscard]] store::RunData take();

  /// Rows held now (steps, step memory, process and system samples).
  [[nodiscard]] std::int64_t rows_held() const;

 private:
  struct Impl;
  class Unlocked;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<store::RunSink> unlocked_;  // the sink apply() hands out
  mutable std::mutex mu_;
};

}  // namespace traceml::collector
