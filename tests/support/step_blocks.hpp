// Editing the step blocks of a run database (schema version 2) the way a
// damaged or hand-edited file would hold them: a block decoded, its records
// changed, and encoded again, so that tests can put values no collector
// accepts into a file.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/step_record.hpp"
#include "store/step_block.hpp"

namespace traceml::testing {

/// Rewrites block `id` of `db_path`: `edit(record, r)` may change each record
/// (`record` from 1, as the reader's errors count them) before it is encoded
/// again. The rank and row count stay as they were.
inline void rewrite_step_block(const std::string& db_path, std::int64_t id,
                               const std::function<void(std::int64_t, model::StepRecord&)>& edit) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT global_rank, rows, data FROM step_blocks WHERE id = ?",
                               -1, &q, nullptr),
            SQLITE_OK);
  sqlite3_bind_int64(q, 1, id);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW) << "no step block " << id;
  const int rank = sqlite3_column_int(q, 0);
  const std::int64_t rows = sqlite3_column_int64(q, 1);
  const std::string bytes(static_cast<const char*>(sqlite3_column_blob(q, 2)),
                          static_cast<std::size_t>(sqlite3_column_bytes(q, 2)));
  sqlite3_finalize(q);
  store::StepBlockDecoder decoder(bytes, rank, rows);
  store::StepBlockEncoder encoder;
  model::StepRecord r;
  for (std::int64_t i = 1; decoder.next(r); ++i) {
    edit(i, r);
    encoder.add(r);
  }
  sqlite3_stmt* u = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE step_blocks SET data = ? WHERE id = ?", -1, &u, nullptr),
            SQLITE_OK);
  sqlite3_bind_blob(u, 1, encoder.bytes().data(), static_cast<int>(encoder.bytes().size()),
                    SQLITE_TRANSIENT);
  sqlite3_bind_int64(u, 2, id);
  EXPECT_EQ(sqlite3_step(u), SQLITE_DONE) << sqlite3_errmsg(db);
  sqlite3_finalize(u);
  sqlite3_close(db);
}

}  // namespace traceml::testing
