#include "store/rejection_counts.hpp"

#include <sqlite3.h>

#include <memory>

#include "model/text.hpp"
#include "store/run_db.hpp"

namespace traceml::store {
namespace {

/// Kinds are short snake_case words; a longer one read back is cut.
constexpr std::size_t kMaxKindBytes = 64;

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Db = std::unique_ptr<sqlite3, DbCloser>;
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

[[noreturn]] void fail(sqlite3* db, const std::string& path) {
  throw RunDbError(path + ": " + (db != nullptr ? sqlite3_errmsg(db) : "no memory"));
}

Db open(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK)
    throw RunDbError(path + ": cannot open the run database (" + sqlite3_errstr(rc) + ")");
  sqlite3_busy_timeout(raw, 5000);
  return db;
}

Stmt prepare(sqlite3* db, const std::string& path, const char* sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &raw, nullptr) != SQLITE_OK) fail(db, path);
  return Stmt(raw);
}

void exec(sqlite3* db, const std::string& path, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(db, path);
}

}  // namespace

std::int64_t total_rejections(const RejectionCounts& counts) {
  std::int64_t n = 0;
  for (const auto& [kind, count] : counts)
    n += count;
  return n;
}

void write_rejection_counts(const std::string& db_path, const RejectionCounts& counts) {
  Db db = open(db_path, SQLITE_OPEN_READWRITE);
  exec(db.get(), db_path, "BEGIN");
  exec(db.get(), db_path,
       "CREATE TABLE IF NOT EXISTS rejection_counts (kind TEXT PRIMARY KEY, count INTEGER NOT "
       "NULL); DELETE FROM rejection_counts;");
  const Stmt s = prepare(db.get(), db_path, "INSERT INTO rejection_counts VALUES (?, ?)");
  for (const auto& [kind, count] : counts) {
    sqlite3_reset(s.get());
    sqlite3_bind_text(s.get(), 1, kind.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s.get(), 2, count);
    if (sqlite3_step(s.get()) != SQLITE_DONE) fail(db.get(), db_path);
  }
  exec(db.get(), db_path, "COMMIT");
}

std::optional<RejectionCounts> read_rejection_counts(const std::string& db_path) {
  Db db = open(db_path, SQLITE_OPEN_READONLY);
  const Stmt has = prepare(db.get(), db_path,
                           "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                           "'rejection_counts'");
  if (sqlite3_step(has.get()) != SQLITE_ROW) return std::nullopt;
  const Stmt q = prepare(db.get(), db_path, "SELECT kind, count FROM rejection_counts");
  RejectionCounts out;
  int rc = 0;
  while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
    // The file is input like any other: a kind that is not text, or a count
    // below zero, must not break the summary that shows them.
    const auto* kind = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0));
    const std::int64_t count = sqlite3_column_int64(q.get(), 1);
    out[model::sanitize_utf8(kind != nullptr ? kind : "", kMaxKindBytes)] += count > 0 ? count : 0;
  }
  if (rc != SQLITE_DONE) fail(db.get(), db_path);
  return out;
}

}  // namespace traceml::store
