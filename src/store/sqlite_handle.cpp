#include "store/sqlite_handle.hpp"

#include "store/run_db.hpp"

namespace traceml::store {

SqliteDb open_sqlite(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  SqliteDb db(raw);
  if (rc != SQLITE_OK)
    throw RunDbError(path + ": cannot open the run database (" + sqlite3_errstr(rc) + ")");
  sqlite3_busy_timeout(raw, 5000);
  return db;
}

void throw_sqlite_error(sqlite3* db, const std::string& path) {
  throw RunDbError(path + ": " + (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}

SqliteStmt prepare_sqlite(sqlite3* db, const std::string& path, const char* sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &raw, nullptr) != SQLITE_OK) throw_sqlite_error(db, path);
  return SqliteStmt(raw);
}

void exec_sqlite(sqlite3* db, const std::string& path, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string what = err != nullptr ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw RunDbError(path + ": " + what);
  }
}

}  // namespace traceml::store
