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
    const bool delivered = deliver();
    if (delivered && !refused_ && client_.connected() &&
        protocol_ >= transport::kVerdictProtocolVersion) {
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
  if (!deliver()) give_up();
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

bool Sender::deliver() {
  bool delivered = pending_.empty() && client_.connected() && may_write();
  while (!delivered && remaining(deadline_).count() > 0) {
    if (!ensure_connected(Clock::now(), true)) break;
    // Records go once the collector accepted this connection, or (the end
    // is near) a stream's first connection did not hear in time.
    if (!read_collector(awaiting_verdict_ ? std::min(milliseconds(100), remaining(deadline_))
                                          : milliseconds(0)))
      continue;
    if (awaiting_verdict_) write_before_verdict();
    if (!may_write()) continue;
    delivered = flush(std::min(settings_.send_timeout, remaining(deadline_)));
  }
  return delivered;
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
    if (settings_.position) add_control(settings_.position());
    flush(std::min(settings_.send_timeout, settings_.heartbeat_interval));
  }
}

}  // namespace traceml::runtime
