// What the collector keeps of each connection that passed its handshake, and
// of each rank across its connections (a rank may reconnect after a failure).
// collector/collector.cpp's own; std, model and store only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "collector/seen_steps.hpp"
#include "model/telemetry.hpp"
#include "store/black_box.hpp"
#include "store/run_db.hpp"

namespace traceml::collector {

/// One accepted connection that passed the handshake. I/O thread only.
struct Connection {
  std::uint64_t id = 0;  ///< the server's (transport::ConnectionId)
  int rank = 0;
  std::optional<int> node_rank;
  bool said_bye = false;
  /// Its goodbye came (protocol 4): everything the rank recorded was sent
  /// before it, so a close without Bye after it lost nothing.
  bool drained = false;
  /// It said ProfileReady (protocol 7): profile requests may go to it.
  bool profile_ready = false;
  std::int64_t records = 0;   // valid records queued; merged into the rank at close
  std::int64_t max_step = 0;  // highest step received, for the live board
  bool touched = false;       // records since the last hand_on (in `touched`)
  std::uint64_t stream = 0;   // the Hello's (protocol 4), or 0
  /// Record frames read on this connection, valid or not: merged into the
  /// rank's stream count at close.
  std::uint64_t record_frames = 0;
  /// Set when the Hello's identity is unusable: the first frame closes the connection.
  std::optional<std::string> refuse;
  /// The steps of its rank's process the collector has (in `seen`).
  SeenSteps* seen = nullptr;

  /// Another node's traceml (transport::PeerRole::Relay), not a rank: it
  /// hands over the black boxes of its node's ranks, `rank` to
  /// `rank + relay_ranks - 1`, gathered here until it closes.
  bool relay = false;
  int relay_ranks = 0;
  std::map<int, store::BlackBoxReading> relayed;
  std::map<int, model::RankEnd> rank_ends;
  std::int64_t relayed_records = 0;
};

/// What the collector knows of a rank across its connections (a rank may
/// reconnect after a failure). Guarded by state_mu.
struct RankState {
  std::int64_t records_received = 0;
  bool clean_end = false;  // of its latest connection (the one accepted last)
  /// Its latest connection: an older one that closes after it (its end
  /// read later) does not speak for the rank.
  std::uint64_t latest = 0;  // a transport::ConnectionId
  int open = 0;
  std::optional<model::TracerStats> tracer;
  std::optional<int> exit_status;                     // its goodbye's, the last one wins
  std::chrono::steady_clock::time_point closed_at{};  // of its latest connection
  /// Protocol 4: the rank's stream (its process) and the record frames of
  /// it read on closed connections: where a reconnecting rank resumes.
  std::uint64_t stream = 0;
  std::uint64_t stream_frames = 0;

  [[nodiscard]] store::RankDelivery delivery(int rank) const {
    return store::RankDelivery{rank, records_received, clean_end, tracer, exit_status};
  }
};

}  // namespace traceml::collector
