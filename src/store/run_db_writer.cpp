// The run database's writer (docs/run-database.md). One writer, batched
// transactions, prepared statements; absent values are SQL NULL, never 0.
// The tables' columns come from the records' field lists (store/run_db_sql).
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "store/run_db.hpp"
#include "store/run_db_sql.hpp"
#include "store/step_block.hpp"

namespace traceml::store {

namespace {

using sql::Column;
using sql::Part;
using sql::Stmt;

/// Records per transaction: large enough that commits (one WAL sync each at
/// synchronous=NORMAL only on checkpoint) cost little per record, small enough
/// that a crash loses at most a fraction of a second of telemetry.
constexpr std::int64_t kBatchRecords = 10000;

/// Bytes of open step blocks the writer holds, all ranks together, before it
/// stores them whether full or not (1,024 ranks would otherwise hold 60 MB).
constexpr std::size_t kMaxOpenBlockBytes = std::size_t{8} << 20;

// ---- the tables ----

/// "CREATE TABLE t (id INTEGER PRIMARY KEY, <columns>);", or keyed by one of
/// the columns.
std::string table_sql(const char* table, const std::vector<Column>& cols, const char* key) {
  return std::string("CREATE TABLE ") + table + " (" +
         (key != nullptr ? sql::definitions(cols, key)
                         : "id INTEGER PRIMARY KEY, " + sql::definitions(cols)) +
         ");";
}

/// Every table, each kind's in table order (model/record_kinds.hpp).
std::string schema_sql() {
  std::string s = "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";
  model::for_each_kind([&s](const auto& row) {
    using R = typename std::decay_t<decltype(row)>::Type;
    if constexpr (model::row_of<R>().table == nullptr) {
      return;
    } else if constexpr (std::is_same_v<R, model::RunInfo>) {
      // One row, and the strategy as its word.
      s += std::string("CREATE TABLE ") + row.table + " (id INTEGER PRIMARY KEY CHECK (id = 1), " +
           sql::definitions(sql::columns<model::RunInfo>(Part::All)) + ", strategy TEXT NOT NULL);";
    } else if constexpr (std::is_same_v<R, model::StepRecord>) {
      // Each rank's steps in blocks (store/step_block.hpp).
      s += std::string("CREATE TABLE ") + row.table +
           " (id INTEGER PRIMARY KEY, global_rank INTEGER NOT NULL, rows INTEGER NOT NULL, "
           "min_step INTEGER NOT NULL, max_step INTEGER NOT NULL, data BLOB NOT NULL);";
    } else {
      s += table_sql(row.table, sql::table_columns<R>(), sql::table_key<R>());
      if constexpr (std::is_same_v<R, model::SystemSample>)
        s += std::string("CREATE TABLE ") + sql::kSystemGpusTable +
             " (id INTEGER PRIMARY KEY, sample_id INTEGER NOT NULL REFERENCES " + row.table +
             "(id), " + sql::definitions(sql::columns<model::GpuSample>(Part::All)) + ");";
    }
  });
  return s;
}

/// "INSERT INTO table (a, b) VALUES (?, ?)".
std::string insert_sql(const std::string& table, const std::vector<Column>& cols,
                       const std::string& verb = "INSERT") {
  return verb + " INTO " + table + " (" + sql::names(cols) + ") VALUES (" +
         sql::placeholders(cols.size()) + ")";
}

// ---- binding; NULL stands for an absent value ----

void bind_double(sqlite3_stmt* s, int i, double v) {
  sqlite3_bind_double(s, i, v);
}
void bind_int(sqlite3_stmt* s, int i, std::int64_t v) {
  sqlite3_bind_int64(s, i, v);
}

template <class V>
void bind_value(sqlite3_stmt* s, int i, const V& v) {
  if constexpr (model::schema::is_optional_v<V>) {
    if (v)
      bind_value(s, i, *v);
    else
      sqlite3_bind_null(s, i);
  } else if constexpr (std::is_same_v<V, double>) {
    bind_double(s, i, v);
  } else if constexpr (std::is_same_v<V, std::string>) {
    // SQLITE_STATIC: the string outlives the statement's step.
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  } else {
    bind_int(s, i, v);
  }
}

/// Binds R's columns in `part` from parameter `col` on, advancing it; a null
/// `r` (an absent nested record) binds NULL to every one.
template <class R>
void bind_fields(sqlite3_stmt* s, int& col, const R* r, Part part) {
  sql::for_each_stored_field<R>(part, sql::Later::Included, [&](const auto& field) {
    using M = typename std::decay_t<decltype(field)>::Member;
    if constexpr (model::schema::is_nested_v<M>) {
      using E = typename M::value_type;
      const E* inner = (r != nullptr && (r->*(field.member))) ? &*(r->*(field.member)) : nullptr;
      if (field.presence_column) bind_int(s, col++, inner != nullptr ? 1 : 0);
      bind_fields(s, col, inner, Part::All);
    } else if (r == nullptr) {
      sqlite3_bind_null(s, col++);
    } else {
      bind_value(s, col++, r->*(field.member));
    }
  });
}

/// Binds a record of a flat table: its table_columns<R>(), in order.
template <class R>
void bind_row(sqlite3_stmt* s, int& col, const R& r) {
  if constexpr (std::is_same_v<R, RankDelivery>) {
    bind_int(s, col++, r.global_rank);
    bind_int(s, col++, r.records_received);
    bind_int(s, col++, r.clean_end ? 1 : 0);
    bind_int(s, col++, r.tracer ? 1 : 0);
    bind_fields(s, col, r.tracer ? &*r.tracer : nullptr, Part::All);
  } else if constexpr (std::is_same_v<R, RejectedConnection>) {
    bind_double(s, col++, r.ts);
    bind_value(s, col++, r.peer);
    bind_value(s, col++, r.reason);
  } else {
    bind_fields(s, col, &r, Part::All);
  }
}

// ---- running statements ----

[[noreturn]] void throw_db(sqlite3* db, const std::string& path, const std::string& what) {
  throw RunDbError(path + ": " + what + ": " + (db != nullptr ? sqlite3_errmsg(db) : "no memory"));
}

Stmt prepare(sqlite3* db, const std::string& text, const std::string& path) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db, text.c_str(), static_cast<int>(text.size()), SQLITE_PREPARE_PERSISTENT,
                         &s, nullptr) != SQLITE_OK) {
    sqlite3_finalize(s);
    throw RunDbError(path + ": cannot prepare a statement: " + sqlite3_errmsg(db));
  }
  return Stmt(s);
}

void exec(sqlite3* db, const std::string& text, const std::string& path, const char* what) {
  if (sqlite3_exec(db, text.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
    throw_db(db, path, what);
}

/// Steps a write statement to completion and makes it ready for the next binds;
/// a failure says `what`, then the `table` when one is given.
void run(sqlite3* db, sqlite3_stmt* s, const std::string& path, const char* what,
         const char* table = nullptr) {
  const int rc = sqlite3_step(s);
  sqlite3_reset(s);
  if (rc != SQLITE_DONE)
    throw_db(db, path, table != nullptr ? std::string(what) + " " + table : std::string(what));
}

}  // namespace

struct RunDbWriter::Statements {
  Stmt begin, commit;
  Stmt run_info, step_block, system_gpu;
  /// The insert of each kind stored as a flat row, by RecordKind.
  std::array<Stmt, model::kRecordKindCount> insert;
  /// Each rank's open block, in rank order (flush() stores them in that order).
  std::map<int, StepBlockEncoder> open_blocks;
  /// The open block of the last step's rank: ranks' steps come in runs.
  std::map<int, StepBlockEncoder>::iterator last_block = open_blocks.end();
  std::size_t open_bytes = 0;
};

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
         "BEGIN;" + schema_sql() + "INSERT INTO meta VALUES ('format', '" + sql::kFormatName +
             "'), ('schema_version', '" + std::to_string(kRunDbSchemaVersion) + "');COMMIT;",
         path, "cannot create the schema");
    stmts_ = std::make_unique<Statements>();
    auto& s = *stmts_;
    s.begin = prepare(db_, "BEGIN", path);
    s.commit = prepare(db_, "COMMIT", path);
    s.run_info = prepare(
        db_,
        std::string("INSERT OR REPLACE INTO ") + model::row_of<model::RunInfo>().table + " (id, " +
            sql::names(sql::columns<model::RunInfo>(Part::All)) + ", strategy) VALUES (1, " +
            sql::placeholders(sql::columns<model::RunInfo>(Part::All).size() + 1) + ")",
        path);
    s.step_block = prepare(db_,
                           std::string("INSERT INTO ") + model::row_of<model::StepRecord>().table +
                               " (global_rank, rows, min_step, max_step, data) VALUES (?, ?, ?, "
                               "?, ?)",
                           path);
    s.system_gpu = prepare(db_, insert_sql(sql::kSystemGpusTable, sql::system_gpu_columns()), path);
    model::for_each_kind([&](const auto& row) {
      using R = typename std::decay_t<decltype(row)>::Type;
      if constexpr (model::row_of<R>().table != nullptr && !std::is_same_v<R, model::RunInfo> &&
                    !std::is_same_v<R, model::StepRecord>)
        s.insert[static_cast<std::size_t>(row.kind)] =
            prepare(db_,
                    insert_sql(row.table, sql::table_columns<R>(),
                               sql::table_key<R>() != nullptr ? "INSERT OR REPLACE" : "INSERT"),
                    path);
    });
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
  if (++pending_ >= kBatchRecords) commit();
}

void RunDbWriter::commit() {
  if (!in_transaction_) return;
  run(db_, stmts_->commit.get(), path_, "cannot commit to the run database");
  in_transaction_ = false;
  pending_ = 0;
}

void RunDbWriter::flush() {
  write_open_blocks();
  commit();
}

void RunDbWriter::add(const model::Record& r) {
  visit_stored(r, [this](const auto& x) { put(x); });
}

void RunDbWriter::put(const model::RunInfo& info) {
  begin_if_needed();
  sqlite3_stmt* s = stmts_->run_info.get();
  int col = 1;
  bind_fields(s, col, &info, Part::All);
  const std::string strategy = model::strategy_name(info.strategy);
  bind_value(s, col, strategy);
  run(db_, s, path_, "cannot write the run info");
}

void RunDbWriter::put(const model::StepRecord& r) {
  auto& s = *stmts_;
  if (s.last_block == s.open_blocks.end() || s.last_block->first != r.global_rank)
    s.last_block = s.open_blocks.try_emplace(r.global_rank).first;
  StepBlockEncoder& block = s.last_block->second;
  const std::size_t before = block.bytes().size();
  block.add(r);
  s.open_bytes += block.bytes().size() - before;
  if (block.rows() >= kStepBlockRows) write_block(r.global_rank, block);
  if (s.open_bytes > kMaxOpenBlockBytes) write_open_blocks();
  after_record();
}

void RunDbWriter::write_block(int rank, StepBlockEncoder& block) {
  if (block.rows() == 0) return;
  begin_if_needed();
  sqlite3_stmt* s = stmts_->step_block.get();
  bind_int(s, 1, rank);
  bind_int(s, 2, block.rows());
  bind_int(s, 3, block.min_step());
  bind_int(s, 4, block.max_step());
  // SQLITE_STATIC: the bytes outlive the statement's step.
  sqlite3_bind_blob(s, 5, block.bytes().data(), static_cast<int>(block.bytes().size()),
                    SQLITE_STATIC);
  run(db_, s, path_, "cannot write step records");
  stmts_->open_bytes -= block.bytes().size() - 1;
  block.clear();
}

void RunDbWriter::write_open_blocks() {
  auto& s = *stmts_;
  for (auto& [rank, block] : s.open_blocks)
    write_block(rank, block);
  // Ranks that stopped sending stop holding a block's memory.
  s.open_blocks.clear();
  s.last_block = s.open_blocks.end();
}

template <class R>
void RunDbWriter::put(const R& r) {
  constexpr const auto& row = model::row_of<R>();
  begin_if_needed();
  sqlite3_stmt* s = stmts_->insert[static_cast<std::size_t>(row.kind)].get();
  int col = 1;
  bind_row(s, col, r);
  run(db_, s, path_, "cannot write to table", row.table);
  if constexpr (std::is_same_v<R, model::SystemSample>) {
    // Its GPUs: rows of their own, under the sample's id.
    const sqlite3_int64 sample_id = sqlite3_last_insert_rowid(db_);
    sqlite3_stmt* g = stmts_->system_gpu.get();
    for (const auto& gpu : r.gpus) {
      int gcol = 1;
      bind_int(g, gcol++, sample_id);
      bind_fields(g, gcol, &gpu, Part::All);
      run(db_, g, path_, "cannot write to table", sql::kSystemGpusTable);
    }
  }
  // records() counts the ranks' telemetry rows: not an identity (replaced,
  // not added), not the collector's own (deliveries, refused connections).
  if constexpr (row.direction != model::Direction::Local && sql::table_key<R>() == nullptr)
    after_record();
}

}  // namespace traceml::store
