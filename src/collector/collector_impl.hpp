// The collector's state and its I/O and writer threads' work (the
// Collector's implementation), shared by its files: collector.cpp (the
// connections, the intake, the end of the collection) and recovery.cpp
// (what ranks that ended left: their black boxes, other nodes' relays).
// Private to the collector module.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>

#include "analysis/step_median.hpp"
#include "collector/connection_state.hpp"
#include "collector/intake.hpp"
#include "collector/profiles.hpp"
#include "collector/run_state.hpp"
#include "collector/seen_steps.hpp"
#include "collector/write_queue.hpp"
#include "model/black_box.hpp"
#include "model/limits.hpp"
#include "model/record_kinds.hpp"
#include "model/text.hpp"
#include "store/rejection_counts.hpp"
#include "store/run_db.hpp"
#include "transport/record_codec.hpp"
#include "transport/tcp_server.hpp"

#include "collector/collector.hpp"

namespace traceml::collector {

namespace impl_detail {

using namespace std::chrono_literals;

/// How often finish() rechecks the open connections while it waits.
inline constexpr auto kFinishPoll = 20ms;

/// How long finish() waits, at most, for connections still in their
/// handshake. A rank that has just connected passes it within a round trip, so
/// its Hello is in well before this; a peer without the token that keeps
/// opening connections and sends nothing would otherwise hold the end of the
/// run until the deadline.
inline constexpr auto kHandshakeGrace = 250ms;

/// How long finish() waits for the I/O thread to handle what it has taken in
/// (TcpServer::settle), per round trip.
inline constexpr auto kSettle = 200ms;

/// Refused connections stored one row each in `rejected_connections`; the
/// others are only counted (store::RejectionCounts). The first few say what
/// was refused and from where, which is all a user needs to find a stray
/// process; a flood of connections (thousands a second) must not grow the
/// database and the writer's queue with it.
inline constexpr std::int64_t kMaxRejectedRows = 32;

/// The largest world size a rank's Hello may teach a run that was given none.
using model::kMaxWorldSize;

/// The most ranks one relay speaks for (transport::PeerRole::Relay): a node
/// of a run. A relay holds what its node's black boxes held until it closes.
inline constexpr int kMaxRelayRanks = 1024;
/// Per rank a relay hands over its end, and the steps and memory peaks its
/// black box holds: at most this many records.
inline constexpr std::int64_t kMaxRelayedPerRank = 2 * std::int64_t{model::kBlackBoxSlots} + 1;

/// What the I/O thread hands the writer: any record a run keeps.
using Item = model::Record;

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace impl_detail

// The Impl below, collector.cpp and recovery.cpp use them by their short names.
using namespace impl_detail;

struct Collector::Impl final : transport::ServerHandler {
  using Connection = collector::Connection;
  using RankState = collector::RankState;

  explicit Impl(const CollectorOptions& o)
      : options(o),
        world(o.run.world_size),
        state(o.window),
        board(StallRules{o.interval_s}, unix_now()) {
    if (world && *world > 0) shared_world.store(*world);
  }

  /// The world size a Hello is checked against: the run's, or (a run that
  /// was given none: `traceml serve` without --world-size) the first
  /// accepted rank's, which then becomes the run's. A rank that disagrees is
  /// another job's. A Hello that is refused teaches nothing: a stray peer
  /// must not set the world for the ranks that follow.
  std::optional<std::string> check_world(const model::RankIdentity& id) {
    if (id.world_size && id.global_rank >= *id.world_size)
      return "global rank " + std::to_string(id.global_rank) + " outside its own world size " +
             std::to_string(*id.world_size);
    if (world && *world > 0) {
      if (id.global_rank >= *world)
        return "global rank " + std::to_string(id.global_rank) + " outside the run's world size " +
               std::to_string(*world);
      if (id.world_size && *id.world_size != *world)
        return "world size " + std::to_string(*id.world_size) + " differs from the run's " +
               std::to_string(*world) + " (a rank of another job, or a wrong --world-size?)";
      return std::nullopt;
    }
    if (id.world_size && *id.world_size > kMaxWorldSize)
      return "world size " + std::to_string(*id.world_size) + " is over " +
             std::to_string(kMaxWorldSize);
    if (id.world_size) {
      world = id.world_size;
      shared_world.store(*world);
      model::RunInfo info = options.run;
      info.world_size = world;
      push(info);
    }
    return std::nullopt;
  }

  // ---- ServerHandler (the server's I/O thread) ----

  transport::HelloReply on_hello(transport::ConnectionId id, const transport::Hello& hello,
                                 const std::string& peer) override {
    contact();
    if (hello.role == transport::PeerRole::Relay) return relay_hello(id, hello, peer);
    Connection c;
    c.id = id;
    c.stream = hello.stream;
    model::RankIdentity identity = hello.identity;
    for_each_text(identity, [this](std::string& text) { repair(text); });
    c.rank = hello.identity.global_rank;
    c.node_rank = hello.identity.node_rank;
    if (c.rank < 0)
      c.refuse = "negative global rank " + std::to_string(c.rank) + " in Hello";
    else if (const auto bad = model::check(identity))
      // The run-database reader applies the same rule: an identity stored
      // unchecked would make every later report of the run fail.
      c.refuse = "invalid identity in Hello: " + *bad;
    else
      c.refuse = check_world(identity);
    if (c.refuse) {
      // Closed at once: an open refused connection would hold the end of
      // the run, and its sender would not back off.
      reject(peer, "invalid_identity", *c.refuse);
      return {c.refuse, 0};
    }
    transport::HelloReply reply;
    {
      std::lock_guard<std::mutex> lk(state_mu);
      RankState& r = ranks[c.rank];
      ++r.open;
      r.latest = std::max(r.latest, id);
      // The goodbye of this connection, if any, says how the program ended;
      // an earlier connection's (a restarted rank's) no longer does.
      r.exit_status.reset();
      // The same process again resumes where its records stopped arriving
      // (its stream's other connection, if still open, was ended before
      // this call and counted); a new one starts from 0.
      if (c.stream != 0 && c.stream != r.stream) {
        r.stream = c.stream;
        r.stream_frames = 0;
      }
      if (c.stream != 0) reply.resume_from = r.stream_frames;
    }
    // Another process of the rank numbers its steps from 1 again.
    auto [at, fresh] = seen.try_emplace(c.rank);
    if (!fresh && c.stream != seen_stream[c.rank]) at->second.reset();
    seen_stream[c.rank] = c.stream;
    c.seen = &at->second;
    board.connected(c.rank, c.node_rank, LiveClock::now());
    connections.emplace(id, std::move(c));
    push(std::move(identity));
    return reply;
  }

  std::optional<std::string> on_frame(transport::ConnectionId id,
                                      const transport::Frame& frame) override {
    const auto it = connections.find(id);
    if (it == connections.end()) return std::string("frame on a connection without a Hello");
    Connection& c = it->second;
    if (c.refuse) return c.refuse;
    if (c.relay) return relay_frame(c, frame);
    // Hello and Bye carry no record; any other frame, its kind's (model/record_kinds.hpp).
    if (frame.type == transport::FrameType::Bye) {
      c.said_bye = true;
      return std::nullopt;
    }
    if (frame.type == transport::FrameType::Hello)
      return std::string("a second Hello on one connection");
    // Counted as it arrives, whatever its fate: a frame that is refused
    // would be refused again if the rank resent it.
    if (model::frame_holds_record(static_cast<std::uint8_t>(frame.type))) ++c.record_frames;
    auto record = transport::decode(frame);
    if (!record)
      return std::string("malformed ") + transport::frame_type_name(frame.type) + " payload";
    return std::visit([&](auto& r) { return take(c, std::move(r)); }, *record);
  }

  void on_read_end() override { hand_on(); }

  void on_closed(transport::ConnectionId id, bool clean, const std::string& /*reason*/) override {
    hand_on();  // the rank's records before its delivery
    const auto it = connections.find(id);
    if (it == connections.end()) return;
    Connection& c = it->second;
    if (c.profile_ready) requests.closed(c.rank, id);
    if (c.relay) {
      relay_closed(c);
    } else if (!c.refuse) {
      {
        std::lock_guard<std::mutex> lk(state_mu);
        RankState& r = ranks[c.rank];
        --r.open;
        r.records_received += c.records;
        if (c.stream != 0 && c.stream == r.stream) r.stream_frames += c.record_frames;
        if (id >= r.latest) r.clean_end = clean || c.said_bye || c.drained;
        r.closed_at = std::chrono::steady_clock::now();
      }
      board.closed(c.rank, LiveClock::now());
    }
    connections.erase(it);
  }

  void on_rejected(const std::string& peer, transport::Rejection kind,
                   const std::string& reason) override {
    reject(peer, transport::rejection_name(kind), reason);
  }

  // ---- relays: the other nodes' traceml (I/O thread) ----

  /// A relay's Hello: its identity names its node and that node's ranks. It
  /// is no rank: nothing of a rank's state (open, latest, the live board)
  /// hears of it.
  transport::HelloReply relay_hello(transport::ConnectionId id, const transport::Hello& hello,
                                    const std::string& peer) {
    const model::RankIdentity& node = hello.identity;
    std::optional<std::string> refuse;
    if (const auto bad = model::check(node))
      refuse = "invalid identity in a relay's Hello: " + *bad;
    else if (!node.node_rank || !node.local_world_size)
      refuse = "a relay's Hello names no node_rank and local_world_size";
    else if (*node.local_world_size > kMaxRelayRanks)
      refuse = "a relay speaks for at most " + std::to_string(kMaxRelayRanks) + " ranks, not " +
               std::to_string(*node.local_world_size);
    else if (*node.node_rank < 1 || *node.node_rank >= options.nnodes)
      refuse = "a relay of node " + std::to_string(*node.node_rank) + ": this run's relays are " +
               "nodes 1 to " + std::to_string(options.nnodes - 1);
    else if (!world || *world <= 0)
      refuse = "a relay needs the run's world size (only `traceml run` has relays)";
    else if (std::int64_t(node.global_rank) + *node.local_world_size > *world)
      refuse = "a relay's ranks " + std::to_string(node.global_rank) + " to " +
               std::to_string(std::int64_t(node.global_rank) + *node.local_world_size - 1) +
               " are outside the run's world size " + std::to_string(*world);
    else if (node.world_size && *node.world_size != *world)
      refuse = "a relay's world size " + std::to_string(*node.world_size) + " differs from the " +
               "run's " + std::to_string(*world);
    // Last: only a relay that passed the rest takes its node.
    else if (!relay_nodes.insert(*node.node_rank).second)
      refuse = "node " + std::to_string(*node.node_rank) + " has relayed already";
    if (refuse) {
      reject(peer, "invalid_identity", *refuse);
      return {refuse, 0};
    }
    Connection c;
    c.relay = true;
    c.rank = node.global_rank;
    c.node_rank = node.node_rank;
    c.relay_ranks = *node.local_world_size;
    connections.emplace(id, std::move(c));
    return {};
  }

  /// What a relay may send: its ranks' ends, their recovered steps and
  /// memory peaks, then Bye. A record of a rank not on its node, or one that
  /// fails its check, is skipped and counted, as a rank's is.
  std::optional<std::string> relay_frame(Connection& c, const transport::Frame& frame);

  template <typename R>
  std::optional<std::string> relay_take(Connection& c, R&& r);

  /// A relay's end: what it brought is taken like a local black box
  /// (take_recovered), also when it was cut short; its node counts as
  /// relayed only when it ended with Bye (a cut one is named at the end).
  void relay_closed(Connection& c);

  /// Nodes 1 to nnodes - 1 whose relay has not closed yet.
  std::vector<int> nodes_unrelayed();

  // ---- helpers of the I/O thread ----

  /// A record from a rank: its text repaired, then checked (the codec checks
  /// layout; the row's check, shared with the JSONL and run-database readers,
  /// meaning), then handed on.
  template <typename R>
  std::optional<std::string> take(Connection& c, R&& r) {
    constexpr const auto& row = model::row_of<std::decay_t<R>>();
    if constexpr (row.direction != model::Direction::RankToCollector) {
      return std::string("a frame ranks do not send: ") + row.name;
    } else {
      for_each_text(r, [this](std::string& text) { repair(text); });
      if (!from_sender(c.rank, c.node_rank, r) || model::check(r)) return invalid();
      handle(c, std::forward<R>(r));
      return std::nullopt;
    }
  }

  /// A record the run keeps: queued for the database and the run in memory.
  template <typename R>
  void handle(Connection& c, R&& r) {
    static_assert(model::row_of<std::decay_t<R>>().table != nullptr, "stored, or handled below");
    accept(c, std::forward<R>(r));
  }
  void handle(Connection& c, model::StepRecord&& r) {
    c.max_step = std::max(c.max_step, r.step);
    c.seen->mark(r.step);
    accept(c, std::move(r));
  }
  /// Kept per rank for its delivery; the last report wins.
  void handle(Connection& c, model::TracerStats&& s) {
    board.tracer_drops(c.rank, s.records_dropped);
    std::lock_guard<std::mutex> lk(state_mu);
    ranks[c.rank].tracer = std::move(s);
  }
  void handle(Connection& /*c*/, model::RankPosition&& p) { board.heartbeat(p, LiveClock::now()); }
  /// Written to the run directory as it comes (collector/profiles); the
  /// steps of a profile written with ops are kept as profiled (the analysis
  /// leaves the profiler's cost out).
  void handle(Connection& c, model::ProfileChunk&& p) {
    ++c.records;
    const std::string reason =
        p.chunk == 0 ? requests.profile_came(c.rank, p.first_step, p.last_step) : std::string();
    ProfileStore::Taken t = profiles.take(std::move(p), reason);
    if (t.refused) invalid();
    if (t.profiled) push(*t.profiled);
  }
  /// A capture began on the rank (protocol 8): its steps are profiled from
  /// now (the analysis and `--profile auto` leave them out), and a profile
  /// that never comes is said lost at the end.
  void handle(Connection& c, model::ProfiledSteps&& p) {
    ++c.records;
    ProfileStore::Taken t =
        profiles.began(p, requests.profile_came(c.rank, p.first_step, p.last_step));
    if (t.refused) invalid();
    if (t.profiled) push(*t.profiled);
  }
  /// The rank takes profile requests on this connection (protocol 7):
  /// serve's --profile-steps asks it now.
  void handle(Connection& c, model::ProfileReady&& /*r*/) {
    if (c.profile_ready) return;
    c.profile_ready = true;
    if (const auto ask = requests.ready(c.rank, c.id)) send(*ask);
  }
  /// A request on its rank's connection; one the socket cannot take is
  /// lost (serve's is asked again if the connection then closes; `auto`'s
  /// has used its rank's turn).
  void send(const ProfileAsk& a) {
    std::vector<std::uint8_t> frame;
    if (transport::append_record_frame(frame, a.request) > 0) server->send(a.connection, frame);
  }
  /// Kept per rank for its delivery: how its program ended.
  void handle(Connection& c, model::RankGoodbye&& g) {
    c.drained = true;
    if (!g.exit_status) return;  // drained at an explicit shutdown: the status follows at exit
    std::lock_guard<std::mutex> lk(state_mu);
    ranks[c.rank].exit_status = g.exit_status;
  }

  /// A record that decodes but fails the value checks is skipped, not fatal:
  /// one bad reading must not cost the rest of a rank's telemetry.
  std::optional<std::string> invalid() {
    invalid_records.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }

  /// A wire string that is not valid UTF-8 is repaired, not refused: each
  /// ill-formed sequence becomes U+FFFD (cut to kMaxStringBytes on a character
  /// boundary) and the repair is counted. The record around it is good, and
  /// refusing it over one byte would cost a rank's whole identity (the host
  /// name comes in the Hello) or a step's memory peak; the repaired string
  /// still names its host or device, and every later reader (JSON above all)
  /// can take it.
  void repair(std::string& s) {
    if (model::valid_utf8(s)) return;
    s = model::sanitize_utf8(s, transport::kMaxStringBytes);
    strings_repaired.fetch_add(1, std::memory_order_relaxed);
  }

  template <typename Record>
  void accept(Connection& c, Record&& r) {
    ++c.records;
    ++accepted;
    if (!c.touched) {
      c.touched = true;
      touched.push_back(&c);
    }
    pending.emplace_back(std::forward<Record>(r));
    if (pending.size() >= WriteQueue::kPendingRecords) hand_on();
  }

  /// Counts every refusal by kind; stores only the first kMaxRejectedRows.
  void reject(const std::string& peer, const std::string& kind, const std::string& reason) {
    contact();
    rejected.fetch_add(1, std::memory_order_relaxed);
    bool detail = false;
    {
      std::lock_guard<std::mutex> lk(state_mu);
      ++rejection_counts[kind];
      if (rejection_counts[kind] == 1) first_refusals.push_back({kind, peer, reason});
      detail = rejected_rows < kMaxRejectedRows;
      if (detail) ++rejected_rows;
    }
    if (detail) push(store::RejectedConnection{unix_now(), peer, reason});
  }

  void push(Item item) {
    pending.push_back(std::move(item));
    hand_on();
  }

  /// Hands the records gathered on the I/O thread to the writer's queue and
  /// to the run in memory, one lock each for the lot: a lock per record was
  /// the I/O thread's largest cost (its unlock woke the writer). Runs at the
  /// end of every read (on_read_end) and before anything else the I/O
  /// thread does, so that between two of its callbacks nothing waits here.
  void hand_on() {
    if (!touched.empty()) {
      // The live board hears of each rank once a batch, not once a record.
      const auto now = LiveClock::now();
      last_heard_ns.store(now.time_since_epoch().count(), std::memory_order_relaxed);
      for (Connection* c : touched) {
        board.heard(c->rank, c->max_step, now);
        c->touched = false;
      }
      touched.clear();
    }
    records_received.store(accepted, std::memory_order_relaxed);
    if (pending.empty()) return;
    // The run in memory takes each record as it is accepted, also after the
    // database has failed: it is complete once the connections are, while
    // the writer may still be storing the same records. It reads the
    // records first, so that the database's copy can then take them without
    // a copy; a failure there is kept until the database has them too, so
    // that neither copy depends on the other.
    std::exception_ptr failed;
    try {
      state.apply([&](store::RunSink& s) {
        for (const Item& item : pending)
          s.add(item);
      });
    } catch (...) {
      failed = std::current_exception();
    }
    queue->put(pending);
    if (failed) std::rethrow_exception(failed);
  }

  // ---- the live board ----

  /// Each rank's median step in seconds over `data` (its latest rows): the
  /// one the run's end weighs the tracer against (analysis::median_step_ms).
  static std::vector<std::pair<int, double>> median_steps(const store::RunData& data) {
    std::vector<std::pair<int, double>> out;
    for (const auto& [rank, ms] : analysis::median_step_ms(data.telemetry))
      out.emplace_back(rank, ms / 1000.0);
    return out;
  }

  /// Gives the board each rank's median step (its stall yardstick) from the
  /// latest rows. Returns the latest rows.
  store::RunData refresh_medians(std::int64_t rows = kLiveRows) {
    store::RunData latest = state.latest(rows);
    board.set_median_steps(median_steps(latest));
    return latest;
  }

  /// Takes the live snapshot from the latest rows and the board, and
  /// publishes it (writer thread).
  void publish_snapshot(store::RunData latest, LiveBoard::Snapshot at) {
    const auto began = std::chrono::steady_clock::now();
    LiveStatus status;
    status.latest = std::move(latest);
    status.ranks = std::move(at.ranks);
    status.stalls = std::move(at.stalls);
    status.invalid_records = invalid_records.load(std::memory_order_relaxed);
    status.rejected_connections = rejected.load(std::memory_order_relaxed);
    auto snap = std::make_shared<LiveSnapshot>(snapshot_of(status));
    snap->taken_unix = unix_now();
    if (const int w = shared_world.load(); w > 0) snap->world_size = w;
    snap->counts.records_received = records_received.load(std::memory_order_relaxed);
    snap->counts.stalls_dropped = board.stalls_dropped();
    snap->cost_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    snapshots->publish(std::move(snap));
  }

  // ---- finish ----

  /// Ranks that connected and have no connection open.
  int ranks_ended() {
    std::lock_guard<std::mutex> lk(state_mu);
    int n = 0;
    for (const auto& [rank, r] : ranks)
      if (r.open <= 0) ++n;
    return n;
  }

  /// Waits for the ranks, then stops the server; the run in memory is then
  /// complete, deliveries included. Returns at once when done before.
  void stop_ingest(std::chrono::steady_clock::time_point deadline, int expected_ranks) {
    if (ingest_stopped) return;
    CollectionReport& rep = ingest_report;
    rep = {};  // a call that threw half way starts again
    // Connections still in their handshake, or still in the listen backlog
    // (a rank's last reconnect the I/O thread has not accepted yet), are
    // waited for only during a short grace (kHandshakeGrace), never until the
    // deadline: they may be anyone's.
    const auto grace_end = std::chrono::steady_clock::now() + kHandshakeGrace;
    const auto settled = [&] {
      const bool quiet = server->handshaken_connections() == 0 &&
                         ((server->pending_connections() == 0 && !server->backlog_waiting()) ||
                          std::chrono::steady_clock::now() >= grace_end);
      return quiet && (expected_ranks <= 0 || ranks_ended() >= expected_ranks) &&
             nodes_unrelayed().empty();
    };
    for (;;) {
      if (settled()) {
        // A rank's last reconnect may have left the backlog without being
        // counted yet (its accept handler still queued): let the I/O thread
        // catch up, then look again.
        server->settle(kSettle);
        if (settled()) break;
        continue;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        rep.timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          kFinishPoll, deadline - std::chrono::steady_clock::now()));
    }
    {
      std::lock_guard<std::mutex> lk(state_mu);
      for (const auto& [rank, r] : ranks)
        if (r.open > 0) rep.ranks_unended.push_back(rank);
    }
    // Closes what is still open; on_closed merges those connections' counts.
    server->stop();
    rep.nodes_unrelayed = nodes_unrelayed();
    take_recovered(rep);
    // Profiles whose rank's connection ended before their last chunk: what
    // came is written, and said cut short.
    for (const model::ProfiledSteps& p : profiles.close_open())
      pending.emplace_back(p);
    hand_on();
    // The run's last snapshot, every record in: the live view's and the
    // metrics' final values, whenever the writer's next tick comes.
    if (snapshots) {
      std::lock_guard<std::mutex> lk(snapshot_mu);
      try {
        publish_snapshot(refresh_medians(), board.snapshot(LiveClock::now()));
      } catch (const std::exception&) {
        // The live values stay as the last tick left them.
      }
      snapshot_final = true;
    }
    std::lock_guard<std::mutex> lk(state_mu);
    for (const auto& [rank, r] : ranks)
      state.add(r.delivery(rank));
    ingest_stopped = true;  // last: finish() must redo what did not complete
  }

  /// Whether everything `rank` recorded reached this collector: its latest
  /// connection ended with a goodbye and its last counters dropped nothing.
  bool all_arrived(int rank);

  /// The black boxes' steps the connections did not bring, handed on like
  /// received records. The I/O thread has stopped: this thread owns its state.
  void take_recovered(CollectionReport& rep);

  CollectionReport finish(std::chrono::steady_clock::time_point deadline, int expected_ranks) {
    stop_ingest(deadline, expected_ranks);
    CollectionReport rep = ingest_report;
    queue->stop();
    // The writer thread is gone: this thread owns the database now.
    std::lock_guard<std::mutex> lk(state_mu);
    queue->write([&](store::RunDbWriter& w) {
      for (const auto& [rank, r] : ranks)
        w.add(r.delivery(rank));
      w.flush();
    });
    rep.ranks_connected = static_cast<int>(ranks.size());
    rep.records = queue->records();
    rep.invalid_records = invalid_records.load();
    rep.strings_repaired = strings_repaired.load();
    rep.rejected_connections = rejected.load();
    rep.rejected_by_kind = rejection_counts;
    queue->close();
    // After the writer has closed the file, like the run outcome.
    std::optional<std::string> error = queue->error();
    if (!error) {
      try {
        store::write_rejection_counts(db_path, rejection_counts);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    rep.write_error = error;
    return rep;
  }

  CollectorOptions options;
  std::optional<int> world;          // I/O thread: the world size Hellos are checked against
  std::atomic<int> shared_world{0};  // the same for other threads (0: none yet)
  std::string db_path;
  std::unique_ptr<transport::TcpServer> server;
  RunState state;   // fed as records are accepted (push), next to the database
  LiveBoard board;  // where each rank is: the live view's rows, the run's stalls
  /// The live snapshot's readers' channel (null: no reader, no snapshot),
  /// and when the writer last took one.
  std::shared_ptr<SnapshotChannel> snapshots = options.snapshots;
  std::chrono::steady_clock::time_point last_snapshot{};  // writer thread
  std::mutex snapshot_mu;                  // a tick's publish, and stop_ingest's last one
  bool snapshot_final = false;             // guarded by snapshot_mu: the run's last is out
  ProfileStore profiles{options.run_dir};  // the ranks' profiles, as files
  ProfileRequests requests{options.profile_asking};  // what the run asks of the ranks' profilers
  /// The database and its writer thread (null only while the constructor runs).
  std::unique_ptr<WriteQueue> queue;

  // I/O thread only.
  std::unordered_map<transport::ConnectionId, Connection> connections;
  std::unordered_map<int, SeenSteps> seen;             // per rank, its latest stream's
  std::unordered_map<int, std::uint64_t> seen_stream;  // the stream `seen` is of
  std::set<int> relay_nodes;  // nodes whose relay was accepted: one each, at most nnodes - 1

  std::mutex recovered_mu;
  std::vector<store::BlackBoxReading> recovered;  // taken by stop_ingest
  std::map<int, model::RankEnd> rank_ends;        // the relays', by rank
  std::set<int> nodes_relayed;                    // nodes whose relay has closed
  /// Guarded by state_mu: each rank's step and phase as its black box had
  /// them when it ended (stop_ingest), for its stall that never resumed.
  std::map<int, std::pair<std::int64_t, model::LoopPhase>> box_positions;

  std::mutex state_mu;
  std::map<int, RankState> ranks;  // sorted: deliveries are written in rank order
  store::RejectionCounts rejection_counts;
  std::int64_t rejected_rows = 0;       // refusals queued as rows
  std::vector<Refusal> first_refusals;  // the first of each kind

  std::int64_t accepted = 0;  // I/O thread: records accepted, told in records_received
  std::atomic<std::int64_t> records_received{0};
  std::atomic<std::int64_t> invalid_records{0};
  std::atomic<std::int64_t> strings_repaired{0};
  std::atomic<std::int64_t> rejected{0};
  /// When records last arrived (steady clock ticks; 0: never).
  std::atomic<LiveClock::rep> last_heard_ns{0};
  /// When a peer first got as far as a Hello or a refusal (0: never): a run
  /// whose ranks are all refused goes quiet from then.
  std::atomic<LiveClock::rep> first_contact_ns{0};

  void contact() {
    LiveClock::rep none = 0;
    first_contact_ns.compare_exchange_strong(none, LiveClock::now().time_since_epoch().count(),
                                             std::memory_order_relaxed);
  }

  std::vector<Item> pending;         // the I/O thread's records not handed on yet (hand_on)
  std::vector<Connection*> touched;  // connections with records since the last hand_on

  std::mutex finish_mu;  // stop_ingest and finish
  bool ingest_stopped = false;
  CollectionReport ingest_report;  // what stop_ingest learnt: timed out, ranks unended
  std::optional<CollectionReport> report;
};

}  // namespace traceml::collector
