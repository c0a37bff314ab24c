// What the collector does to any record a rank sends before it takes it,
// derived from the record's row (model/record_kinds.hpp) and field list, so
// that a new kind needs nothing here. std and model only.
#pragma once

#include <optional>
#include <string>
#include <type_traits>

#include "model/record_kinds.hpp"

namespace traceml::collector {

/// Whether the field that names a record's sender (its row's `owner`) names
/// the connection's rank, or its node (when its Hello gave one): a rank
/// sends only its own records, and local rank 0 samples only its own node.
template <typename R>
bool from_sender(int global_rank, std::optional<int> node_rank, const R& r) {
  constexpr const auto& row = model::row_of<R>();
  if constexpr (row.sender == model::Sender::GlobalRank)
    return r.*(row.owner) == global_rank;
  else if constexpr (row.sender == model::Sender::NodeRank)
    return !node_rank || r.*(row.owner) == *node_rank;
  else
    return true;
}

/// Calls f(s) for every text `v` holds: a string, or the text fields of a
/// record (its field list), nested records too.
template <typename V, typename F>
void for_each_text(V& v, F&& f) {
  using namespace model::schema;
  if constexpr (std::is_same_v<V, std::string>) {
    f(v);
  } else if constexpr (is_optional_v<V>) {
    if (v) for_each_text(*v, f);
  } else if constexpr (is_vector_v<V>) {
    for (auto& e : v)
      for_each_text(e, f);
  } else if constexpr (has_schema_v<V>) {
    for_each_field<V>([&](const auto& field) { for_each_text(v.*(field.member), f); });
  }
}

}  // namespace traceml::collector
