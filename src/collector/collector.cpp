// The collector: the server's I/O thread decodes and checks frames and hands
// records to a bounded queue; one writer thread owns the run database and
// writes the queue in batches. Never prints: finish() returns what happened.
// Its state is collector_impl.hpp; what ranks that ended left (black boxes,
// relays) is recovery.cpp.
#include "collector/collector_impl.hpp"

namespace traceml::collector {

Collector::Collector(const CollectorOptions& options) : impl_(std::make_unique<Impl>(options)) {
  Impl& m = *impl_;
  transport::ServerOptions so;
  so.bind_host = options.bind_host;
  so.port = options.port;
  so.token = options.token;
  // Listening comes first: a port that is taken must not leave a run
  // directory with an empty database behind.
  try {
    m.server = std::make_unique<transport::TcpServer>(so, m);
  } catch (const transport::TransportError& e) {
    throw CollectorError(e.what());
  }
  std::error_code ec;
  std::filesystem::create_directories(options.run_dir, ec);
  if (ec)
    throw CollectorError("cannot create run directory " + options.run_dir + ": " + ec.message() +
                         " (choose a writable --logs-dir)");
  const std::string db = (std::filesystem::path(options.run_dir) / store::kRunDbFileName).string();
  m.db_path = db;
  try {
    auto writer = std::make_unique<store::RunDbWriter>(db);
    writer->add(options.run);
    writer->flush();
    m.state.add(options.run);
    // Stalls are caught in every display mode, not only while a live view
    // looks: the writer classifies the board at least every board interval.
    m.queue = std::make_unique<WriteQueue>(std::move(writer), [&m](auto now) {
      store::RunData latest = m.refresh_medians();
      LiveBoard::Snapshot board = m.board.snapshot(now);
      // --profile auto: the ranks whose steps turned slow, or whose stall
      // resumed, are asked for their next steps.
      if (m.requests.automatic())
        for (const ProfileAsk& a :
             m.requests.check(latest.telemetry, board.stalls,
                              std::chrono::duration<double>(now.time_since_epoch()).count()))
          m.send(a);
      if (m.snapshots && now - m.last_snapshot >= snapshot_period(m.options.interval_s)) {
        m.last_snapshot = now;
        // Never after the run's last one (stop_ingest's, every record in):
        // the run in memory may be taken (emptied) since.
        std::lock_guard<std::mutex> lk(m.snapshot_mu);
        if (!m.snapshot_final) m.publish_snapshot(std::move(latest), std::move(board));
      }
    });
  } catch (const store::RunDbError& e) {
    throw CollectorError(e.what());
  }
  m.pending.reserve(WriteQueue::kPendingRecords);
  try {
    m.server->start();
  } catch (const std::exception& e) {
    m.finish(std::chrono::steady_clock::now(), 0);
    throw CollectorError(std::string("cannot start the collector: ") + e.what());
  }
}

Collector::~Collector() {
  try {
    finish(std::chrono::steady_clock::now());
  } catch (...) {
    // A destructor must not throw; finish() reports nothing we could act on here.
  }
}

std::uint16_t Collector::port() const {
  return impl_->server->port();
}

CollectionReport Collector::finish(std::chrono::steady_clock::time_point deadline,
                                   int expected_ranks) {
  std::lock_guard<std::mutex> lk(impl_->finish_mu);
  if (!impl_->report) impl_->report = impl_->finish(deadline, expected_ranks);
  return *impl_->report;
}

void Collector::stop_ingest(std::chrono::steady_clock::time_point deadline, int expected_ranks) {
  std::lock_guard<std::mutex> lk(impl_->finish_mu);
  impl_->stop_ingest(deadline, expected_ranks);
}

void Collector::recover(store::BlackBoxReading reading) {
  std::lock_guard<std::mutex> lk(impl_->recovered_mu);
  impl_->recovered.push_back(std::move(reading));
}

std::vector<model::RankEnd> Collector::relayed_ends() {
  std::vector<model::RankEnd> out;
  std::lock_guard<std::mutex> lk(impl_->recovered_mu);
  for (const auto& [rank, end] : impl_->rank_ends)
    out.push_back(end);
  return out;
}

store::RunData Collector::snapshot() const {
  return impl_->state.snapshot();
}

LiveStatus Collector::live(std::int64_t rows) {
  const auto now = LiveClock::now();
  LiveStatus s;
  s.latest = impl_->refresh_medians(rows);
  LiveBoard::Snapshot board = impl_->board.snapshot(now);
  s.ranks = std::move(board.ranks);
  s.stalls = std::move(board.stalls);
  s.invalid_records = impl_->invalid_records.load(std::memory_order_relaxed);
  s.rejected_connections = impl_->rejected.load(std::memory_order_relaxed);
  return s;
}

std::shared_ptr<const LiveSnapshot> Collector::latest_snapshot() const {
  if (impl_->snapshots) return impl_->snapshots->latest();
  static const auto none = std::make_shared<const LiveSnapshot>();
  return none;
}

Progress Collector::progress() {
  Impl& m = *impl_;
  Progress p;
  // Everything is read under the lock the I/O thread takes after it set the
  // world and the first contact (on_hello) and before a rank shows closed
  // (on_closed): a rank seen here comes with what was set before it, and
  // `now` is not older than any time stored.
  std::lock_guard<std::mutex> lk(m.state_mu);
  const auto now = std::chrono::steady_clock::now();
  const auto since = [now](std::chrono::steady_clock::time_point t) {
    return std::max(0.0, std::chrono::duration<double>(now - t).count());
  };
  if (const int w = m.shared_world.load(); w > 0) p.world_size = w;
  auto heard = m.last_heard_ns.load(std::memory_order_relaxed);
  if (heard == 0) heard = m.first_contact_ns.load(std::memory_order_relaxed);
  if (heard != 0) p.quiet_s = since(LiveClock::time_point(LiveClock::duration(heard)));
  p.rejected_connections = m.rejected.load(std::memory_order_relaxed);
  for (const auto& [rank, r] : m.ranks) {
    RankProgress rp;
    rp.global_rank = rank;
    rp.open = r.open > 0;
    rp.said_bye = !rp.open && r.clean_end;
    if (!rp.open) rp.closed_s = since(r.closed_at);
    rp.exit_status = r.exit_status;
    p.ranks.push_back(rp);
  }
  p.first_refusals = m.first_refusals;
  return p;
}

std::vector<model::Stall> Collector::stalls() {
  std::vector<model::Stall> stalls = impl_->board.stalls(LiveClock::now());
  std::lock_guard<std::mutex> lk(impl_->state_mu);
  for (model::Stall& s : stalls) {
    // Only a silent rank's position is stale: a stalled one still sends
    // heartbeats, which read the same memory, and its box's phase at its end
    // may be where an exception left it, not where it waited.
    const auto it = impl_->box_positions.find(s.global_rank);
    if (s.resumed || s.kind != "silent" || it == impl_->box_positions.end()) continue;
    s.step = it->second.first;
    s.phase = it->second.second;
    s.from_black_box = true;
  }
  return stalls;
}

store::RunData Collector::take_run() {
  std::lock_guard<std::mutex> lk(impl_->finish_mu);
  return impl_->state.take();
}

}  // namespace traceml::collector
