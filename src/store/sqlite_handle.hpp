// The few SQLite calls the run database's side tables (run outcome,
// rejection counts) share: owned handles, opening, statements, plain SQL.
// Every failure is a RunDbError naming the file. The telemetry tables have
// their own writer and reader (run_db.cpp), tuned for volume.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>

namespace traceml::store {

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
struct SqliteFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using SqliteDb = std::unique_ptr<sqlite3, SqliteCloser>;
using SqliteStmt = std::unique_ptr<sqlite3_stmt, SqliteFinalizer>;

/// Opens `path` with `flags` (SQLITE_OPEN_*), with a 5 s busy timeout.
SqliteDb open_sqlite(const std::string& path, int flags);
/// Throws RunDbError "<path>: <SQLite's message>".
[[noreturn]] void throw_sqlite_error(sqlite3* db, const std::string& path);
SqliteStmt prepare_sqlite(sqlite3* db, const std::string& path, const char* sql);
void exec_sqlite(sqlite3* db, const std::string& path, const char* sql);

}  // namespace traceml::store
