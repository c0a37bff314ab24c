#include "store/run_outcome.hpp"

#include <cmath>
#include <memory>
#include <string_view>

#include "store/run_db.hpp"
#include "store/sqlite_handle.hpp"

namespace traceml::store {
namespace {

void bind_opt(sqlite3_stmt* s, int i, const std::optional<int>& v) {
  if (v) {
    sqlite3_bind_int(s, i, *v);
  } else {
    sqlite3_bind_null(s, i);
  }
}

std::optional<int> column_opt(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int(s, i);
}

void bind_opt(sqlite3_stmt* s, int i, const std::optional<std::int64_t>& v) {
  if (v) {
    sqlite3_bind_int64(s, i, *v);
  } else {
    sqlite3_bind_null(s, i);
  }
}

void bind_opt(sqlite3_stmt* s, int i, const std::optional<double>& v) {
  if (v) {
    sqlite3_bind_double(s, i, *v);
  } else {
    sqlite3_bind_null(s, i);
  }
}

void bind_opt(sqlite3_stmt* s, int i, const std::optional<model::LoopPhase>& v) {
  if (v) {
    sqlite3_bind_text(s, i, model::loop_phase_key(*v), -1, SQLITE_STATIC);
  } else {
    sqlite3_bind_null(s, i);
  }
}

std::optional<std::string> column_text(sqlite3_stmt* s, int i) {
  if (sqlite3_column_type(s, i) != SQLITE_TEXT) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, i)),
                     std::size_t(sqlite3_column_bytes(s, i)));
}

/// Whether `table` has `column`: a database of an older build lacks the
/// columns added since (they then read as absent).
bool has_column(sqlite3* db, const std::string& path, const char* table, const char* column) {
  SqliteStmt s = prepare_sqlite(db, path, "SELECT 1 FROM pragma_table_info(?) WHERE name=?");
  sqlite3_bind_text(s.get(), 1, table, -1, SQLITE_STATIC);
  sqlite3_bind_text(s.get(), 2, column, -1, SQLITE_STATIC);
  return sqlite3_step(s.get()) == SQLITE_ROW;
}

bool has_table(sqlite3* db, const std::string& path, const char* name) {
  SqliteStmt s =
      prepare_sqlite(db, path, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?");
  sqlite3_bind_text(s.get(), 1, name, -1, SQLITE_STATIC);
  return sqlite3_step(s.get()) == SQLITE_ROW;
}

constexpr int kMaxStoredStalls = 4096;

/// The run's stalls, each checked: what no collector writes is an error
/// that names the row, not a summary built on it.
std::vector<model::Stall> read_stalls(sqlite3* db, const std::string& path) {
  const bool exact = has_column(db, path, "run_stalls", "from_black_box");
  const std::string sql = std::string(
                              "SELECT global_rank, kind, step, phase, start, duration_s, resumed,"
                              " others_waiting, ") +
                          (exact ? "from_black_box" : "0") + " FROM run_stalls ORDER BY rowid";
  SqliteStmt s = prepare_sqlite(db, path, sql.c_str());
  std::vector<model::Stall> out;
  for (int row = 1; sqlite3_step(s.get()) == SQLITE_ROW; ++row) {
    // A collector keeps at most collector::LiveBoard::kMaxStalls.
    if (row > kMaxStoredStalls)
      throw RunDbError(path + ": table run_stalls holds more than " +
                       std::to_string(kMaxStoredStalls) +
                       " rows; the database was not written by traceml (or is damaged)");
    const auto bad = [&](const std::string& what) {
      return RunDbError(path + ": table run_stalls, row " + std::to_string(row) + ": " + what +
                        "; the database was not written by traceml (or is damaged)");
    };
    const auto text = [&](int i) { return column_text(s.get(), i); };
    model::Stall st;
    st.global_rank = sqlite3_column_int(s.get(), 0);
    st.kind = text(1).value_or("");
    st.step = sqlite3_column_int64(s.get(), 2);
    if (const auto phase = text(3)) {
      st.phase = model::loop_phase_from_key(*phase);
      if (!st.phase) throw bad("'phase' is not a loop phase");
    }
    st.start = sqlite3_column_double(s.get(), 4);
    st.duration_s = sqlite3_column_double(s.get(), 5);
    st.resumed = sqlite3_column_int(s.get(), 6) != 0;
    st.others_waiting = column_opt(s.get(), 7);
    st.from_black_box = sqlite3_column_int(s.get(), 8) != 0;
    if (st.global_rank < 0) throw bad("'global_rank' must be >= 0");
    if (st.kind != "silent" && st.kind != "stalled") throw bad("'kind' must be silent or stalled");
    if (st.step < 0) throw bad("'step' must be >= 0");
    if (!std::isfinite(st.start) || st.start < 0.0) throw bad("'start' must be a time >= 0");
    if (!std::isfinite(st.duration_s) || st.duration_s < 0.0)
      throw bad("'duration_s' must be >= 0");
    if (st.others_waiting && *st.others_waiting < 0) throw bad("'others_waiting' must be >= 0");
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace

void write_run_outcome(const std::string& db_path, const RunOutcome& outcome) {
  SqliteDb db = open_sqlite(db_path, SQLITE_OPEN_READWRITE);
  exec_sqlite(db.get(), db_path, "BEGIN");
  exec_sqlite(
      db.get(), db_path,
      "CREATE TABLE IF NOT EXISTS run_outcome (status TEXT NOT NULL, exit_code INTEGER NOT NULL,"
      " failed_rank INTEGER);"
      "CREATE TABLE IF NOT EXISTS rank_exits (global_rank INTEGER NOT NULL, exit_code INTEGER NOT "
      "NULL,"
      " signal INTEGER, stopped_by_launcher INTEGER NOT NULL, steps_completed INTEGER,"
      " phase TEXT, rss_bytes REAL);"
      "CREATE TABLE IF NOT EXISTS run_stalls (global_rank INTEGER NOT NULL, kind TEXT NOT NULL,"
      " step INTEGER NOT NULL, phase TEXT, start REAL NOT NULL, duration_s REAL NOT NULL,"
      " resumed INTEGER NOT NULL, others_waiting INTEGER, from_black_box INTEGER);"
      "DELETE FROM run_outcome; DELETE FROM rank_exits; DELETE FROM run_stalls;");
  SqliteStmt o = prepare_sqlite(db.get(), db_path, "INSERT INTO run_outcome VALUES (?, ?, ?)");
  sqlite3_bind_text(o.get(), 1, model::word(outcome.status), -1, SQLITE_STATIC);
  sqlite3_bind_int(o.get(), 2, outcome.exit_code);
  bind_opt(o.get(), 3, outcome.failed_rank);
  if (sqlite3_step(o.get()) != SQLITE_DONE) throw_sqlite_error(db.get(), db_path);
  SqliteStmt r =
      prepare_sqlite(db.get(), db_path, "INSERT INTO rank_exits VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (const RankExit& e : outcome.ranks) {
    sqlite3_reset(r.get());
    sqlite3_bind_int(r.get(), 1, e.global_rank);
    sqlite3_bind_int(r.get(), 2, e.exit_code);
    bind_opt(r.get(), 3, e.signal);
    sqlite3_bind_int(r.get(), 4, e.stopped_by_launcher ? 1 : 0);
    bind_opt(r.get(), 5, e.steps_completed);
    bind_opt(r.get(), 6, e.phase);
    bind_opt(r.get(), 7, e.rss_bytes);
    if (sqlite3_step(r.get()) != SQLITE_DONE) throw_sqlite_error(db.get(), db_path);
  }
  SqliteStmt st = prepare_sqlite(db.get(), db_path,
                                 "INSERT INTO run_stalls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const model::Stall& s : outcome.stalls) {
    sqlite3_reset(st.get());
    sqlite3_bind_int(st.get(), 1, s.global_rank);
    sqlite3_bind_text(st.get(), 2, s.kind.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st.get(), 3, s.step);
    bind_opt(st.get(), 4, s.phase);
    sqlite3_bind_double(st.get(), 5, s.start);
    sqlite3_bind_double(st.get(), 6, s.duration_s);
    sqlite3_bind_int(st.get(), 7, s.resumed ? 1 : 0);
    bind_opt(st.get(), 8, s.others_waiting);
    sqlite3_bind_int(st.get(), 9, s.from_black_box ? 1 : 0);
    if (sqlite3_step(st.get()) != SQLITE_DONE) throw_sqlite_error(db.get(), db_path);
  }
  exec_sqlite(db.get(), db_path, "COMMIT");
}

std::optional<RunOutcome> read_run_outcome(const std::string& db_path) {
  SqliteDb db = open_sqlite(db_path, SQLITE_OPEN_READONLY);
  if (!has_table(db.get(), db_path, "run_outcome")) return std::nullopt;
  SqliteStmt o =
      prepare_sqlite(db.get(), db_path, "SELECT status, exit_code, failed_rank FROM run_outcome");
  if (sqlite3_step(o.get()) != SQLITE_ROW) return std::nullopt;
  RunOutcome out;
  // The status is parsed here, once: past this point it is the enum.
  const unsigned char* word = sqlite3_column_text(o.get(), 0);
  const std::optional<model::RunStatus> status =
      word == nullptr ? std::nullopt
                      : model::run_status_from_word(
                            std::string_view(reinterpret_cast<const char*>(word),
                                             std::size_t(sqlite3_column_bytes(o.get(), 0))));
  if (!status)
    throw RunDbError(db_path +
                     ": table run_outcome: 'status' is not a run status; the database was not "
                     "written by traceml (or is damaged)");
  out.status = *status;
  out.exit_code = sqlite3_column_int(o.get(), 1);
  out.failed_rank = column_opt(o.get(), 2);
  // Where each rank was when it ended: columns an older build did not write.
  const bool where = has_column(db.get(), db_path, "rank_exits", "steps_completed");
  const std::string sql =
      std::string("SELECT global_rank, exit_code, signal, stopped_by_launcher, ") +
      (where ? "steps_completed, phase, rss_bytes" : "NULL, NULL, NULL") +
      " FROM rank_exits ORDER BY global_rank";
  SqliteStmt r = prepare_sqlite(db.get(), db_path, sql.c_str());
  while (sqlite3_step(r.get()) == SQLITE_ROW) {
    RankExit e;
    e.global_rank = sqlite3_column_int(r.get(), 0);
    e.exit_code = sqlite3_column_int(r.get(), 1);
    e.signal = column_opt(r.get(), 2);
    e.stopped_by_launcher = sqlite3_column_int(r.get(), 3) != 0;
    const auto bad = [&](const std::string& what) {
      return RunDbError(db_path + ": table rank_exits, rank " + std::to_string(e.global_rank) +
                        ": " + what + "; the database was not written by traceml (or is damaged)");
    };
    if (sqlite3_column_type(r.get(), 4) != SQLITE_NULL) {
      e.steps_completed = sqlite3_column_int64(r.get(), 4);
      if (*e.steps_completed < 0 || *e.steps_completed > (std::int64_t{1} << 62))
        throw bad("'steps_completed' must be within [0, 2^62]");
    }
    if (const auto phase = column_text(r.get(), 5)) {
      e.phase = model::loop_phase_from_key(*phase);
      if (!e.phase) throw bad("'phase' is not a loop phase");
    }
    if (sqlite3_column_type(r.get(), 6) != SQLITE_NULL) {
      e.rss_bytes = sqlite3_column_double(r.get(), 6);
      if (!std::isfinite(*e.rss_bytes) || *e.rss_bytes < 0.0) throw bad("'rss_bytes' must be >= 0");
    }
    out.ranks.push_back(e);
  }
  if (has_table(db.get(), db_path, "run_stalls")) out.stalls = read_stalls(db.get(), db_path);
  return out;
}

}  // namespace traceml::store
