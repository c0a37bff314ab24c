// The run database in SQLite (docs/run-database.md). One writer, batched
// transactions, prepared statements; absent values are SQL NULL, never 0.
#include "store/run_db.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/record_checks.hpp"
#include "model/text.hpp"

namespace traceml::store {

namespace {

/// Identifies a traceml run database among SQLite files.
constexpr const char* kFormatName = "traceml-run-db";

/// Records per transaction: large enough that commits (one WAL sync each at
/// synchronous=NORMAL only on checkpoint) cost little per record, small enough
/// that a crash loses at most a fraction of a second of telemetry.
constexpr std::int64_t kBatchRecords = 10000;

/// What to do when a file is not a run database, appended to every such message.
constexpr const char* kRunDirHint =
    "no telemetry.db found? pass the run directory written by traceml run";

/// The GPU activity columns of a step row, after the event columns. All NULL
/// when has_gpu_activity is 0. Files written before they existed lack them;
/// the reader then reads every step without GPU activity.
constexpr const char* kActivityColumns =
    "has_gpu_activity, activity_h2d_ms, activity_h2d_bytes, activity_h2d_copies, "
    "activity_h2d_pageable_copies, activity_h2d_pageable_bytes, activity_collective_ms, "
    "activity_busy_ms";
constexpr int kActivityColumnCount = 8;

std::string step_columns_sql() {
  std::string s;
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    const std::string name = model::event_name(static_cast<model::Event>(e));
    s += ", " + name + "_cpu_ms REAL, " + name + "_gpu_ms REAL";
  }
  return s +
         ", has_gpu_activity INTEGER NOT NULL DEFAULT 0, activity_h2d_ms REAL, activity_h2d_bytes "
         "REAL, activity_h2d_copies INTEGER, activity_h2d_pageable_copies INTEGER, "
         "activity_h2d_pageable_bytes REAL, activity_collective_ms REAL, activity_busy_ms REAL";
}

std::string schema_sql() {
  return std::string(
             "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
             "CREATE TABLE run_info (id INTEGER PRIMARY KEY CHECK (id = 1), run_name TEXT NOT "
             "NULL, world_size INTEGER, strategy TEXT NOT NULL);"
             "CREATE TABLE ranks (global_rank INTEGER PRIMARY KEY, local_rank INTEGER, node_rank "
             "INTEGER, hostname TEXT, local_world_size INTEGER, world_size INTEGER);"
             "CREATE TABLE steps (id INTEGER PRIMARY KEY, global_rank INTEGER NOT NULL, step "
             "INTEGER NOT NULL, ts REAL NOT NULL, event_mask INTEGER NOT NULL") +
         step_columns_sql() +
         ");"
         "CREATE TABLE step_memory (id INTEGER PRIMARY KEY, global_rank INTEGER NOT NULL, step "
         "INTEGER NOT NULL, device TEXT NOT NULL, peak_allocated_bytes REAL, peak_reserved_bytes "
         "REAL);"
         "CREATE TABLE system_samples (id INTEGER PRIMARY KEY, node_rank INTEGER NOT NULL, ts REAL "
         "NOT NULL, cpu_percent REAL, ram_used_bytes REAL, ram_total_bytes REAL);"
         "CREATE TABLE system_gpus (id INTEGER PRIMARY KEY, sample_id INTEGER NOT NULL REFERENCES "
         "system_samples(id), gpu_index INTEGER NOT NULL, util_percent REAL, mem_used_bytes REAL, "
         "mem_total_bytes REAL, temperature_c REAL, power_w REAL, power_limit_w REAL);"
         "CREATE TABLE process_samples (id INTEGER PRIMARY KEY, global_rank INTEGER NOT NULL, ts "
         "REAL NOT NULL, cpu_percent REAL, cpu_cores INTEGER, rss_bytes REAL, ram_total_bytes "
         "REAL, has_gpu INTEGER NOT NULL, gpu_device INTEGER, gpu_allocated_bytes REAL, "
         "gpu_reserved_bytes REAL, gpu_total_bytes REAL);"
         "CREATE TABLE deliveries (global_rank INTEGER PRIMARY KEY, records_received INTEGER NOT "
         "NULL, clean_end INTEGER NOT NULL, has_tracer INTEGER NOT NULL, tracer_rank INTEGER, pid "
         "INTEGER, strategy TEXT, steps_recorded INTEGER, records_sent INTEGER, records_dropped "
         "INTEGER, overhead_ns_per_step REAL, gpu_device INTEGER, gpu_steps_resolved INTEGER, "
         "gpu_steps_unresolved INTEGER, gpu_scopes_skipped INTEGER, activity_lost INTEGER);"
         "CREATE TABLE rejected_connections (id INTEGER PRIMARY KEY, ts REAL NOT NULL, peer TEXT "
         "NOT NULL, reason TEXT NOT NULL);";
}

/// Steps written by one INSERT statement. A statement's fixed cost (setup,
/// cursor, halt) is about as large as binding a row; sharing it among 32 rows
/// makes the step insert about a third cheaper. The rows wait in the writer
/// until the statement is full or flush() runs.
constexpr std::size_t kStepsPerInsert = 32;
/// Parameters of one step row: rank, step, ts, event mask, cpu and gpu per
/// event, then the GPU activity columns.
constexpr int kStepParams = 4 + 2 * static_cast<int>(model::kEventCount) + kActivityColumnCount;

/// "INSERT INTO steps (...) VALUES (?, ...), ..." for `rows` rows.
std::string steps_insert_sql(std::size_t rows) {
  std::string s = "INSERT INTO steps (global_rank, step, ts, event_mask";
  std::string v = "(?, ?, ?, ?";
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    const std::string name = model::event_name(static_cast<model::Event>(e));
    s += ", " + name + "_cpu_ms, " + name + "_gpu_ms";
    v += ", ?, ?";
  }
  s += std::string(", ") + kActivityColumns;
  for (int i = 0; i < kActivityColumnCount; ++i)
    v += ", ?";
  v += ")";
  s += ") VALUES " + v;
  for (std::size_t i = 1; i < rows; ++i)
    s += ", " + v;
  return s;
}

/// The step query; `with_activity` false for files written before the GPU
/// activity columns existed.
std::string steps_select_sql(bool with_activity) {
  std::string s = "SELECT rowid, global_rank, step, ts, event_mask";
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    const std::string name = model::event_name(static_cast<model::Event>(e));
    s += ", " + name + "_cpu_ms, " + name + "_gpu_ms";
  }
  if (with_activity) s += std::string(", ") + kActivityColumns;
  return s + " FROM steps ORDER BY id";
}

// ---- binding and reading columns; NULL stands for an absent value ----

void bind_double(sqlite3_stmt* s, int i, double v) {
  sqlite3_bind_double(s, i, v);
}
void bind_int(sqlite3_stmt* s, int i, std::int64_t v) {
  sqlite3_bind_int64(s, i, v);
}
void bind_text(sqlite3_stmt* s, int i, const std::string& v) {
  // SQLITE_STATIC: every statement is stepped and reset before `v` goes away.
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
}
void bind_opt(sqlite3_stmt* s, int i, const std::optional<double>& v) {
  if (v)
    bind_double(s, i, *v);
  else
    sqlite3_bind_null(s, i);
}
void bind_opt(sqlite3_stmt* s, int i, const std::optional<int>& v) {
  if (v)
    bind_int(s, i, *v);
  else
    sqlite3_bind_null(s, i);
}
void bind_opt(sqlite3_stmt* s, int i, const std::optional<std::string>& v) {
  if (v)
    bind_text(s, i, *v);
  else
    sqlite3_bind_null(s, i);
}

/// The bytes of a column as SQLite gives them (numbers as their text).
std::string col_bytes(sqlite3_stmt* s, int i) {
  const auto* p = sqlite3_column_text(s, i);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}

/// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt() = default;
  /// Takes ownership of a prepared statement.
  explicit Stmt(sqlite3_stmt* s) : s_(s) {}
  Stmt(sqlite3* db, const std::string& sql, const std::string& path) {
    if (sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                           &s_, nullptr) != SQLITE_OK) {
      throw RunDbError(path + ": cannot prepare a statement: " + sqlite3_errmsg(db));
    }
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stmt& operator=(Stmt&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  [[nodiscard]] sqlite3_stmt* get() const { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
};

}  // namespace

struct RunDbWriter::Statements {
  Stmt begin, commit;
  Stmt run_info, rank, step, step_memory, system, system_gpu, process, delivery, rejected;
  /// Inserts kStepsPerInsert steps at once, and the steps waiting for it.
  Stmt steps_multi;
  std::vector<model::StepRecord> step_buffer;
};

namespace {

[[noreturn]] void throw_db(sqlite3* db, const std::string& path, const std::string& what) {
  throw RunDbError(path + ": " + what + ": " + (db != nullptr ? sqlite3_errmsg(db) : "no memory"));
}

void exec(sqlite3* db, const std::string& sql, const std::string& path, const char* what) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
    throw_db(db, path, what);
}

/// Steps a write statement to completion and makes it ready for the next binds.
void run(sqlite3* db, sqlite3_stmt* s, const std::string& path, const char* what) {
  const int rc = sqlite3_step(s);
  sqlite3_reset(s);
  if (rc != SQLITE_DONE) throw_db(db, path, what);
}

}  // namespace

RunDbWriter::RunDbWriter(const std::string& path) : path_(path) {
  // O_EXCL: creating the file ourselves is the only race-free way to refuse an
  // existing one; SQLite turns the empty file into a fresh database.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST)
      throw RunDbError(path +
                       ": a run database already exists there (a run directory is never "
                       "overwritten; choose a new run name or directory)");
    throw RunDbError(path + ": cannot create the run database: " + std::strerror(errno));
  }
  ::close(fd);
  try {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK)
      throw_db(db_, path, "cannot open the run database");
    // WAL + NORMAL: commits do not fsync (only checkpoints do); a power cut can
    // lose the last batches but never corrupt the file.
    exec(db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;", path,
         "cannot configure the run database");
    exec(db_,
         "BEGIN;" + schema_sql() + "INSERT INTO meta VALUES ('format', '" + kFormatName +
             "'), ('schema_version', '" + std::to_string(kRunDbSchemaVersion) + "');COMMIT;",
         path, "cannot create the schema");
    stmts_ = std::make_unique<Statements>();
    auto& s = *stmts_;
    s.begin = Stmt(db_, "BEGIN", path);
    s.commit = Stmt(db_, "COMMIT", path);
    s.run_info = Stmt(db_,
                      "INSERT OR REPLACE INTO run_info (id, run_name, world_size, strategy) "
                      "VALUES (1, ?, ?, ?)",
                      path);
    s.rank = Stmt(db_,
                  "INSERT OR REPLACE INTO ranks (global_rank, local_rank, node_rank, hostname, "
                  "local_world_size, world_size) VALUES (?, ?, ?, ?, ?, ?)",
                  path);
    s.step = Stmt(db_, steps_insert_sql(1), path);
    s.steps_multi = Stmt(db_, steps_insert_sql(kStepsPerInsert), path);
    s.step_buffer.reserve(kStepsPerInsert);
    s.step_memory = Stmt(db_,
                         "INSERT INTO step_memory (global_rank, step, device, "
                         "peak_allocated_bytes, peak_reserved_bytes) VALUES (?, ?, ?, ?, ?)",
                         path);
    s.system = Stmt(db_,
                    "INSERT INTO system_samples (node_rank, ts, cpu_percent, ram_used_bytes, "
                    "ram_total_bytes) VALUES (?, ?, ?, ?, ?)",
                    path);
    s.system_gpu = Stmt(db_,
                        "INSERT INTO system_gpus (sample_id, gpu_index, util_percent, "
                        "mem_used_bytes, mem_total_bytes, temperature_c, power_w, power_limit_w) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        path);
    s.process = Stmt(db_,
                     "INSERT INTO process_samples (global_rank, ts, cpu_percent, cpu_cores, "
                     "rss_bytes, ram_total_bytes, has_gpu, gpu_device, gpu_allocated_bytes, "
                     "gpu_reserved_bytes, gpu_total_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                     "?)",
                     path);
    s.delivery = Stmt(db_,
                      "INSERT OR REPLACE INTO deliveries (global_rank, records_received, "
                      "clean_end, has_tracer, tracer_rank, pid, strategy, steps_recorded, "
                      "records_sent, records_dropped, overhead_ns_per_step, gpu_device, "
                      "gpu_steps_resolved, gpu_steps_unresolved, gpu_scopes_skipped, "
                      "activity_lost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      path);
    s.rejected =
        Stmt(db_, "INSERT INTO rejected_connections (ts, peer, reason) VALUES (?, ?, ?)", path);
  } catch (...) {
    stmts_.reset();
    sqlite3_close_v2(db_);
    db_ = nullptr;
    // A half-created database would make the retry fail with "already exists".
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"})
      std::filesystem::remove(path + suffix, ec);
    throw;
  }
}

RunDbWriter::~RunDbWriter() {
  try {
    flush();
  } catch (const RunDbError&) {
    // A destructor cannot report; callers that care call flush() first.
  }
  stmts_.reset();
  // The run is over: leave one self-contained file. WAL let readers look in
  // while the collector wrote; at rest it would leave -wal/-shm beside the
  // database, which read-only readers (report, export) cannot clean up.
  sqlite3_exec(db_, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr);
  sqlite3_close_v2(db_);
}

void RunDbWriter::begin_if_needed() {
  if (in_transaction_) return;
  run(db_, stmts_->begin.get(), path_, "cannot begin a transaction");
  in_transaction_ = true;
}

void RunDbWriter::after_record() {
  ++records_;
  if (++pending_ >= kBatchRecords) flush();
}

void RunDbWriter::flush() {
  if (!in_transaction_) return;
  write_buffered_steps();
  run(db_, stmts_->commit.get(), path_, "cannot commit to the run database");
  in_transaction_ = false;
  pending_ = 0;
}

void RunDbWriter::set_run_info(const model::RunInfo& info) {
  begin_if_needed();
  sqlite3_stmt* s = stmts_->run_info.get();
  bind_text(s, 1, info.run_name);
  bind_opt(s, 2, info.world_size);
  const std::string strategy = model::strategy_name(info.strategy);
  bind_text(s, 3, strategy);
  run(db_, s, path_, "cannot write the run info");
}

void RunDbWriter::add_rank(const model::RankIdentity& id) {
  begin_if_needed();
  sqlite3_stmt* s = stmts_->rank.get();
  bind_int(s, 1, id.global_rank);
  bind_opt(s, 2, id.local_rank);
  bind_opt(s, 3, id.node_rank);
  bind_opt(s, 4, id.hostname);
  bind_opt(s, 5, id.local_world_size);
  bind_opt(s, 6, id.world_size);
  run(db_, s, path_, "cannot write a rank");
}

namespace {

/// Binds one step row at parameters first..first + kStepParams - 1.
void bind_step(sqlite3_stmt* s, int first, const model::StepRecord& r) {
  bind_int(s, first, r.global_rank);
  bind_int(s, first + 1, r.step);
  bind_double(s, first + 2, r.ts);
  bind_int(s, first + 3, r.events.event_mask());
  // The bulk accessors avoid building an optional per value: this is the
  // collector's hottest loop.
  const auto& cpu = r.events.cpu_values();
  const auto& gpu = r.events.gpu_values();
  const unsigned cpu_mask = r.events.cpu_mask();
  const unsigned gpu_mask = r.events.gpu_mask();
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    const int col = first + 4 + 2 * static_cast<int>(e);
    if ((cpu_mask >> e) & 1u)
      bind_double(s, col, cpu[e]);
    else
      sqlite3_bind_null(s, col);
    if ((gpu_mask >> e) & 1u)
      bind_double(s, col + 1, gpu[e]);
    else
      sqlite3_bind_null(s, col + 1);
  }
  const int act = first + 4 + 2 * static_cast<int>(model::kEventCount);
  bind_int(s, act, r.gpu_activity ? 1 : 0);
  if (const auto& a = r.gpu_activity) {
    bind_double(s, act + 1, a->h2d_ms);
    bind_double(s, act + 2, a->h2d_bytes);
    bind_int(s, act + 3, a->h2d_copies);
    bind_int(s, act + 4, a->h2d_pageable_copies);
    bind_double(s, act + 5, a->h2d_pageable_bytes);
    bind_double(s, act + 6, a->collective_ms);
    bind_double(s, act + 7, a->busy_ms);
  } else {
    for (int i = 1; i < kActivityColumnCount; ++i)
      sqlite3_bind_null(s, act + i);
  }
}

}  // namespace

void RunDbWriter::add_step(const model::StepRecord& r) {
  begin_if_needed();
  auto& buffer = stmts_->step_buffer;
  buffer.push_back(r);
  if (buffer.size() == kStepsPerInsert) {
    sqlite3_stmt* s = stmts_->steps_multi.get();
    for (std::size_t i = 0; i < buffer.size(); ++i)
      bind_step(s, 1 + static_cast<int>(i) * kStepParams, buffer[i]);
    buffer.clear();
    run(db_, s, path_, "cannot write step records");
  }
  after_record();
}

void RunDbWriter::write_buffered_steps() {
  auto& buffer = stmts_->step_buffer;
  sqlite3_stmt* s = stmts_->step.get();
  for (const auto& r : buffer) {
    bind_step(s, 1, r);
    run(db_, s, path_, "cannot write a step record");
  }
  buffer.clear();
}

void RunDbWriter::add_step_memory(const model::StepMemoryRecord& r) {
  begin_if_needed();
  sqlite3_stmt* s = stmts_->step_memory.get();
  bind_int(s, 1, r.global_rank);
  bind_int(s, 2, r.step);
  bind_text(s, 3, r.device);
  bind_opt(s, 4, r.peak_allocated_bytes);
  bind_opt(s, 5, r.peak_reserved_bytes);
  run(db_, s, path_, "cannot write a step memory record");
  after_record();
}

void RunDbWriter::add_system(const model::SystemSample& x) {
  begin_if_needed();
  sqlite3_stmt* s = stmts_->system.get();
  bind_int(s, 1, x.node_rank);
  bind_double(s, 2, x.ts);
  bind_opt(s, 3, x.cpu_percent);
  bind_opt(s, 4, x.ram_used_bytes);
  bind_opt(s, 5, x.ram_total_bytes);
  run(db_, s, path_, "cannot write a system sample");
  const sqlite3_int64 sample_id = sqlite3_last_insert_rowid(db_);
  sqlite3_stmt* g = stmts_->system_gpu.get();
  for (const auto& gpu : x.gpus) {
    bind_int(g, 1, sample_id);
    bind_int(g, 2, gpu.index);
    bind_opt(g, 3, gpu.util_percent);
    bind_opt(g, 4, gpu.mem_used_bytes);
    bind_opt(g, 5, gpu.mem_total_bytes);
    bind_opt(g, 6, gpu.temperature_c);
    bind_opt(g, 7, gpu.power_w);
    bind_opt(g, 8, gpu.power_limit_w);
    run(db_, g, path_, "cannot write a system GPU sample");
  }
  after_record();
}

void RunDbWriter::add_process(const model::ProcessSample& x) {
  begin_if_needed();
  sqlite3_stmt* s = stmts_->process.get();
  bind_int(s, 1, x.global_rank);
  bind_double(s, 2, x.ts);
  bind_opt(s, 3, x.cpu_percent);
  bind_opt(s, 4, x.cpu_cores);
  bind_opt(s, 5, x.rss_bytes);
  bind_opt(s, 6, x.ram_total_bytes);
  bind_int(s, 7, x.gpu ? 1 : 0);
  const model::ProcessGpu none;
  const model::ProcessGpu& g = x.gpu ? *x.gpu : none;
  bind_opt(s, 8, g.device);
  bind_opt(s, 9, g.allocated_bytes);
  bind_opt(s, 10, g.reserved_bytes);
  bind_opt(s, 11, g.total_bytes);
  run(db_, s, path_, "cannot write a process sample");
  after_record();
}

void RunDbWriter::set_delivery(const RankDelivery& d) {
  begin_if_needed();
  sqlite3_stmt* s = stmts_->delivery.get();
  bind_int(s, 1, d.global_rank);
  bind_int(s, 2, d.records_received);
  bind_int(s, 3, d.clean_end ? 1 : 0);
  bind_int(s, 4, d.tracer ? 1 : 0);
  if (d.tracer) {
    const model::TracerStats& t = *d.tracer;
    bind_int(s, 5, t.global_rank);
    bind_int(s, 6, t.pid);
    bind_text(s, 7, t.strategy);
    bind_int(s, 8, t.steps_recorded);
    bind_int(s, 9, t.records_sent);
    bind_int(s, 10, t.records_dropped);
    bind_opt(s, 11, t.overhead_ns_per_step);
    if (t.gpu) {
      bind_int(s, 12, t.gpu->device);
      bind_int(s, 13, t.gpu->steps_resolved);
      bind_int(s, 14, t.gpu->steps_unresolved);
      bind_int(s, 15, t.gpu->scopes_skipped);
    } else {
      for (int i = 12; i <= 15; ++i)
        sqlite3_bind_null(s, i);
    }
    if (t.activity_lost)
      bind_int(s, 16, *t.activity_lost);
    else
      sqlite3_bind_null(s, 16);
  } else {
    for (int i = 5; i <= 16; ++i)
      sqlite3_bind_null(s, i);
  }
  run(db_, s, path_, "cannot write a delivery");
}

void RunDbWriter::add_rejected(const RejectedConnection& c) {
  begin_if_needed();
  sqlite3_stmt* s = stmts_->rejected.get();
  bind_double(s, 1, c.ts);
  bind_text(s, 2, c.peer);
  bind_text(s, 3, c.reason);
  run(db_, s, path_, "cannot write a rejected connection");
}

// ---------------------------------------------------------------- reading

namespace {

/// A read-only connection that closes itself.
class ReadDb {
 public:
  explicit ReadDb(const std::string& path) : path_(path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw RunDbError(path + ": is a directory, not a run database (pass " +
                       (std::filesystem::path(path) / kRunDbFileName).string() + ")");
    if (!std::filesystem::exists(path, ec))
      throw RunDbError(path + ": no such file (" + kRunDirHint + ")");
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK) {
      const std::string why = db_ != nullptr ? sqlite3_errmsg(db_) : "no memory";
      sqlite3_close_v2(db_);
      throw RunDbError(path + ": cannot open the run database: " + why);
    }
  }
  ~ReadDb() { sqlite3_close_v2(db_); }
  ReadDb(const ReadDb&) = delete;
  ReadDb& operator=(const ReadDb&) = delete;

  /// Prepares `sql`; std::nullopt when SQLite refuses it (not a database, no such table).
  std::optional<Stmt> try_prepare(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &s, nullptr) !=
        SQLITE_OK) {
      sqlite3_finalize(s);
      return std::nullopt;
    }
    return Stmt(s);
  }

  /// Starts a read transaction: every table is read from one snapshot even
  /// while a collector is still writing.
  void begin_snapshot() {
    if (sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK)
      throw RunDbError(path_ + ": cannot read the run database: " + sqlite3_errmsg(db_));
  }

  Stmt prepare(const std::string& sql) {
    auto s = try_prepare(sql);
    if (!s) throw not_a_run_db();
    return std::move(*s);
  }

  /// Steps a query: true for a row, false at the end; throws on errors.
  bool next(const Stmt& s) {
    const int rc = sqlite3_step(s.get());
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw RunDbError(path_ + ": cannot read the run database: " + sqlite3_errmsg(db_));
  }

  [[nodiscard]] RunDbError not_a_run_db() const {
    return RunDbError(path_ + ": not a traceml run database (" + kRunDirHint + ")");
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

void check_meta(ReadDb& db) {
  auto q = db.try_prepare("SELECT key, value FROM meta");
  if (!q) throw db.not_a_run_db();
  std::optional<std::string> format, version;
  while (db.next(*q)) {
    const std::string key = col_bytes(q->get(), 0);
    if (key == "format") format = col_bytes(q->get(), 1);
    if (key == "schema_version") version = col_bytes(q->get(), 1);
  }
  if (format != kFormatName || !version) throw db.not_a_run_db();
  if (*version != std::to_string(kRunDbSchemaVersion))
    throw RunDbError(db.path() + ": run database schema version " +
                     model::escape_for_terminal(model::sanitize_utf8(*version, 60)) +
                     ", this traceml reads version " + std::to_string(kRunDbSchemaVersion) +
                     " (use the traceml release that wrote it)");
}

/// Shortest text that reads back to `v`.
std::string number_text(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// One row of a query (its column 0 the rowid), read as a value from outside:
/// SQLite lets any column hold any storage class, and a file can be edited.
/// Numbers must be stored as numbers and fit their C++ type; the record is
/// then checked by model::check_* like a frame or a JSONL line. Text is
/// repaired, never refused: ill-formed UTF-8 or more than model::kMaxTextBytes
/// is cut and replaced as by model::sanitize_utf8, and counted.
class Row {
 public:
  Row(const ReadDb& db, const char* table, sqlite3_stmt* s, std::int64_t& strings_repaired)
      : db_(db), table_(table), s_(s), strings_repaired_(strings_repaired) {}

  /// "PATH: table T, row N: problem", N the rowid (`id`; `global_rank` in ranks
  /// and deliveries), so that `SELECT * FROM T WHERE rowid = N` shows it.
  [[noreturn]] void fail(const std::string& problem) const {
    throw RunDbError(db_.path() + ": table " + table_ + ", row " +
                     std::to_string(sqlite3_column_int64(s_, 0)) + ": " + problem);
  }
  /// Fails with the shared record check's verdict, if there is one.
  void check(const std::optional<std::string>& problem) const {
    if (problem) fail(*problem);
  }

  [[nodiscard]] std::optional<double> opt_real(int i) const {
    switch (sqlite3_column_type(s_, i)) {
      case SQLITE_NULL:
        return std::nullopt;
      case SQLITE_INTEGER:
      case SQLITE_FLOAT:
        return sqlite3_column_double(s_, i);
      default:
        fail(column(i) + " holds " + stored(i) + ", not a number");
    }
  }
  [[nodiscard]] double real(int i) const {
    const auto v = opt_real(i);
    if (!v) fail(column(i) + " is NULL, not a number");
    return *v;
  }

  /// An integer; an integral REAL counts, as 3.0 does in JSONL.
  [[nodiscard]] std::optional<std::int64_t> opt_int64(int i) const {
    switch (sqlite3_column_type(s_, i)) {
      case SQLITE_NULL:
        return std::nullopt;
      case SQLITE_INTEGER:
        return sqlite3_column_int64(s_, i);
      case SQLITE_FLOAT: {
        const double v = sqlite3_column_double(s_, i);
        // 2^63 is exactly representable, so the range test is exact.
        if (std::trunc(v) == v && v >= -9223372036854775808.0 && v < 9223372036854775808.0)
          return static_cast<std::int64_t>(v);
        fail(column(i) + " holds " + number_text(v) + ", not an integer");
      }
      default:
        fail(column(i) + " holds " + stored(i) + ", not an integer");
    }
  }
  [[nodiscard]] std::int64_t int64(int i) const {
    const auto v = opt_int64(i);
    if (!v) fail(column(i) + " is NULL, not an integer");
    return *v;
  }
  [[nodiscard]] std::optional<int> opt_int(int i) const {
    const auto v = opt_int64(i);
    if (!v) return std::nullopt;
    if (*v < INT_MIN || *v > INT_MAX)
      fail(column(i) + " holds " + std::to_string(*v) + ", beyond the range of a 32-bit integer");
    return static_cast<int>(*v);
  }
  [[nodiscard]] int integer(int i) const {
    const auto v = opt_int(i);
    if (!v) fail(column(i) + " is NULL, not an integer");
    return *v;
  }
  /// A 0/1 flag (has_gpu, clean_end, ...): any integer, nonzero is true.
  [[nodiscard]] bool flag(int i) const { return int64(i) != 0; }

  [[nodiscard]] std::optional<std::string> opt_text(int i) const {
    if (sqlite3_column_type(s_, i) == SQLITE_NULL) return std::nullopt;
    std::string t = col_bytes(s_, i);
    if (t.size() > model::kMaxTextBytes || !model::valid_utf8(t)) {
      ++strings_repaired_;
      t = model::sanitize_utf8(t, model::kMaxTextBytes);
    }
    return t;
  }
  [[nodiscard]] std::string text(int i) const { return opt_text(i).value_or(std::string()); }

 private:
  [[nodiscard]] std::string column(int i) const {
    const char* name = sqlite3_column_name(s_, i);
    return std::string("column '") + (name != nullptr ? name : "?") + "'";
  }
  /// What a column holds instead of a number, for messages.
  [[nodiscard]] std::string stored(int i) const {
    if (sqlite3_column_type(s_, i) == SQLITE_BLOB)
      return "a blob of " + std::to_string(sqlite3_column_bytes(s_, i)) + " bytes";
    // Cut, and escaped so that a file cannot drive the terminal showing the error.
    constexpr std::size_t kShownBytes = 60;
    const std::string t = col_bytes(s_, i);
    return "text \"" + model::escape_for_terminal(std::string_view(t).substr(0, kShownBytes)) +
           (t.size() > kShownBytes ? "...\"" : "\"");
  }

  const ReadDb& db_;
  const char* table_;
  sqlite3_stmt* s_;
  std::int64_t& strings_repaired_;
};

void read_run_info(ReadDb& db, model::RunInfo& run, std::int64_t& repaired) {
  const Stmt q =
      db.prepare("SELECT rowid, run_name, world_size, strategy FROM run_info WHERE id = 1");
  if (!db.next(q)) return;
  const Row row(db, "run_info", q.get(), repaired);
  run.run_name = row.text(1);
  run.world_size = row.opt_int(2);
  run.strategy = model::strategy_from_string(row.text(3));
  row.check(model::check_run_info(run));
}

void read_ranks(ReadDb& db, std::vector<model::RankIdentity>& out, std::int64_t& repaired) {
  const Stmt q = db.prepare(
      "SELECT rowid, global_rank, local_rank, node_rank, hostname, local_world_size, world_size "
      "FROM ranks ORDER BY global_rank");
  while (db.next(q)) {
    const Row row(db, "ranks", q.get(), repaired);
    model::RankIdentity id;
    id.global_rank = row.integer(1);
    id.local_rank = row.opt_int(2);
    id.node_rank = row.opt_int(3);
    id.hostname = row.opt_text(4);
    id.local_world_size = row.opt_int(5);
    id.world_size = row.opt_int(6);
    row.check(model::check_rank_identity(id));
    out.push_back(std::move(id));
  }
}

void read_steps(ReadDb& db, std::vector<model::StepRecord>& out, std::int64_t& repaired) {
  // A file from before the GPU activity columns has the same schema version:
  // the columns were added, no column changed meaning.
  auto with_activity = db.try_prepare(steps_select_sql(true));
  const bool activity = with_activity.has_value();
  const Stmt q = activity ? std::move(*with_activity) : db.prepare(steps_select_sql(false));
  constexpr int kEvents = 5;  // first event column, after rowid, rank, step, ts, mask
  const int act = kEvents + 2 * static_cast<int>(model::kEventCount);
  constexpr std::int64_t kAllEvents = (std::int64_t{1} << model::kEventCount) - 1;
  while (db.next(q)) {
    const Row row(db, "steps", q.get(), repaired);
    model::StepRecord r;
    r.global_rank = row.integer(1);
    r.step = row.int64(2);
    r.ts = row.real(3);
    const std::int64_t mask = row.int64(4);
    if ((mask & ~kAllEvents) != 0)
      row.fail("column 'event_mask' holds " + std::to_string(mask) +
               ", which sets bits beyond the " + std::to_string(model::kEventCount) + " events");
    for (std::size_t e = 0; e < model::kEventCount; ++e) {
      if (((mask >> e) & 1) == 0) continue;
      const int col = kEvents + 2 * static_cast<int>(e);
      r.events.set(static_cast<model::Event>(e),
                   model::Timing{row.opt_real(col), row.opt_real(col + 1)});
    }
    if (activity && row.flag(act)) {
      // Present: every value was measured (0 means none happened), so none is NULL.
      model::StepGpuActivity a;
      a.h2d_ms = row.real(act + 1);
      a.h2d_bytes = row.real(act + 2);
      a.h2d_copies = row.int64(act + 3);
      a.h2d_pageable_copies = row.int64(act + 4);
      a.h2d_pageable_bytes = row.real(act + 5);
      a.collective_ms = row.real(act + 6);
      a.busy_ms = row.real(act + 7);
      r.gpu_activity = a;
    }
    row.check(model::check_step(r));
    out.push_back(std::move(r));
  }
}

void read_step_memory(ReadDb& db, std::vector<model::StepMemoryRecord>& out,
                      std::int64_t& repaired) {
  const Stmt q = db.prepare(
      "SELECT rowid, global_rank, step, device, peak_allocated_bytes, peak_reserved_bytes FROM "
      "step_memory ORDER BY id");
  while (db.next(q)) {
    const Row row(db, "step_memory", q.get(), repaired);
    model::StepMemoryRecord r;
    r.global_rank = row.integer(1);
    r.step = row.int64(2);
    r.device = row.text(3);
    r.peak_allocated_bytes = row.opt_real(4);
    r.peak_reserved_bytes = row.opt_real(5);
    row.check(model::check_step_memory(r));
    out.push_back(std::move(r));
  }
}

void read_system(ReadDb& db, std::vector<model::SystemSample>& out, std::int64_t& repaired) {
  std::unordered_map<std::int64_t, std::size_t> index_of;  // sample id -> position in out
  const Stmt q = db.prepare(
      "SELECT rowid, node_rank, ts, cpu_percent, ram_used_bytes, ram_total_bytes FROM "
      "system_samples ORDER BY id");
  while (db.next(q)) {
    const Row row(db, "system_samples", q.get(), repaired);
    model::SystemSample x;
    x.node_rank = row.integer(1);
    x.ts = row.real(2);
    x.cpu_percent = row.opt_real(3);
    x.ram_used_bytes = row.opt_real(4);
    x.ram_total_bytes = row.opt_real(5);
    row.check(model::check_system(x));
    index_of.emplace(row.int64(0), out.size());
    out.push_back(std::move(x));
  }
  const Stmt g = db.prepare(
      "SELECT rowid, sample_id, gpu_index, util_percent, mem_used_bytes, mem_total_bytes, "
      "temperature_c, power_w, power_limit_w FROM system_gpus ORDER BY id");
  while (db.next(g)) {
    const Row row(db, "system_gpus", g.get(), repaired);
    const auto it = index_of.find(row.int64(1));
    if (it == index_of.end()) continue;  // an orphan row cannot come from RunDbWriter
    model::GpuSample gpu;
    gpu.index = row.integer(2);
    gpu.util_percent = row.opt_real(3);
    gpu.mem_used_bytes = row.opt_real(4);
    gpu.mem_total_bytes = row.opt_real(5);
    gpu.temperature_c = row.opt_real(6);
    gpu.power_w = row.opt_real(7);
    gpu.power_limit_w = row.opt_real(8);
    row.check(model::check_gpu_sample(gpu));
    out[it->second].gpus.push_back(gpu);
  }
}

void read_process(ReadDb& db, std::vector<model::ProcessSample>& out, std::int64_t& repaired) {
  const Stmt q = db.prepare(
      "SELECT rowid, global_rank, ts, cpu_percent, cpu_cores, rss_bytes, ram_total_bytes, "
      "has_gpu, gpu_device, gpu_allocated_bytes, gpu_reserved_bytes, gpu_total_bytes FROM "
      "process_samples ORDER BY id");
  while (db.next(q)) {
    const Row row(db, "process_samples", q.get(), repaired);
    model::ProcessSample x;
    x.global_rank = row.integer(1);
    x.ts = row.real(2);
    x.cpu_percent = row.opt_real(3);
    x.cpu_cores = row.opt_int(4);
    x.rss_bytes = row.opt_real(5);
    x.ram_total_bytes = row.opt_real(6);
    if (row.flag(7)) {
      model::ProcessGpu g;
      g.device = row.opt_int(8);
      g.allocated_bytes = row.opt_real(9);
      g.reserved_bytes = row.opt_real(10);
      g.total_bytes = row.opt_real(11);
      x.gpu = g;
    }
    row.check(model::check_process(x));
    out.push_back(std::move(x));
  }
}

void read_deliveries(ReadDb& db, std::vector<RankDelivery>& out, std::int64_t& repaired) {
  // The GPU columns came later: files written before lack them, and their
  // ranks read as never having timed on a GPU.
  const std::string head =
      "SELECT rowid, global_rank, records_received, clean_end, has_tracer, tracer_rank, pid, "
      "strategy, steps_recorded, records_sent, records_dropped, overhead_ns_per_step";
  const std::string tail = " FROM deliveries ORDER BY global_rank";
  auto with_gpu = db.try_prepare(head +
                                 ", gpu_device, gpu_steps_resolved, gpu_steps_unresolved, "
                                 "gpu_scopes_skipped, activity_lost" +
                                 tail);
  const bool gpu_columns = with_gpu.has_value();
  const Stmt q = gpu_columns ? std::move(*with_gpu) : db.prepare(head + tail);
  while (db.next(q)) {
    const Row row(db, "deliveries", q.get(), repaired);
    RankDelivery d;
    d.global_rank = row.integer(1);
    d.records_received = row.int64(2);
    d.clean_end = row.flag(3);
    // Not a record of the wire: the collector's own counts, held to the same rules.
    if (d.global_rank < 0)
      row.fail("'global_rank' must be an integer >= 0, got " + std::to_string(d.global_rank));
    if (d.records_received < 0)
      row.fail("'records_received' must be an integer >= 0, got " +
               std::to_string(d.records_received));
    if (row.flag(4)) {
      model::TracerStats t;
      t.global_rank = row.integer(5);
      t.pid = row.int64(6);
      t.strategy = row.text(7);
      t.steps_recorded = row.int64(8);
      t.records_sent = row.int64(9);
      t.records_dropped = row.int64(10);
      t.overhead_ns_per_step = row.opt_real(11);
      if (gpu_columns && sqlite3_column_type(q.get(), 12) != SQLITE_NULL) {
        model::TracerStats::Gpu g;
        g.device = row.integer(12);
        g.steps_resolved = row.int64(13);
        g.steps_unresolved = row.int64(14);
        g.scopes_skipped = row.int64(15);
        t.gpu = g;
      }
      if (gpu_columns) t.activity_lost = row.opt_int64(16);
      row.check(model::check_tracer_stats(t));
      d.tracer = std::move(t);
    }
    out.push_back(std::move(d));
  }
}

void read_rejected(ReadDb& db, std::vector<RejectedConnection>& out, std::int64_t& repaired) {
  const Stmt q = db.prepare("SELECT rowid, ts, peer, reason FROM rejected_connections ORDER BY id");
  while (db.next(q)) {
    const Row row(db, "rejected_connections", q.get(), repaired);
    out.push_back(RejectedConnection{row.real(1), row.text(2), row.text(3)});
  }
}

}  // namespace

RunData read_run_db(const std::string& path) {
  ReadDb db(path);
  db.begin_snapshot();
  check_meta(db);
  RunData d;
  std::int64_t& repaired = d.strings_repaired;
  read_run_info(db, d.telemetry.run, repaired);
  read_ranks(db, d.telemetry.ranks, repaired);
  read_steps(db, d.telemetry.steps, repaired);
  read_step_memory(db, d.telemetry.step_memory, repaired);
  read_system(db, d.telemetry.system, repaired);
  read_process(db, d.telemetry.process, repaired);
  read_deliveries(db, d.deliveries, repaired);
  read_rejected(db, d.rejected, repaired);
  return d;
}

}  // namespace traceml::store
