// The run database: everything the collector received for one run, in SQLite
// (logs/<run>/telemetry.db). Every artifact is a pure function of it, so
// `traceml report RUN_DIR` can always rebuild them. Schema: docs/run-database.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "model/record_kinds.hpp"
#include "model/telemetry.hpp"

struct sqlite3;

namespace traceml::store {

class StepBlockEncoder;

/// File name of the run database inside a run directory.
inline constexpr const char* kRunDbFileName = "telemetry.db";
/// Version of the schema, stored in the database; a reader refuses another one.
inline constexpr std::int64_t kRunDbSchemaVersion = 2;
/// The oldest schema version a reader still reads (steps one row each).
inline constexpr std::int64_t kRunDbOldestSchemaVersion = 1;

/// A database that cannot be created, written or read. what() is one line that
/// names the file and says what to do.
class RunDbError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The collector's own records (model/record_kinds.hpp).
using RejectedConnection = model::RejectedConnection;
using RankDelivery = model::RankDelivery;

/// Everything in a run database.
struct RunData {
  model::Telemetry telemetry;
  std::vector<RankDelivery> deliveries;  ///< sorted by rank
  std::vector<RejectedConnection> rejected;
  /// Strings the reader repaired: ill-formed UTF-8 replaced, or cut to
  /// model::kMaxTextBytes (a string never blocks a summary; the summary's
  /// tracer block reports the count).
  std::int64_t strings_repaired = 0;
};

/// Takes a run's records one by one, as the collector receives them or as
/// read_run_db reads them back: the run database's writer, the collector's
/// in-memory run (collector::RunState) and a plain RunData. A run holds the
/// kinds that have a run-database table (model/record_kinds.hpp); a record
/// of another kind (a heartbeat) is not part of it and is ignored. A later
/// rank identity or delivery of the same rank replaces the earlier one.
class RunSink {
 public:
  virtual ~RunSink() = default;
  virtual void add(const model::Record& r) = 0;
};

/// Calls f(x) with the record `r` holds when its kind is part of a run (has
/// a table); an implementer of RunSink::add overloads f for those kinds.
template <class F>
void visit_stored(const model::Record& r, F&& f) {
  std::visit(
      [&f](const auto& x) {
        using R = std::decay_t<decltype(x)>;
        if constexpr (model::row_of<R>().table != nullptr) f(x);
      },
      r);
}

/// Hands every record of `t` to `sink`, each kind in its order (run info,
/// ranks, steps, step memory, system, process), as a collector would.
void feed(const model::Telemetry& t, RunSink& sink);

/// Writes one run database. Records are written in batched transactions (WAL
/// journal); steps are gathered per rank into blocks (store/step_block.hpp),
/// each stored when it holds kStepBlockRows steps, all of them on flush() or
/// when they hold 8 MiB together. flush() stores and commits what is
/// buffered. Not thread-safe: one writer thread owns it. Values must be
/// finite (the collector checks): a non-step NaN would read back as absent.
class RunDbWriter final : public RunSink {
 public:
  /// Creates `path`. Throws RunDbError when it exists already (a run directory
  /// is never overwritten) or cannot be created.
  explicit RunDbWriter(const std::string& path);
  ~RunDbWriter();
  RunDbWriter(const RunDbWriter&) = delete;
  RunDbWriter& operator=(const RunDbWriter&) = delete;

  void add(const model::Record& r) override;

  /// Stores the open step blocks and commits everything buffered. The
  /// collector calls it at least every 0.5 s and at the end.
  void flush();
  /// Records written so far (committed or buffered).
  [[nodiscard]] std::int64_t records() const { return records_; }

 private:
  struct Statements;
  void begin_if_needed();
  void after_record();
  void commit();
  void write_block(int rank, StepBlockEncoder& block);
  void write_open_blocks();
  void put(const model::RunInfo& info);
  void put(const model::StepRecord& r);
  /// Any other kind with a table: one row of its columns (store/run_db_sql.hpp).
  template <class R>
  void put(const R& r);
  ::sqlite3* db_ = nullptr;
  std::unique_ptr<Statements> stmts_;
  std::string path_;
  bool in_transaction_ = false;
  std::int64_t pending_ = 0;
  std::int64_t records_ = 0;
};

/// Reads a whole run database (schema version 1 or 2). Records keep arrival
/// order; steps keep each rank's, in the order their blocks were stored.
/// Throws RunDbError for a missing file, a file that is not a traceml run
/// database, another schema version, or a row that no writer could have
/// stored: a number column holding text or a blob, a value beyond its type, a
/// damaged step block, or a record that model::check_* refuses ("PATH: table
/// step_blocks, block 4, record 17: 'events.forward.cpu_ms' must be a finite
/// number >= 0, got -1.5"). Text is repaired, never refused.
RunData read_run_db(const std::string& path);

/// The same, handing each record to `sink` as it is read instead of keeping
/// the run: ranks in rank order, then each table in arrival order (steps, step
/// memory, system samples, process samples, deliveries, refused connections).
/// Returns the number of strings repaired. Throws like read_run_db; `sink` may
/// then have received part of the run.
std::int64_t read_run_db(const std::string& path, RunSink& sink);

}  // namespace traceml::store
