#include "runtime/sender.hpp"

#include <pthread.h>

#include <unistd.h>

#include <algorithm>
#include <random>
#include <utility>
#include <variant>

#include "runtime/pipe_safety.hpp"
#include "runtime/sender_internal.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"
#include "transport/record_codec.hpp"

namespace traceml::runtime {

namespace sender_detail {

WakeSignal& wake_signal() {
  static auto* w = new WakeSignal;
  return *w;
}

}  // namespace sender_detail

namespace {

using namespace sender_detail;

/// Connections a collector closes without a Verdict, none ever having come,
/// before the sender speaks protocol 3 to it. A collector of 4 closes
/// without one only when it is full of connections waiting for their Hello
/// (a burst of ranks) or going away: three in a row, at a growing back-off,
/// is a collector built before protocol 4.
constexpr int kVerdictlessClosesBeforeThree = 3;

/// How long a stream's first connection waits for the Verdict before it
/// writes its records anyway (as protocol 3 does): a collector whose node is
/// starved answers Hellos late, and the rank's buffer would fill meanwhile.
/// A live collector refuses within milliseconds, so a refused rank is still
/// told why.
constexpr milliseconds kWriteBeforeVerdictAfter{2000};

/// How long after saying ProfileReady the sender wakes every flush_interval,
/// so that a request the collector sends at once is read within one.
constexpr milliseconds kProfileReadyWatch{2000};

std::uint64_t new_stream() {
  std::random_device rd;
  std::uint64_t s = 0;
  while (s == 0)
    s = std::uint64_t(rd()) << 32 | std::uint64_t(rd());
  return s;
}

}  // namespace

void wake_sender() noexcept {
  WakeSignal& w = wake_signal();
  w.requested.store(true, std::memory_order_relaxed);
  w.cv.notify_one();  // no lock: a lost wake-up costs one interval, never the training thread
}

Sender::Sender(SenderSettings settings, RecorderRegistry& recorders, SampleQueue& samples,
               const timing::WallMapping& wall, StatsSource stats)
    : settings_(std::move(settings)),
      recorders_(recorders),
      samples_(samples),
      stats_(std::move(stats)),
      emit_step_(
          [this](const model::StepRecord& r, const std::optional<model::StepMemoryRecord>& m) {
            add_record(r);
            if (m) add_record(*m);
          }),
      pipeline_(settings_.identity.global_rank, wall, settings_.gpu_clock, settings_.activity),
      stream_(new_stream()),
      backoff_(settings_.backoff_min),
      protocol_(settings_.protocol_version),
      profiles_(settings_.profiles) {
  // The profiler's own traces stay beside the rank, where a profile it
  // cannot send would go (the run's directory on node 0).
  if (profiles_ != nullptr) profiles_->keep_native_traces_in(settings_.profile_keep_dir);
  if (model::BlackBoxRegion* box = settings_.black_box) {
    box->header.stream.store(stream_, std::memory_order_relaxed);
    box->header.wall_offset_s.store(wall.to_unix(0), std::memory_order_relaxed);
    box->header.pid.store(std::int64_t(::getpid()), std::memory_order_relaxed);
    ticks_.update();
    mirror_to_black_box();
    box->header.attached.store(1, std::memory_order_release);
  }
}

void Sender::mirror_to_black_box() {
  model::BlackBoxHeader& h = settings_.black_box->header;
  const std::uint32_t seq = h.clock_sequence.load(std::memory_order_relaxed);
  h.clock_sequence.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  h.tsc.store(ticks_.tsc() ? 1 : 0, std::memory_order_relaxed);
  h.anchor_ticks.store(ticks_.anchor_ticks(), std::memory_order_relaxed);
  h.anchor_ns.store(ticks_.anchor_ns(), std::memory_order_relaxed);
  h.ns_per_tick.store(ticks_.ns_per_tick(), std::memory_order_relaxed);
  h.clock_sequence.store(seq + 2, std::memory_order_release);
  if (settings_.position) {
    const model::RankPosition p = settings_.position();
    h.steps_done.store(p.steps_done, std::memory_order_relaxed);
    h.position_ts.store(p.ts, std::memory_order_relaxed);
  }
}

Sender::~Sender() {
  stop(Clock::now());
}

void Sender::start() {
  thread_ = std::thread([this] {
    block_sigpipe_in_this_thread();
    pthread_setname_np(pthread_self(), "traceml-send");  // as top -H and perf show it
    loop();
  });
}

void Sender::drain(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(wake_signal().mu);
  if (stopping_ || !thread_.joinable()) return;
  stopping_ = true;
  lingering_ = true;
  deadline_ = deadline;
  wake_signal().cv.notify_all();
  drained_cv_.wait(lock, [this] { return drained_; });
}

void Sender::stop(Clock::time_point deadline, std::optional<int> exit_status) {
  {
    std::lock_guard<std::mutex> lock(wake_signal().mu);
    if (final_) return;
    final_ = true;
    // After drain() the thread lingers: it takes the new deadline for the goodbye.
    stopping_ = true;
    deadline_ = deadline;
    exit_status_ = exit_status;
  }
  wake_signal().cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sender::add_frame(transport::FrameType type, const std::vector<std::uint8_t>& payload) {
  // Records go through add_record; what comes here (the rank's own state,
  // Bye) is never dropped and not counted as a record.
  const auto frame = transport::encode_frame(type, payload);
  if (!frame) return;  // cannot happen: each is far below the frame limit
  pending_.insert(pending_.end(), frame->begin(), frame->end());
}

template <typename R>
void Sender::add_record(const R& r) {
  if (refused_) return;  // nothing more goes anywhere: not kept, not counted
  const std::size_t before = pending_.size();
  if (transport::append_record_frame(pending_, r) == 0) return;
  if (pending_.size() > settings_.max_pending_bytes) {
    pending_.resize(before);
    dropped_.fetch_add(1);
    if (!drop_warned_ && settings_.on_first_drop) {
      drop_warned_ = true;
      settings_.on_first_drop("the collector at " + settings_.host + ":" +
                              std::to_string(settings_.port) + " is taking telemetry slower than " +
                              "this rank makes it, and the sender's buffer is full");
    }
    return;
  }
  ++pending_records_;
}

std::size_t Sender::collect() {
  steps_.clear();
  gpu_.clear();
  // The training threads time in ticks: here, off their path, the ticks
  // become now_ns() nanoseconds, at a rate refined at every flush.
  ticks_.update();
  if (settings_.black_box != nullptr) mirror_to_black_box();
  recorders_.drain([&](const RawStep& raw) {
    ++steps_drained_;
    scopes_drained_ += raw.scopes;
    RawStep& s = steps_.emplace_back(raw);
    s.end_ns = ticks_.to_ns(raw.end_ns);
    for (auto& d : s.ns)
      d = ticks_.duration_ns(d);
    for (auto& b : s.begin_ns)
      b = ticks_.offset_ns(b);
  });
  // After the CPU rings: a step's GPU record is queued before its CPU record,
  // so every step drained above finds its GPU record here.
  if (settings_.gpu_clock != nullptr) settings_.gpu_clock->drain(gpu_);
  pipeline_.add(steps_, gpu_, Clock::now(), emit_step_);
  for (auto& s : samples_.take())
    std::visit([this](const auto& x) { add_record(x); }, s);
  return steps_.size();
}

bool Sender::add_profile_chunks(std::size_t budget) {
  ProfileCapture* profiles = profiles_;
  if (profiles == nullptr || refused_ || collector_protocol_ == 0) return false;
  // The captures begun, before any chunk of theirs: a collector of 8 or
  // later keeps their steps as profiled now, and knows a profile that never
  // comes is lost; an older one hears of them with their profile.
  model::ProfiledSteps began;
  while (profiles->next_began(began))
    if (collector_protocol_ >= transport::kProfileBeganProtocolVersion) add_record(began);
  if (!profiles->waiting()) return false;
  if (collector_protocol_ < transport::kProfileProtocolVersion) {
    // An older collector would close the connection at a frame it does not
    // know: the profile cannot go; it is kept beside the rank instead.
    keep_profiles("the collector at " + settings_.host + ":" + std::to_string(settings_.port) +
                  " speaks protocol " + std::to_string(collector_protocol_) +
                  " and takes no profiles (a traceml older than this rank's)");
    return false;
  }
  model::ProfileChunk chunk;
  while (pending_.size() < budget && profiles->next_chunk(chunk))
    add_record(chunk);
  return profiles->waiting();
}

void Sender::send_last_profiles() {
  ProfileCapture* profiles = profiles_;
  if (profiles == nullptr) return;
  if (!profiles->waiting()) {
    add_profile_chunks(0);  // a capture that began and is still on: said
    return;
  }
  // A short run ends before its collector has answered: what it speaks
  // decides whether a profile may go, so hear it first.
  // Within what the rank's last word leaves (deliver_last_word).
  const auto until = last_word_starts();
  if (collector_protocol_ == 0) deliver(until);
  while (add_profile_chunks(settings_.max_pending_bytes / 2) && Clock::now() < until)
    if (!deliver(until)) break;
  if (!profiles->waiting()) return;
  keep_profiles(refused_ ? "the collector refused this rank"
                : collector_protocol_ == 0
                    ? "no collector answer said whether it takes profiles (it was unreachable or "
                      "starved until the end)"
                    : "the end of the run came first");
}

void Sender::keep_profiles(const std::string& why) {
  ProfileCapture* profiles = profiles_;
  if (profiles == nullptr) return;
  if (settings_.profile_keep_dir.empty()) {
    profiles->discard();
    if (!profile_warned_) profiles->say("a profile was not sent (" + why + "): it is not kept");
    profile_warned_ = true;
    return;
  }
  for (const std::string& line : profiles->keep(settings_.profile_keep_dir))
    profiles->say(line + " (not sent: " + why + "); training continues");
}

milliseconds Sender::next_interval(std::size_t steps, Clock::duration span) const {
  const bool gpu = settings_.gpu_clock != nullptr || settings_.activity != nullptr;
  const milliseconds longest =
      gpu ? settings_.max_gpu_flush_interval : settings_.max_flush_interval;
  const milliseconds shortest = std::min(settings_.flush_interval, longest);
  if (pending_.size() > settings_.max_pending_bytes / 4) return shortest;  // the collector lags
  if (steps == 0) return longest;
  // As if every step came from one thread's ring (the most a ring can have filled).
  const double per_ms =
      double(steps) / std::max(1.0, std::chrono::duration<double, std::milli>(span).count());
  const double quarter_ring_ms = double(kStepRingCapacity) / 4.0 / per_ms;
  return std::clamp(milliseconds(std::int64_t(quarter_ring_ms)), shortest, longest);
}

model::TracerStats Sender::full_stats() const {
  model::TracerStats s = stats_ ? stats_() : model::TracerStats{};
  s.global_rank = settings_.identity.global_rank;
  s.steps_recorded = steps_drained_;
  if (settings_.ns_per_scope && steps_drained_ > 0) {
    s.overhead_ns_per_step =
        *settings_.ns_per_scope * double(scopes_drained_) / double(steps_drained_);
  }
  if (const GpuClock* gpu = settings_.gpu_clock; gpu != nullptr && gpu->device()) {
    const GpuClockCounters c = gpu->counters();
    model::TracerStats::Gpu g;
    g.device = *gpu->device();
    g.steps_resolved = c.steps_resolved;
    g.steps_unresolved = c.steps_expired + c.steps_failed + c.steps_rejected + c.steps_abandoned;
    g.scopes_skipped = c.scopes_skipped;
    s.gpu = g;
  }
  if (settings_.activity != nullptr)
    s.activity_lost = settings_.activity->records_lost() + pipeline_.activity_timeouts();
  s.records_sent = sent_.load() + pending_records_;
  s.records_dropped = records_dropped_total();
  return s;
}

std::int64_t Sender::records_dropped_total() const {
  return dropped_.load() + recorders_.dropped() + samples_.dropped();
}

bool Sender::ensure_connected(Clock::time_point now, bool final_attempt) {
  if (refused_) return false;
  if (client_.connected()) return true;
  if (!final_attempt && now < next_attempt_) return false;
  const milliseconds timeout = final_attempt
                                   ? std::min(settings_.connect_timeout, remaining(deadline_))
                                   : settings_.connect_timeout;
  bool ok = timeout.count() > 0 && client_.connect(settings_.host, settings_.port, timeout);
  if (ok) {
    transport::Hello hello;
    hello.protocol_version = protocol_;
    hello.token = settings_.token;
    hello.stream = stream_;
    hello.identity = settings_.identity;
    std::vector<std::uint8_t> head;
    if (const auto f =
            transport::encode_frame(transport::FrameType::Hello, transport::encode_hello(hello)))
      head = *f;
    // Protocol 4 sends nothing more until the Verdict (the stats follow it):
    // a refusal's close then finds nothing unread, so it is no reset that
    // could throw the Verdict away before it is read.
    if (protocol_ < transport::kVerdictProtocolVersion)
      transport::append_record_frame(head, full_stats());
    ok = client_.send_all(head.data(), head.size(), settings_.send_timeout);
  }
  if (ok) {
    connected_at_ = Clock::now();
    last_progress_ = connected_at_;
    written_ = 0;
    awaiting_verdict_ = protocol_ >= transport::kVerdictProtocolVersion;
    writing_before_verdict_ = false;
    inbound_ = transport::FrameDecoder(4096);
    return true;
  }
  warn_once("cannot reach");
  next_attempt_ = Clock::now() + backoff_;
  backoff_ = std::min(backoff_ * 2, settings_.backoff_max);
  return false;
}

void Sender::retry_later() {
  const auto now = Clock::now();
  if (now - connected_at_ >= settings_.backoff_max) backoff_ = settings_.backoff_min;
  next_attempt_ = now + backoff_;
  backoff_ = std::min(backoff_ * 2, settings_.backoff_max);
}

void Sender::warn_once(const std::string& what) {
  if (warned_ || !settings_.on_first_failure) return;
  warned_ = true;
  settings_.on_first_failure(what + " the collector at " + settings_.host + ":" +
                             std::to_string(settings_.port) + " (" + client_.error() + ")");
}

void Sender::connection_lost(const std::string& what) {
  client_.close();
  written_ = 0;  // a frame cut on this connection goes out whole on the next
  warn_once(what);
  retry_later();
}

bool Sender::read_collector(milliseconds wait) {
  std::uint8_t buf[512];
  while (client_.connected()) {
    const auto k = client_.receive_some(buf, sizeof buf, wait);
    if (!k) {
      if (!awaiting_verdict_) {
        connection_lost("lost the connection to");
        return false;
      }
      // Closed before it answered: a collector of protocol 3 or older (it
      // refuses a Hello of 4 that way), or one that went away or was full.
      // Three times and it never answered any: speak 3 to it, at once and
      // without a warning.
      written_ = 0;
      if (!verdict_seen_ && ++verdictless_closes_ >= kVerdictlessClosesBeforeThree &&
          protocol_ >= transport::kVerdictProtocolVersion) {
        protocol_ = transport::kVerdictProtocolVersion - 1;
        next_attempt_ = Clock::now();
        retained_.clear();  // a collector of 3 cannot say where to resume
        retained_.shrink_to_fit();
        drop_goodbyes();  // protocol 4's: a collector of 3 would refuse them
      } else {
        retry_later();
      }
      return false;
    }
    if (*k == 0) return true;
    wait = milliseconds(0);
    for (std::size_t at = 0; at < *k;) {
      at += inbound_.feed(buf + at, *k - at);
      while (const auto frame = inbound_.next()) {
        if (frame->type == transport::frame_type_of<model::ProfileRequest>() &&
            !awaiting_verdict_) {
          on_profile_request(*frame);
          continue;
        }
        // A later protocol's frames, and a second Verdict (one a connection).
        if (frame->type != transport::FrameType::Verdict || !awaiting_verdict_) continue;
        const auto v = transport::decode_verdict(frame->payload);
        if (!v) {
          connection_lost("a malformed answer from");
          return false;
        }
        on_verdict(*v);
        if (!client_.connected()) return false;
      }
      if (inbound_.failed()) {
        connection_lost("a malformed answer (" + inbound_.error() + ") from");
        return false;
      }
    }
  }
  return false;
}

void Sender::on_verdict(const transport::Verdict& v) {
  verdict_seen_ = true;
  collector_protocol_ = v.protocol_version;
  if (v.accepted) {
    awaiting_verdict_ = false;
    // Writing already (a stream's first connection, the Verdict late): the
    // collector counts from this connection's first record, as the rank does.
    if (!writing_before_verdict_) resume(v.resume_from);
    // What protocol 3 sends with its Hello; before the goodbye and Bye when
    // they wait already (a connection made at the end).
    std::vector<std::uint8_t> stats;
    transport::append_record_frame(stats, full_stats());
    // Protocol 7: this rank takes profile requests on this connection.
    if (settings_.profile_requests &&
        v.protocol_version >= transport::kProfileRequestProtocolVersion) {
      transport::append_record_frame(stats, model::ProfileReady{settings_.identity.global_rank});
      profile_ready_at_ = Clock::now();
    }
    pending_.insert(pending_.begin() + std::ptrdiff_t(before_last_word()), stats.begin(),
                    stats.end());
    return;
  }
  client_.close();
  written_ = 0;
  // A collector of a protocol between 4 and ours says which it speaks.
  if (v.protocol_version >= transport::kVerdictProtocolVersion && v.protocol_version < protocol_) {
    protocol_ = v.protocol_version;
    next_attempt_ = Clock::now();
    return;
  }
  refused_ = true;
  if (settings_.on_refused)
    settings_.on_refused("the collector at " + settings_.host + ":" +
                         std::to_string(settings_.port) + " refused this rank: " + v.reason);
}

void Sender::on_profile_request(const transport::Frame& frame) {
  // What the rank never said it takes, or a request that is not its own or
  // cannot be true, is left: the collector is trusted no further than that.
  if (!settings_.profile_requests) return;
  const auto r = transport::decode<model::ProfileRequest>(frame.payload);
  if (!r || r->global_rank != settings_.identity.global_rank || model::check(*r)) return;
  if (profiles_ == nullptr) {
    profiles_ = settings_.profile_requests();
    if (profiles_ != nullptr) profiles_->keep_native_traces_in(settings_.profile_keep_dir);
  }
  if (profiles_ != nullptr) profiles_->request(r->first_step, r->steps);
}

void Sender::retain(std::size_t bytes) {
  if (protocol_ < transport::kVerdictProtocolVersion) return;  // it cannot say where to resume
  for (std::size_t at = 0; at < bytes;) {
    const std::uint8_t* h = pending_.data() + at;
    const std::size_t length = frame_bytes_at(h);
    if (holds_record(h)) {
      retained_.insert(retained_.end(), h, h + length);
      ++written_records_;
    }
    at += length;
  }
  if (retained_.size() <= settings_.max_retained_bytes) return;
  // Forget the oldest, down to three quarters, in one move.
  std::size_t drop = 0;
  while (retained_.size() - drop > settings_.max_retained_bytes * 3 / 4) {
    drop += frame_bytes_at(retained_.data() + drop);
    ++retained_first_;
  }
  retained_.erase(retained_.begin(), retained_.begin() + std::ptrdiff_t(drop));
}

void Sender::resume(std::uint64_t have) {
  // A collector that claims more than was written (another stream's count)
  // has all of it.
  have = std::min(have, written_records_);
  if (have < retained_first_) {
    // Written, lost in flight, and no longer kept: dropped after all.
    const auto lost = std::int64_t(retained_first_ - have);
    dropped_.fetch_add(lost);
    sent_.fetch_sub(lost);
  }
  // Skip what the collector has; the rest goes out again, before anything
  // not yet written.
  std::size_t from = 0;
  for (std::uint64_t n = retained_first_; n < have; ++n)
    from += frame_bytes_at(retained_.data() + from);
  auto again = std::int64_t(written_records_ - std::max(have, retained_first_));
  // The same point three times running: the frame there may be one the
  // collector closes the connection on before counting it (a kind it does
  // not know); resent for ever, it would hold back all the rest. It is
  // dropped, counted.
  same_resume_ = have == last_resume_ ? same_resume_ + 1 : 0;
  last_resume_ = have;
  if (same_resume_ >= 2 && again > 0) {
    from += frame_bytes_at(retained_.data() + from);
    --again;
    dropped_.fetch_add(1);
    sent_.fetch_sub(1);
    same_resume_ = 0;
  }
  pending_.insert(pending_.begin(), retained_.begin() + std::ptrdiff_t(from), retained_.end());
  pending_records_ += again;
  sent_.fetch_sub(again);
  // Numbered from the collector's count on: its next record is number `have`.
  retained_.clear();
  retained_first_ = have;
  written_records_ = have;
}

void Sender::write_before_verdict() {
  // Only where nothing was written before: a reconnecting rank needs the
  // Verdict's resume point before it may write.
  if (writing_before_verdict_ || written_records_ > 0 || !retained_.empty()) return;
  writing_before_verdict_ = true;
  std::vector<std::uint8_t> stats;
  transport::append_record_frame(stats, full_stats());
  pending_.insert(pending_.begin() + std::ptrdiff_t(before_last_word()), stats.begin(),
                  stats.end());
}

std::size_t Sender::before_last_word() const {
  // Before the frames that must stay last, but never inside or before a
  // frame partly written (which may be one of them): its rest goes first.
  const std::size_t last = pending_.size() - std::min(last_bytes_, pending_.size());
  const std::size_t partial = written_ > 0 ? frame_bytes_at(pending_.data()) : 0;
  return std::min(std::max(last, partial), pending_.size());
}

bool Sender::flush(milliseconds budget) {
  if (pending_.empty()) {
    last_progress_ = Clock::now();  // nothing waits: the connection is not stalled
    return true;
  }
  const auto written =
      client_.send_some(pending_.data() + written_, pending_.size() - written_, budget);
  if (!written) {
    connection_lost("lost the connection to");
    return false;
  }
  const auto now = Clock::now();
  if (*written > 0) last_progress_ = now;
  written_ += *written;
  // Whole frames written leave the buffer; the collector has them or, if
  // this connection breaks before it read them, tells the next one how many
  // it has (protocol 4: they are kept for that, up to max_retained_bytes).
  std::size_t whole = 0;
  std::int64_t records = 0;
  while (written_ - whole >= transport::kHeaderBytes) {
    const std::uint8_t* h = pending_.data() + whole;
    const std::size_t length = frame_bytes_at(h);
    if (written_ - whole < length) break;
    if (holds_record(h)) ++records;
    whole += length;
  }
  if (whole > 0) {
    retain(whole);
    pending_.erase(pending_.begin(), pending_.begin() + std::ptrdiff_t(whole));
    last_bytes_ = std::min(last_bytes_, pending_.size());
    written_ -= whole;
    pending_records_ -= records;
    sent_.fetch_add(records);
  }
  if (pending_.empty()) {
    last_progress_ = now;
    return true;
  }
  if (now - last_progress_ >= settings_.stall_timeout) {
    connection_lost("lost the connection (no byte taken for " +
                    std::to_string(settings_.stall_timeout.count() / 1000) + " s) to");
  }
  return false;
}

void Sender::loop() {
  milliseconds interval = std::min(settings_.flush_interval, settings_.max_flush_interval);
  auto last = Clock::now();
  auto last_heartbeat = Clock::time_point{};
  for (;;) {
    {
      WakeSignal& w = wake_signal();
      std::unique_lock<std::mutex> lock(w.mu);
      // Woken early when a training thread finds its ring half full.
      w.cv.wait_for(lock, interval, [&] {
        return stopping_ || w.requested.exchange(false, std::memory_order_relaxed);
      });
      if (stopping_) break;
    }
    if (settings_.on_tick) settings_.on_tick();
    const std::size_t steps = collect();
    const auto now = Clock::now();
    // A new connection's Verdict comes within a round trip: worth a short wait.
    if (ensure_connected(now, false) &&
        read_collector(awaiting_verdict_ ? milliseconds(20) : milliseconds(0)) &&
        awaiting_verdict_) {
      if (now - connected_at_ >= kWriteBeforeVerdictAfter) write_before_verdict();
      if (!writing_before_verdict_ && now - connected_at_ >= settings_.verdict_timeout)
        connection_lost("no answer to the hello (" +
                        std::to_string(settings_.verdict_timeout.count() / 1000) + " s) from");
    }
    if (client_.connected() && may_write()) {
      // Only while connected: heartbeats are not kept for a collector that
      // is away (they would say where the rank was, not where it is).
      if (settings_.position && now - last_heartbeat >= settings_.heartbeat_interval) {
        add_control(settings_.position());
        add_control(full_stats());
        last_heartbeat = now;
      }
      // Profiles in what room a quarter of the buffer leaves: steps first.
      if (add_profile_chunks(settings_.max_pending_bytes / 4)) wake_sender();
      // A short budget: the rings are drained again at the next wake-up
      // while a slow collector takes the rest.
      flush(interval);
    }
    interval = next_interval(steps, now - last);
    // Just after the rank said ProfileReady the collector may ask at once
    // (serve's --profile-steps): its request is read within a short interval.
    if (now - profile_ready_at_ < kProfileReadyWatch)
      interval = std::min(interval, settings_.flush_interval);
    last = now;
  }
  finish_stream();
}

}  // namespace traceml::runtime
