#include "store/rejection_counts.hpp"

#include <memory>

#include "model/text.hpp"
#include "store/run_db.hpp"
#include "store/sqlite_handle.hpp"

namespace traceml::store {
namespace {

/// Kinds are short snake_case words; a longer one read back is cut.
constexpr std::size_t kMaxKindBytes = 64;

}  // namespace

std::int64_t total_rejections(const RejectionCounts& counts) {
  std::int64_t n = 0;
  for (const auto& [kind, count] : counts)
    n += count;
  return n;
}

void write_rejection_counts(const std::string& db_path, const RejectionCounts& counts) {
  SqliteDb db = open_sqlite(db_path, SQLITE_OPEN_READWRITE);
  exec_sqlite(db.get(), db_path, "BEGIN");
  exec_sqlite(
      db.get(), db_path,
      "CREATE TABLE IF NOT EXISTS rejection_counts (kind TEXT PRIMARY KEY, count INTEGER NOT "
      "NULL); DELETE FROM rejection_counts;");
  const SqliteStmt s =
      prepare_sqlite(db.get(), db_path, "INSERT INTO rejection_counts VALUES (?, ?)");
  for (const auto& [kind, count] : counts) {
    sqlite3_reset(s.get());
    sqlite3_bind_text(s.get(), 1, kind.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(s.get(), 2, count);
    if (sqlite3_step(s.get()) != SQLITE_DONE) throw_sqlite_error(db.get(), db_path);
  }
  exec_sqlite(db.get(), db_path, "COMMIT");
}

std::optional<RejectionCounts> read_rejection_counts(const std::string& db_path) {
  SqliteDb db = open_sqlite(db_path, SQLITE_OPEN_READONLY);
  const SqliteStmt has =
      prepare_sqlite(db.get(), db_path,
                     "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                     "'rejection_counts'");
  if (sqlite3_step(has.get()) != SQLITE_ROW) return std::nullopt;
  const SqliteStmt q =
      prepare_sqlite(db.get(), db_path, "SELECT kind, count FROM rejection_counts");
  RejectionCounts out;
  int rc = 0;
  while ((rc = sqlite3_step(q.get())) == SQLITE_ROW) {
    // The file is input like any other: a kind that is not text, or a count
    // below zero, must not break the summary that shows them.
    const auto* kind = reinterpret_cast<const char*>(sqlite3_column_text(q.get(), 0));
    const std::int64_t count = sqlite3_column_int64(q.get(), 1);
    out[model::sanitize_utf8(kind != nullptr ? kind : "", kMaxKindBytes)] += count > 0 ? count : 0;
  }
  if (rc != SQLITE_DONE) throw_sqlite_error(db.get(), db_path);
  return out;
}

}  // namespace traceml::store
