// The end of a sender's stream: what was recorded goes, then the rank's
// own counters, the goodbye (how the program ended, when known) and Bye,
// each within the deadline drain() or stop() gives; after an explicit
// shutdown the connection lingers with heartbeats until the exit.
#include <thread>

#include "runtime/sender.hpp"
#include "runtime/sender_internal.hpp"
#include "transport/hello.hpp"
#include "transport/record_codec.hpp"

namespace traceml::runtime {

namespace {

using namespace sender_detail;

/// How long the final flush waits for the GPU to pass the last steps' events.
constexpr std::chrono::seconds kGpuGrace{2};

/// Of an end's budget (drain()'s or stop()'s deadline), the part kept for
/// the rank's last word: its counters, goodbye and Bye, which a starved
/// collector would otherwise never get behind megabytes of records
/// (issue 47). At least kLastWordMin: a collector that reads this
/// connection at all within it makes room for the few bytes they take.
constexpr double kLastWordShare = 0.3;
/// While a last word waits for a starved collector, how long each of
/// linger()'s writes may wait: stop() waits for the one in progress.
constexpr milliseconds kLingerFlush{100};
constexpr milliseconds kLastWordMin{1000};

}  // namespace

void Sender::finish_stream() {
  // Final: everything recorded, the rank's own counters, how the program
  // ended (when the runtime knows it), then Bye. Steps still waiting for the
  // GPU get a short grace (a wedged GPU must not hold up the exit), then go
  // out with CPU times only.
  collect();
  const auto gpu_grace = std::min(deadline_, Clock::now() + kGpuGrace);
  while (pipeline_.waiting_for_gpu() > 0 && Clock::now() < gpu_grace) {
    std::this_thread::sleep_for(milliseconds(5));
    pipeline_.poll(Clock::now(), emit_step_);
  }
  pipeline_.abandon(emit_step_);
  send_last_profiles();
  add_control(full_stats());
  bool lingering = false;
  {
    std::lock_guard<std::mutex> lock(wake_signal().mu);
    lingering = lingering_ && !final_;
  }
  if (lingering) {
    // An explicit shutdown: what was recorded goes now, and a goodbye
    // without a status says it all went (protocol 4: a close without Bye
    // after it lost nothing). How the program ends is said at its exit, on
    // this connection; a collector that does not speak 4 gets its Bye now.
    if (protocol_ >= transport::kVerdictProtocolVersion)
      add_last(transport::frame_type_of<model::RankGoodbye>(),
               transport::encode(model::RankGoodbye{settings_.identity.global_rank, std::nullopt}));
    const bool delivered = deliver_last_word();
    if (!refused_ && client_.connected() && protocol_ >= transport::kVerdictProtocolVersion) {
      // What did not go yet (the last word, behind a starved collector's
      // backlog) keeps going while the program runs on.
      signal_drained();
      linger();  // until stop(), whose deadline and status it then reads
    } else if (!delivered) {
      give_up();
    }
  }
  std::optional<int> status;
  {
    std::lock_guard<std::mutex> lock(wake_signal().mu);
    status = exit_status_;
  }
  // A collector that speaks protocol 3 or older would refuse the goodbye.
  if (status && protocol_ >= transport::kVerdictProtocolVersion)
    add_last(transport::frame_type_of<model::RankGoodbye>(),
             transport::encode(model::RankGoodbye{settings_.identity.global_rank, status}));
  add_last(transport::FrameType::Bye, {});
  if (!deliver_last_word()) give_up();
  await_close();
  pending_.clear();
  pending_records_ = 0;
  last_bytes_ = 0;
  client_.close();
  // Last: drain() returns only once the thread touches nothing stop() sets.
  signal_drained();
}

void Sender::await_close() {
  if (!client_.connected() || protocol_ < transport::kVerdictProtocolVersion) return;
  std::uint8_t buf[512];
  while (remaining(deadline_).count() > 0) {
    const auto k =
        client_.receive_some(buf, sizeof buf, std::min(milliseconds(100), remaining(deadline_)));
    if (!k) return;  // it read the Bye and ended the connection
  }
}

void Sender::signal_drained() {
  {
    std::lock_guard<std::mutex> lock(wake_signal().mu);
    drained_ = true;
  }
  drained_cv_.notify_all();
}

void Sender::give_up() {
  client_.close();
  written_ = 0;
  dropped_.fetch_add(pending_records_);
  pending_.clear();
  pending_records_ = 0;
  last_bytes_ = 0;
}

void Sender::add_last(transport::FrameType type, const std::vector<std::uint8_t>& payload) {
  const std::size_t before = pending_.size();
  add_frame(type, payload);
  last_bytes_ += pending_.size() - before;
}

void Sender::drop_goodbyes() {
  const auto goodbye = static_cast<std::uint8_t>(transport::frame_type_of<model::RankGoodbye>());
  for (std::size_t at = written_; at + transport::kHeaderBytes <= pending_.size();) {
    const std::size_t length = frame_bytes_at(pending_.data() + at);
    if (pending_[at + 4] != goodbye) {
      at += length;
      continue;
    }
    pending_.erase(pending_.begin() + std::ptrdiff_t(at),
                   pending_.begin() + std::ptrdiff_t(at + length));
    last_bytes_ -= std::min(last_bytes_, length);
  }
}

bool Sender::deliver(Clock::time_point until) {
  bool delivered = pending_.empty() && client_.connected() && may_write();
  while (!delivered && remaining(until).count() > 0) {
    if (!ensure_connected(Clock::now(), true)) break;
    // Records go once the collector accepted this connection, or (the end
    // is near) a stream's first connection did not hear in time.
    if (!read_collector(awaiting_verdict_ ? std::min(milliseconds(100), remaining(until))
                                          : milliseconds(0)))
      continue;
    if (awaiting_verdict_) write_before_verdict();
    if (!may_write()) continue;
    delivered = flush(std::min(settings_.send_timeout, remaining(until)));
  }
  return delivered;
}

Clock::time_point Sender::last_word_starts() const {
  const auto budget = remaining(deadline_);
  const auto reserve = std::min(
      budget,
      std::max(kLastWordMin, std::chrono::duration_cast<milliseconds>(budget * kLastWordShare)));
  return deadline_ - reserve;
}

bool Sender::deliver_last_word() {
  if (deliver(last_word_starts())) return true;
  cut_to_last_word();
  return deliver(deadline_);
}

void Sender::cut_to_last_word() {
  // pending_: [a frame partly written][the rest][the last word: last_bytes_].
  const std::size_t last_from = pending_.size() - std::min(last_bytes_, pending_.size());
  // A frame partly written goes whole: the stream must stay whole frames.
  const std::size_t from = written_ > 0 ? frame_bytes_at(pending_.data()) : std::size_t{0};
  // Nothing but the last word (or the frame partly written inside it) is
  // left: nothing to cut, and the counters said before went out already.
  if (from >= last_from) return;
  std::int64_t records = 0;
  for (std::size_t at = from; at < last_from; at += frame_bytes_at(pending_.data() + at))
    if (holds_record(pending_.data() + at)) ++records;
  // Records are dropped and counted; the rank's own state (heartbeats, the
  // counters said before) is said again below, as it now stands.
  pending_.erase(pending_.begin() + std::ptrdiff_t(from),
                 pending_.begin() + std::ptrdiff_t(last_from));
  pending_records_ -= records;
  dropped_.fetch_add(records);
  const auto stats = transport::encode_frame(transport::frame_type_of<model::TracerStats>(),
                                             transport::encode(full_stats()));
  if (stats)
    pending_.insert(pending_.begin() + std::ptrdiff_t(before_last_word()), stats->begin(),
                    stats->end());
}

void Sender::linger() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(wake_signal().mu);
      if (wake_signal().cv.wait_for(lock, settings_.heartbeat_interval, [this] { return final_; }))
        return;
    }
    if (settings_.on_tick) settings_.on_tick();
    // The collector sees the rank alive and no longer recording: neither
    // silent nor stalled while the program does what it does after its
    // shutdown. A connection that ends is made again (nothing is pending but
    // these heartbeats).
    if (!ensure_connected(Clock::now(), false) || !read_collector(milliseconds(0)) ||
        awaiting_verdict_)
      continue;
    // Behind a last word still going out, a heartbeat would come after it;
    // and stop() must not wait long for a flush to a starved collector.
    if (settings_.position && pending_.empty()) add_control(settings_.position());
    flush(pending_.empty() ? std::min(settings_.send_timeout, settings_.heartbeat_interval)
                           : std::min(settings_.send_timeout, kLingerFlush));
  }
}

}  // namespace traceml::runtime
