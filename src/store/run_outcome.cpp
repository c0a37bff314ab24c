#include "store/run_outcome.hpp"

#include <memory>

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

bool has_table(sqlite3* db, const std::string& path, const char* name) {
  SqliteStmt s =
      prepare_sqlite(db, path, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?");
  sqlite3_bind_text(s.get(), 1, name, -1, SQLITE_STATIC);
  return sqlite3_step(s.get()) == SQLITE_ROW;
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
      " signal INTEGER, stopped_by_launcher INTEGER NOT NULL);"
      "DELETE FROM run_outcome; DELETE FROM rank_exits;");
  SqliteStmt o = prepare_sqlite(db.get(), db_path, "INSERT INTO run_outcome VALUES (?, ?, ?)");
  sqlite3_bind_text(o.get(), 1, outcome.status.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(o.get(), 2, outcome.exit_code);
  bind_opt(o.get(), 3, outcome.failed_rank);
  if (sqlite3_step(o.get()) != SQLITE_DONE) throw_sqlite_error(db.get(), db_path);
  SqliteStmt r = prepare_sqlite(db.get(), db_path, "INSERT INTO rank_exits VALUES (?, ?, ?, ?)");
  for (const RankExit& e : outcome.ranks) {
    sqlite3_reset(r.get());
    sqlite3_bind_int(r.get(), 1, e.global_rank);
    sqlite3_bind_int(r.get(), 2, e.exit_code);
    bind_opt(r.get(), 3, e.signal);
    sqlite3_bind_int(r.get(), 4, e.stopped_by_launcher ? 1 : 0);
    if (sqlite3_step(r.get()) != SQLITE_DONE) throw_sqlite_error(db.get(), db_path);
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
  out.status = reinterpret_cast<const char*>(sqlite3_column_text(o.get(), 0));
  out.exit_code = sqlite3_column_int(o.get(), 1);
  out.failed_rank = column_opt(o.get(), 2);
  SqliteStmt r =
      prepare_sqlite(db.get(), db_path,
                     "SELECT global_rank, exit_code, signal, stopped_by_launcher FROM rank_exits"
                     " ORDER BY global_rank");
  while (sqlite3_step(r.get()) == SQLITE_ROW) {
    RankExit e;
    e.global_rank = sqlite3_column_int(r.get(), 0);
    e.exit_code = sqlite3_column_int(r.get(), 1);
    e.signal = column_opt(r.get(), 2);
    e.stopped_by_launcher = sqlite3_column_int(r.get(), 3) != 0;
    out.ranks.push_back(e);
  }
  return out;
}

}  // namespace traceml::store
