// The collector of one run: accepts the ranks' telemetry connections, checks
// each record, and writes everything into the run database
// (<run dir>/telemetry.db) on a writer thread with batched transactions. It
// never prints: finish() returns a CollectionReport and the caller decides
// what to tell the user. Schema: docs/run-database.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "collector/live_board.hpp"
#include "collector/live_snapshot.hpp"
#include "collector/profile_requests.hpp"
#include "model/telemetry.hpp"
#include "store/black_box.hpp"
#include "store/run_db.hpp"

namespace traceml::collector {

/// The collector cannot start (port taken, run directory not writable, run
/// database already there). what() is one line that says how to fix it.
class CollectorError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CollectorOptions {
  std::string bind_host = "127.0.0.1";
  std::uint16_t port = 0;  ///< 0: pick a free port
  std::string token;       ///< run token the ranks' Hello must carry
  std::string run_dir;     ///< created if missing; must not hold a run database yet
  /// Run name, expected world size, strategy. Without a world size the first
  /// rank's sets it; either way a rank whose Hello names another world size,
  /// or a rank outside it, is refused.
  model::RunInfo run;
  /// The analysis window the run will be diagnosed with: the in-memory run
  /// (RunState) keeps what that window reads.
  std::int64_t window = 10000;
  /// The ranks' sampling and heartbeat interval (--interval): the live
  /// board calls a rank silent after 3 of them without a word.
  double interval_s = 1.0;
  /// The nodes of a `traceml run`: each node but 0 (whose traceml hosts the
  /// collector) relays its ranks' black boxes once they have ended
  /// (transport::PeerRole::Relay), and the end of the collection waits for
  /// those relays as it waits for the ranks.
  int nnodes = 1;
  /// What the run asks of its ranks' profilers (protocol 7): `traceml serve
  /// --profile-steps`, `--profile auto`. Default: nothing.
  ProfileAsking profile_asking;
  /// Where the collector publishes the run's live snapshot (live_snapshot.hpp)
  /// once an interval, for the live view and the metrics endpoint (which
  /// may outlive the collector); null: no reader, and none is taken.
  std::shared_ptr<SnapshotChannel> snapshots;
};

/// How the collection ended.
struct CollectionReport {
  int ranks_connected = 0;           ///< distinct ranks that passed the handshake
  std::vector<int> ranks_unended;    ///< ranks whose connection was still open at the deadline
  std::int64_t records = 0;          ///< records written to the database
  std::int64_t invalid_records = 0;  ///< records refused by the value checks
  /// Wire strings (hostname, device, strategy) that were not valid UTF-8 and
  /// were stored repaired (each ill-formed sequence as U+FFFD).
  std::int64_t strings_repaired = 0;
  /// Connections refused, all of them; the run database keeps only the first
  /// few in detail (`rejected_connections`) and these counts in
  /// `rejection_counts`.
  std::int64_t rejected_connections = 0;
  /// rejected_connections by kind ("wrong_token", "too_many_pending", ...).
  std::map<std::string, std::int64_t> rejected_by_kind;
  bool timed_out = false;
  /// The first run database write error; what arrived after it is not stored.
  std::optional<std::string> write_error;
  /// Per rank: the steps its black box gave that its connections had not
  /// brought (a rank that died, or was stopped, before it sent them).
  std::map<int, std::int64_t> steps_recovered;
  /// Nodes (1 to nnodes - 1) whose traceml had not relayed its ranks' black
  /// boxes by the deadline: what their ranks had not sent is lost.
  std::vector<int> nodes_unrelayed;
};

/// A refused connection: its kind ("wrong_token", "invalid_identity", ...),
/// the peer's address and why.
struct Refusal {
  std::string kind;
  std::string peer;
  std::string reason;
};

/// Where the collection stands, cheaply (no rows copied): what a host that
/// decides when a run has ended (`traceml serve`) polls.
struct RankProgress {
  int global_rank = 0;
  bool open = false;      ///< a connection of the rank is open
  bool said_bye = false;  ///< closed, and its last connection ended with Bye
  double closed_s = 0.0;  ///< closed: seconds since its last connection closed
  /// The program's exit status, when its goodbye said one (protocol 4).
  std::optional<int> exit_status;
};
struct Progress {
  /// The run's world size: the one it was given or, when none was, the first
  /// rank's (its Hello's WORLD_SIZE); absent until then.
  std::optional<int> world_size;
  std::vector<RankProgress> ranks;  ///< every rank that passed the handshake, by rank
  /// Seconds since records last arrived, or (none yet) since a peer first
  /// reached the collector, refused ones too; absent before either.
  std::optional<double> quiet_s;
  std::int64_t rejected_connections = 0;
  std::vector<Refusal> first_refusals;  ///< the first refusal of each kind
};

class Collector {
 public:
  /// Creates the run directory and database and starts listening. Throws
  /// CollectorError.
  explicit Collector(const CollectorOptions& options);
  /// Stops as finish() with an immediate deadline.
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  [[nodiscard]] std::uint16_t port() const;

  /// Ends the collection: waits until every open connection has closed and,
  /// when `expected_ranks` > 0, until that many ranks have connected and
  /// closed, or until `deadline`; then stops listening, writes what is
  /// buffered and closes the database. Idempotent (later calls return the
  /// first report).
  CollectionReport finish(std::chrono::steady_clock::time_point deadline, int expected_ranks = 0);
  /// The first half of finish(): waits for the ranks as it does, then stops
  /// listening. The run in memory is then complete (take_run()) while the
  /// writer may still be storing it: the end of a run diagnoses it meanwhile.
  /// finish() does the rest and reports.
  void stop_ingest(std::chrono::steady_clock::time_point deadline, int expected_ranks = 0);

  /// What a rank's black box held once the rank ended (store/black_box.hpp),
  /// from the node's launcher: taken by stop_ingest() after the connections
  /// have closed, so that the run stores each of its steps once, whichever
  /// way it came. Call before stop_ingest() or finish().
  void recover(store::BlackBoxReading reading);

  /// How the other nodes' ranks ended, as their nodes' traceml relayed it
  /// (one per rank, by rank). After stop_ingest() or finish().
  [[nodiscard]] std::vector<model::RankEnd> relayed_ends();

  /// The run as received so far (RunState::snapshot), from any thread while
  /// the ranks send: records are copied a chunk at a time, ingest goes on.
  [[nodiscard]] store::RunData snapshot() const;

  /// The run's latest `rows` rows per rank and where each rank stands, from
  /// any thread while the ranks send. Costs a copy of those rows under the
  /// run's lock (docs/performance.md "Live view").
  [[nodiscard]] LiveStatus live(std::int64_t rows = kLiveRows);
  /// The latest live snapshot (taken once an interval on the writer
  /// thread), from any thread: no copy, no lock but the channel's. Never
  /// null; an empty one before the first, or without a channel.
  [[nodiscard]] std::shared_ptr<const LiveSnapshot> latest_snapshot() const;
  /// Where the collection stands; from any thread.
  [[nodiscard]] Progress progress();
  /// Every stall the run has had, one still going counted up to now. Once
  /// the black boxes are taken (stop_ingest), a silent rank's stall that
  /// never resumed says where its rank's box had it (Stall::from_black_box).
  [[nodiscard]] std::vector<model::Stall> stalls();

  /// After stop_ingest() or finish(): the run held in memory, moved out
  /// (later calls get an empty run). It holds what was received even when the run database could
  /// not be written (CollectionReport::write_error).
  [[nodiscard]] store::RunData take_run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace traceml::collector
