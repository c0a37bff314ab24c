#include "analysis/rank_identity.hpp"

#include <set>

namespace traceml::analysis {

Identity identity_of(const model::Telemetry& t, int rank) {
  Identity id;
  id.global_rank = rank;
  // The latest declaration of a rank wins, as with every other record.
  for (auto it = t.ranks.rbegin(); it != t.ranks.rend(); ++it) {
    if (it->global_rank != rank) continue;
    id.local_rank = it->local_rank;
    id.node_rank = it->node_rank;
    id.hostname = it->hostname;
    id.local_world_size = it->local_world_size;
    id.world_size = it->world_size;
    break;
  }
  return id;
}

std::string mode_of(const std::vector<Identity>& ids) {
  if (ids.empty()) return "no_data";
  std::set<int> nodes;
  bool wide = false;
  for (const auto& id : ids) {
    if (id.node_rank) nodes.insert(*id.node_rank);
    if (id.world_size && id.local_world_size && *id.world_size > *id.local_world_size) wide = true;
  }
  return nodes.size() > 1 || wide ? "multi_node" : "single_node";
}

}  // namespace traceml::analysis
