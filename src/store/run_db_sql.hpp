// What the run database's writer and reader share (internal to store/): the
// prepared-statement handle, and the columns of each record, derived from its
// field list (model/telemetry.hpp).
//
// A record's columns: each value field one column (named as the field, or its
// `column`), a nested optional record flattened into the same row — a
// has_<name> flag column when the list asks for one, then its values as
// <column>_<name> columns — and lists kept in tables of their own.
//
// A kind's table (its row's `table`, model/record_kinds.hpp) is, unless the
// writer and reader store it by code of their own (the run info, the steps in
// blocks), one flat row per record: table_columns<R>() under the key
// table_key<R>(). A new kind with a Schema and a table needs nothing here.
#pragma once

#include <sqlite3.h>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/record_kinds.hpp"
#include "model/telemetry.hpp"

namespace traceml::store::sql {

/// Identifies a traceml run database among SQLite files.
inline constexpr const char* kFormatName = "traceml-run-db";

/// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt() = default;
  /// Takes ownership of a prepared statement.
  explicit Stmt(sqlite3_stmt* s) : s_(s) {}
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stmt& operator=(Stmt&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  [[nodiscard]] sqlite3_stmt* get() const { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
};

/// The bytes of a column as SQLite gives them (numbers as their text).
inline std::string col_bytes(sqlite3_stmt* s, int i) {
  const auto* p = sqlite3_column_text(s, i);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
}

/// Which fields of a record: the values (its first part), the nested
/// records (its second), or both. A step row keeps its event columns between.
enum class Part { Values, Nested, All };

/// Whether a file has the columns of fields marked `added_later`.
enum class Later { Included, Left };

struct Column {
  std::string name;
  const char* type;  ///< INTEGER, REAL or TEXT
  bool not_null;
};

template <class M>
constexpr const char* sql_type() {
  using V = model::schema::value_type_t<M>;
  if constexpr (std::is_same_v<V, double>) return "REAL";
  if constexpr (std::is_same_v<V, std::string>) return "TEXT";
  return "INTEGER";
}

/// Calls f(field) for the fields of R in `part` that the file has.
template <class R, class F>
void for_each_stored_field(Part part, Later later, F&& f) {
  model::schema::for_each_field<R>([&](const auto& field) {
    using M = typename std::decay_t<decltype(field)>::Member;
    if constexpr (model::schema::is_vector_v<M>) {
      return;  // a table of its own
    } else {
      const bool nested = model::schema::is_nested_v<M>;
      if (part == Part::Values && nested) return;
      if (part == Part::Nested && !nested) return;
      if (field.added_later && later == Later::Left) return;
      f(field);
    }
  });
}

/// The columns of R's fields in `part`; `prefix` names a nested record's
/// columns, whose values may all be NULL (the record absent).
template <class R>
void add_columns(std::vector<Column>& out, Part part, Later later, const std::string& prefix = {},
                 bool in_optional = false) {
  for_each_stored_field<R>(part, later, [&](const auto& field) {
    using M = typename std::decay_t<decltype(field)>::Member;
    if constexpr (model::schema::is_nested_v<M>) {
      if (field.presence_column)
        out.push_back({prefix + "has_" + field.name, "INTEGER", !in_optional});
      add_columns<typename M::value_type>(out, Part::All, later, prefix + field.column_name() + "_",
                                          true);
    } else {
      out.push_back({prefix + field.column_name(), sql_type<M>(),
                     !in_optional && !model::schema::is_optional_v<M>});
    }
  });
}

template <class R>
std::vector<Column> columns(Part part, Later later = Later::Included) {
  std::vector<Column> out;
  add_columns<R>(out, part, later);
  return out;
}

/// The column keying a kind's table when a later record with the same value
/// replaces the earlier one (a rank's identity, its delivery: INSERT OR
/// REPLACE, read back in that key's order); nullptr: every record is a row of
/// its own under an `id INTEGER PRIMARY KEY`, read back in arrival order.
template <class R>
constexpr const char* table_key() {
  if constexpr (std::is_same_v<R, model::RankIdentity> || std::is_same_v<R, model::RankDelivery>)
    return "global_rank";
  else
    return nullptr;
}

/// The columns of a kind's table (after its `id`, when keyed by one): its
/// Schema's, flattened. The two kinds without a Schema spell theirs: a
/// delivery is the collector's own counts of a rank, then what its tracer
/// said (absent: every tracer column NULL); a refused connection is its time,
/// peer and reason. Later::Left: the columns of a file from before the fields
/// marked `added_later`.
template <class R>
std::vector<Column> table_columns(Later later = Later::Included) {
  if constexpr (std::is_same_v<R, model::RankDelivery>) {
    std::vector<Column> cols = {{"global_rank", "INTEGER", true},
                                {"records_received", "INTEGER", true},
                                {"clean_end", "INTEGER", true},
                                {"has_tracer", "INTEGER", true}};
    add_columns<model::TracerStats>(cols, Part::All, later, {}, true);
    return cols;
  } else if constexpr (std::is_same_v<R, model::RejectedConnection>) {
    return {{"ts", "REAL", true}, {"peer", "TEXT", true}, {"reason", "TEXT", true}};
  } else {
    return columns<R>(Part::All, later);
  }
}

/// A system sample's GPUs, a list kept in a table of its own: a row per GPU,
/// the sample's id, then the GPU's values.
inline constexpr const char* kSystemGpusTable = "system_gpus";
inline std::vector<Column> system_gpu_columns() {
  std::vector<Column> cols = {{"sample_id", "INTEGER", true}};
  for (auto& c : columns<model::GpuSample>(Part::All))
    cols.push_back(std::move(c));
  return cols;
}

/// "a, b, c".
inline std::string names(const std::vector<Column>& cols) {
  std::string s;
  for (const auto& c : cols) {
    if (!s.empty()) s += ", ";
    s += c.name;
  }
  return s;
}

/// "a REAL NOT NULL, b INTEGER"; `key` is the INTEGER PRIMARY KEY among them.
inline std::string definitions(const std::vector<Column>& cols, const std::string& key = {}) {
  std::string s;
  for (const auto& c : cols) {
    if (!s.empty()) s += ", ";
    s += c.name + " " + c.type;
    if (c.name == key)
      s += " PRIMARY KEY";
    else if (c.not_null)
      s += c.name.compare(0, 4, "has_") == 0 ? " NOT NULL DEFAULT 0" : " NOT NULL";
  }
  return s;
}

/// "?, ?, ?" for `n` parameters.
inline std::string placeholders(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i)
    s += i == 0 ? "?" : ", ?";
  return s;
}

/// The two clock columns of each step event, in Event order:
/// <event>_cpu_ms, <event>_gpu_ms.
inline std::vector<Column> event_columns() {
  std::vector<Column> out;
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    const std::string name = model::event_name(static_cast<model::Event>(e));
    out.push_back({name + "_cpu_ms", "REAL", false});
    out.push_back({name + "_gpu_ms", "REAL", false});
  }
  return out;
}

}  // namespace traceml::store::sql
