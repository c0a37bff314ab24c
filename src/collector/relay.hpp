// The relay: how another node's `traceml run` hands the collector what its
// ranks' black boxes held once they have ended (protocol 5,
// transport::PeerRole::Relay). Node 0's traceml reads its own ranks' boxes
// and gives them to its collector directly (Collector::recover); every other
// node's sends them here, over a connection authenticated by the run token,
// and the collector stores each step once whichever way it came.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/telemetry.hpp"
#include "store/black_box.hpp"

namespace traceml::collector {

/// The collector, and who speaks to it.
struct RelayTarget {
  std::string host;
  std::uint16_t port = 0;
  std::string token;
  /// The node: node_rank, local_world_size, world_size, and its first rank
  /// as global_rank (local_rank 0); hostname when known.
  model::RankIdentity node;
};

/// One rank of the node, ended: how, and what its black box held (a box
/// the rank never mapped holds nothing).
struct RelayedRank {
  model::RankEnd end;
  store::BlackBoxReading box;
};

/// Sends every rank's end, then its box's steps and memory peaks, then Bye,
/// and waits until the collector has read them all (it closes after Bye).
/// Connects again while the collector is not there yet, within `budget` in
/// all. std::nullopt once it has them; else why not, one line.
std::optional<std::string> relay_to_collector(const RelayTarget& target,
                                              const std::vector<RelayedRank>& ranks,
                                              std::chrono::milliseconds budget);

/// The RankEnd of a box read after its rank ended, with what the launcher
/// saw (exit code, signal, whether it stopped the rank itself).
model::RankEnd rank_end_of(const store::BlackBoxReading& box, int global_rank, int exit_code,
                           std::optional<int> signal, bool stopped_by_launcher);

}  // namespace traceml::collector
