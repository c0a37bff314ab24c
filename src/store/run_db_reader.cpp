// The run database's reader (docs/run-database.md): every table read in one
// snapshot, every row checked like a frame from a rank. The columns come from
// the records' field lists (store/run_db_sql).
#include <sqlite3.h>

#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/record_checks.hpp"
#include "model/text.hpp"
#include "store/run_db.hpp"
#include "store/run_db_sql.hpp"
#include "store/step_block.hpp"

namespace traceml::store {

namespace {

using sql::col_bytes;
using sql::Column;
using sql::Later;
using sql::Part;
using sql::Stmt;

/// What to do when a file is not a run database, appended to every such message.
constexpr const char* kRunDirHint =
    "no telemetry.db found? pass the run directory written by traceml run";

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

/// The file's schema version, after checking that it is a run database this
/// traceml reads.
std::int64_t check_meta(ReadDb& db) {
  auto q = db.try_prepare("SELECT key, value FROM meta");
  if (!q) throw db.not_a_run_db();
  std::optional<std::string> format, version;
  while (db.next(*q)) {
    const std::string key = col_bytes(q->get(), 0);
    if (key == "format") format = col_bytes(q->get(), 1);
    if (key == "schema_version") version = col_bytes(q->get(), 1);
  }
  if (format != sql::kFormatName || !version) throw db.not_a_run_db();
  for (std::int64_t v = kRunDbOldestSchemaVersion; v <= kRunDbSchemaVersion; ++v)
    if (*version == std::to_string(v)) return v;
  throw RunDbError(db.path() + ": run database schema version " +
                   model::escape_for_terminal(model::sanitize_utf8(*version, 60)) +
                   ", this traceml reads versions " + std::to_string(kRunDbOldestSchemaVersion) +
                   " to " + std::to_string(kRunDbSchemaVersion) +
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
  /// `unit` names a row in messages ("row"; "block" in step_blocks).
  Row(const ReadDb& db, const char* table, sqlite3_stmt* s, std::int64_t& strings_repaired,
      const char* unit = "row")
      : db_(db), table_(table), unit_(unit), s_(s), strings_repaired_(strings_repaired) {}

  /// "PATH: table T, row N: problem", N the rowid (`id`; `global_rank` in ranks
  /// and deliveries), so that `SELECT * FROM T WHERE rowid = N` shows it.
  [[noreturn]] void fail(const std::string& problem) const {
    throw RunDbError(where() + ": " + problem);
  }
  /// "PATH: table T, row N".
  [[nodiscard]] std::string where() const {
    return db_.path() + ": table " + table_ + ", " + unit_ + " " +
           std::to_string(sqlite3_column_int64(s_, 0));
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
  [[nodiscard]] bool is_null(int i) const { return sqlite3_column_type(s_, i) == SQLITE_NULL; }
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

  /// A blob's bytes, valid until the query steps on.
  [[nodiscard]] std::string_view blob(int i) const {
    switch (sqlite3_column_type(s_, i)) {
      case SQLITE_BLOB:
        break;
      case SQLITE_NULL:
        fail(column(i) + " is NULL, not a blob");
      case SQLITE_TEXT:
        fail(column(i) + " holds " + stored(i) + ", not a blob");
      default:
        fail(column(i) + " holds the number " + col_bytes(s_, i) + ", not a blob");
    }
    const void* p = sqlite3_column_blob(s_, i);
    const auto n = static_cast<std::size_t>(sqlite3_column_bytes(s_, i));
    return n == 0 ? std::string_view() : std::string_view(static_cast<const char*>(p), n);
  }

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
  const char* unit_;
  sqlite3_stmt* s_;
  std::int64_t& strings_repaired_;
};

// ---- records read by their field lists ----

template <class R>
int stored_columns(Later later) {
  static const int included = static_cast<int>(sql::columns<R>(Part::All, Later::Included).size());
  static const int left = static_cast<int>(sql::columns<R>(Part::All, Later::Left).size());
  return later == Later::Included ? included : left;
}

template <class V>
void read_value(const Row& row, int i, V& v) {
  if constexpr (std::is_same_v<V, std::optional<double>>) {
    v = row.opt_real(i);
  } else if constexpr (std::is_same_v<V, std::optional<int>>) {
    v = row.opt_int(i);
  } else if constexpr (std::is_same_v<V, std::optional<std::int64_t>>) {
    v = row.opt_int64(i);
  } else if constexpr (std::is_same_v<V, std::optional<std::string>>) {
    v = row.opt_text(i);
  } else if constexpr (std::is_same_v<V, double>) {
    v = row.real(i);
  } else if constexpr (std::is_same_v<V, int>) {
    v = row.integer(i);
  } else if constexpr (std::is_same_v<V, std::int64_t>) {
    v = row.int64(i);
  } else {
    static_assert(std::is_same_v<V, std::string>, "a field type the reader does not know");
    v = row.text(i);
  }
}

/// Reads R's columns in `part` from column `col` on, advancing it. A nested
/// record is present when its has_ column says so (or, without one, when its
/// first column is not NULL); present, its values were all measured, so
/// none may be NULL.
template <class R>
void read_fields(const Row& row, int& col, R& r, Part part, Later later) {
  sql::for_each_stored_field<R>(part, later, [&](const auto& field) {
    using M = typename std::decay_t<decltype(field)>::Member;
    if constexpr (model::schema::is_nested_v<M>) {
      using E = typename M::value_type;
      const bool present = field.presence_column ? row.flag(col++) : !row.is_null(col);
      if (present) {
        read_fields(row, col, (r.*(field.member)).emplace(E{}), Part::All, later);
      } else {
        col += stored_columns<E>(later);
      }
    } else {
      read_value(row, col++, r.*(field.member));
    }
  });
}

/// "SELECT rowid, <columns> FROM <table>...".
std::string select_sql(const std::vector<Column>& cols, const std::string& rest) {
  return "SELECT rowid, " + sql::names(cols) + " FROM " + rest;
}

void read_run_info(ReadDb& db, RunSink& sink, std::int64_t& repaired) {
  std::vector<Column> cols = sql::columns<model::RunInfo>(Part::All);
  cols.push_back({"strategy", "TEXT", true});
  constexpr const char* table = model::row_of<model::RunInfo>().table;
  const Stmt q = db.prepare(select_sql(cols, std::string(table) + " WHERE id = 1"));
  if (!db.next(q)) return;
  const Row row(db, table, q.get(), repaired);
  int col = 1;
  model::Record rec;
  auto& run = rec.emplace<model::RunInfo>();
  read_fields(row, col, run, Part::All, Later::Included);
  run.strategy = model::strategy_from_string(row.text(col));
  row.check(model::check(run));
  sink.add(rec);
}

/// The step query of schema version 1 (a row per step in table `steps`, no
/// longer written); Later::Left for files written before the GPU activity
/// columns existed.
std::string steps_select_sql(Later later) {
  std::vector<Column> cols = sql::columns<model::StepRecord>(Part::Values, later);
  cols.push_back({"event_mask", "INTEGER", true});
  for (auto& c : sql::event_columns())
    cols.push_back(std::move(c));
  for (auto& c : sql::columns<model::StepRecord>(Part::Nested, later))
    cols.push_back(std::move(c));
  return select_sql(cols, "steps ORDER BY id");
}

void read_steps(ReadDb& db, RunSink& sink, std::int64_t& repaired) {
  // A file from before the GPU activity columns has the same schema version:
  // the columns were added, no column changed meaning.
  auto with_later = db.try_prepare(steps_select_sql(Later::Included));
  const Later later = with_later ? Later::Included : Later::Left;
  const Stmt q = with_later ? std::move(*with_later) : db.prepare(steps_select_sql(later));
  constexpr std::int64_t kAllEvents = (std::int64_t{1} << model::kEventCount) - 1;
  model::Record rec;
  while (db.next(q)) {
    const Row row(db, "steps", q.get(), repaired);
    auto& r = rec.emplace<model::StepRecord>();
    int col = 1;
    read_fields(row, col, r, Part::Values, later);
    const std::int64_t mask = row.int64(col++);
    if ((mask & ~kAllEvents) != 0)
      row.fail("column 'event_mask' holds " + std::to_string(mask) +
               ", which sets bits beyond the " + std::to_string(model::kEventCount) + " events");
    for (std::size_t e = 0; e < model::kEventCount; ++e, col += 2) {
      if (((mask >> e) & 1) == 0) continue;
      r.events.set(static_cast<model::Event>(e),
                   model::Timing{row.opt_real(col), row.opt_real(col + 1)});
    }
    read_fields(row, col, r, Part::Nested, later);
    row.check(model::check(r));
    sink.add(rec);
  }
}

/// Schema version 2: each rank's steps in blocks (store/step_block.hpp),
/// read in the order they were stored. Errors name the block (its id) and
/// the record in it (from 1).
void read_step_blocks(ReadDb& db, RunSink& sink, std::int64_t& repaired) {
  constexpr const char* table = model::row_of<model::StepRecord>().table;
  const Stmt q = db.prepare(std::string("SELECT rowid, global_rank, rows, data FROM ") + table +
                            " ORDER BY id");
  // One record, refilled by each block.next(): no copy per step.
  model::Record rec{std::in_place_type<model::StepRecord>};
  auto& r = std::get<model::StepRecord>(rec);
  while (db.next(q)) {
    const Row row(db, table, q.get(), repaired, "block");
    const int rank = row.integer(1);
    const std::int64_t rows = row.int64(2);
    const std::string_view bytes = row.blob(3);
    try {
      StepBlockDecoder block(bytes, rank, rows);
      while (block.next(r))
        sink.add(rec);
    } catch (const StepBlockError& e) {
      throw RunDbError(row.where() +
                       (e.record() > 0 ? ", record " + std::to_string(e.record()) : "") + ": " +
                       e.what());
    }
  }
}

/// Reads a record of a flat table from column `col` on (table_columns<R>()).
template <class R>
void read_row(const Row& row, int& col, R& r, Later later) {
  if constexpr (std::is_same_v<R, RankDelivery>) {
    r.global_rank = row.integer(col++);
    r.records_received = row.int64(col++);
    r.clean_end = row.flag(col++);
    // Not a record of the wire: the collector's own counts, held to the same rules.
    if (r.global_rank < 0)
      row.fail("'global_rank' must be an integer >= 0, got " + std::to_string(r.global_rank));
    if (r.records_received < 0)
      row.fail("'records_received' must be an integer >= 0, got " +
               std::to_string(r.records_received));
    if (row.flag(col++)) {
      model::TracerStats t;
      read_fields(row, col, t, Part::All, later);
      row.check(model::check_tracer_stats(t));
      r.tracer = std::move(t);
    }
  } else if constexpr (std::is_same_v<R, RejectedConnection>) {
    r.ts = row.real(col++);
    r.peer = row.text(col++);
    r.reason = row.text(col++);
  } else {
    read_fields(row, col, r, Part::All, later);
  }
}

/// A system sample's GPUs, rows of their own table, added to the samples read.
void read_system_gpus(ReadDb& db, std::vector<model::Record>& samples,
                      const std::unordered_map<std::int64_t, std::size_t>& index_of,
                      std::int64_t& repaired) {
  const Stmt g = db.prepare(
      select_sql(sql::system_gpu_columns(), std::string(sql::kSystemGpusTable) + " ORDER BY id"));
  while (db.next(g)) {
    const Row row(db, sql::kSystemGpusTable, g.get(), repaired);
    const auto it = index_of.find(row.int64(1));
    if (it == index_of.end()) continue;  // an orphan row cannot come from RunDbWriter
    model::GpuSample gpu;
    int col = 2;
    read_fields(row, col, gpu, Part::All, Later::Included);
    row.check(model::check_gpu_sample(gpu));
    std::get<model::SystemSample>(samples[it->second]).gpus.push_back(gpu);
  }
}

/// Reads the flat table of kind R (store/run_db_sql.hpp): each row checked
/// as every reader checks its kind, and handed on in the table's order (its
/// key's, or arrival). A file from before the fields marked `added_later`
/// (the tracer's GPU columns of a delivery) reads as without them.
template <class R>
void read_table(ReadDb& db, RunSink& sink, std::int64_t& repaired) {
  constexpr const auto& kind = model::row_of<R>();
  constexpr const char* key = sql::table_key<R>();
  const auto query = [](Later later) {
    return select_sql(sql::table_columns<R>(later),
                      std::string(kind.table) + " ORDER BY " + (key != nullptr ? key : "id"));
  };
  auto with_later = db.try_prepare(query(Later::Included));
  // A table added after the schema version: a file written before it has
  // none, and holds none of its records.
  if constexpr (kind.table_added_later)
    if (!with_later) return;
  const Later later = with_later ? Later::Included : Later::Left;
  const Stmt q = with_later ? std::move(*with_later) : db.prepare(query(later));
  // System samples are few (one a second per node) and their GPUs are rows
  // of another table: they are gathered, then handed on.
  constexpr bool gather = std::is_same_v<R, model::SystemSample>;
  std::vector<model::Record> gathered;
  std::unordered_map<std::int64_t, std::size_t> index_of;  // sample id -> position in gathered
  model::Record rec;
  while (db.next(q)) {
    const Row row(db, kind.table, q.get(), repaired);
    auto& r = (gather ? gathered.emplace_back() : rec).template emplace<R>();
    int col = 1;
    read_row(row, col, r, later);
    row.check(model::check(r));
    if constexpr (gather)
      index_of.emplace(row.int64(0), gathered.size() - 1);
    else
      sink.add(rec);
  }
  if constexpr (gather) {
    read_system_gpus(db, gathered, index_of, repaired);
    for (const model::Record& x : gathered)
      sink.add(x);
  }
}

/// Keeps every record, in order (read_run_db's RunData).
class Collect final : public RunSink {
 public:
  explicit Collect(RunData& d) : d_(d) {}
  void add(const model::Record& r) override {
    visit_stored(r, [this](const auto& x) {
      // A kind a Telemetry keeps in a list goes to that list (its row says which).
      constexpr auto rows = model::row_of<std::decay_t<decltype(x)>>().rows;
      if constexpr (rows != nullptr)
        (d_.telemetry.*rows).push_back(x);
      else
        put(x);
    });
  }

 private:
  void put(const model::RunInfo& info) { d_.telemetry.run = info; }
  void put(const model::StepRecord& r) { d_.telemetry.steps.push_back(r); }
  void put(const RankDelivery& d) { d_.deliveries.push_back(d); }
  void put(const RejectedConnection& c) { d_.rejected.push_back(c); }

  RunData& d_;
};

}  // namespace

void feed(const model::Telemetry& t, RunSink& sink) {
  sink.add(t.run);
  const auto each = [&sink](const auto& rows) {
    for (const auto& r : rows)
      sink.add(r);
  };
  // The kinds a Telemetry holds, in table order (model/record_kinds.hpp).
  model::for_each_kind([&](const auto& row) {
    using R = typename std::decay_t<decltype(row)>::Type;
    if constexpr (std::is_same_v<R, model::StepRecord>)
      each(t.steps);
    else if constexpr (model::row_of<R>().rows != nullptr)
      each(t.*(row.rows));
  });
}

std::int64_t read_run_db(const std::string& path, RunSink& sink) {
  ReadDb db(path);
  db.begin_snapshot();
  const std::int64_t version = check_meta(db);
  std::int64_t repaired = 0;
  // Each kind's table in table order (model/record_kinds.hpp).
  model::for_each_kind([&](const auto& row) {
    using R = typename std::decay_t<decltype(row)>::Type;
    if constexpr (model::row_of<R>().table == nullptr)
      return;
    else if constexpr (std::is_same_v<R, model::RunInfo>)
      read_run_info(db, sink, repaired);
    else if constexpr (std::is_same_v<R, model::StepRecord>)
      version == 1 ? read_steps(db, sink, repaired) : read_step_blocks(db, sink, repaired);
    else
      read_table<R>(db, sink, repaired);
  });
  return repaired;
}

RunData read_run_db(const std::string& path) {
  RunData d;
  Collect sink(d);
  d.strings_repaired = read_run_db(path, sink);
  return d;
}

}  // namespace traceml::store
