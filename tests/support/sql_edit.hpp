// Editing a run database as a damaged or hand-edited file would be: one SQL
// statement run on the file, outside traceml's reader and writer.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

namespace traceml::testing {

/// Runs `sql` on the SQLite file at `path`; a statement that fails fails the test.
inline void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db) << ": " << sql;
  sqlite3_close(db);
}

}  // namespace traceml::testing
