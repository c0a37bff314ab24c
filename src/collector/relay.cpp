#include "collector/relay.hpp"

#include <algorithm>
#include <thread>
#include <utility>

#include "model/record_checks.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"
#include "transport/record_codec.hpp"
#include "transport/tcp_client.hpp"

namespace traceml::collector {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::chrono::milliseconds left_until(Clock::time_point end) {
  return std::max(0ms, std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()));
}

/// The frames a relay sends after its Hello: each rank's end first, then what
/// its box held, then Bye.
std::vector<std::uint8_t> relay_frames(const std::vector<RelayedRank>& ranks) {
  std::vector<std::uint8_t> out;
  for (const RelayedRank& r : ranks)
    transport::append_record_frame(out, r.end);
  for (const RelayedRank& r : ranks) {
    for (const model::StepRecord& s : r.box.steps)
      transport::append_record_frame(out, s);
    for (const model::StepMemoryRecord& m : r.box.memory)
      transport::append_record_frame(out, m);
  }
  transport::append_frame(out, transport::FrameType::Bye, [](auto&) {});
  return out;
}

/// Reads the collector's Verdict on the Hello. std::nullopt: accepted.
std::optional<std::string> await_verdict(transport::TcpClient& client, Clock::time_point end) {
  transport::FrameDecoder decoder(transport::kMaxPreHelloFrameBytes);
  std::uint8_t buf[4096];
  while (Clock::now() < end) {
    const auto n = client.receive_some(buf, sizeof buf, std::min(left_until(end), 200ms));
    if (!n) return "the collector closed the connection before answering: " + client.error();
    if (*n > 0 && decoder.feed(buf, *n) != *n)
      return std::string("the collector's answer is too long");
    if (auto frame = decoder.next()) {
      if (frame->type != transport::FrameType::Verdict)
        return std::string("the collector answered with a ") +
               transport::frame_type_name(frame->type) + " frame";
      const auto verdict = transport::decode_verdict(frame->payload);
      if (!verdict) return std::string("the collector's answer is malformed");
      if (!verdict->accepted) return "the collector refused it: " + verdict->reason;
      return std::nullopt;
    }
    if (decoder.failed()) return "the collector's answer is malformed: " + decoder.error();
  }
  return std::string("the collector did not answer in time");
}

/// Waits for the collector to close the connection: it does once it has
/// read the Bye, so every frame before it was taken.
std::optional<std::string> await_close(transport::TcpClient& client, Clock::time_point end) {
  std::uint8_t buf[512];
  while (Clock::now() < end) {
    if (!client.receive_some(buf, sizeof buf, std::min(left_until(end), 200ms)))
      return std::nullopt;
  }
  return std::string("the collector did not confirm in time");
}

}  // namespace

model::RankEnd rank_end_of(const store::BlackBoxReading& box, int global_rank, int exit_code,
                           std::optional<int> signal, bool stopped_by_launcher) {
  model::RankEnd e;
  e.global_rank = global_rank;
  e.exit_code = std::clamp(exit_code, 0, 255);
  if (signal && *signal >= 1 && *signal <= 64) e.signal = signal;
  e.stopped_by_launcher = stopped_by_launcher ? 1 : 0;
  if (box.attached) {
    e.steps_completed = box.steps_completed();
    e.phase = static_cast<int>(box.phase);
    if (box.stream != 0) e.stream = model::stream_hex(box.stream);
  }
  return e;
}

std::optional<std::string> relay_to_collector(const RelayTarget& target,
                                              const std::vector<RelayedRank>& ranks,
                                              std::chrono::milliseconds budget) {
  const auto end = Clock::now() + budget;
  transport::Hello hello;
  hello.protocol_version = transport::kRoleProtocolVersion;  // nothing of 6 concerns a relay
  hello.token = target.token;
  hello.role = transport::PeerRole::Relay;
  hello.identity = target.node;
  const auto hello_frame =
      transport::encode_frame(transport::FrameType::Hello, transport::encode_hello(hello));
  if (!hello_frame) return std::string("the relay's Hello does not fit a frame");
  const std::vector<std::uint8_t> frames = relay_frames(ranks);
  std::string why = "no time was left to reach the collector";
  while (Clock::now() < end) {
    transport::TcpClient client;
    if (!client.connect(target.host, target.port, std::min(left_until(end), 2000ms))) {
      // Not listening yet, or busy: try again while the budget lasts.
      why = client.error();
      std::this_thread::sleep_for(std::min(left_until(end), 200ms));
      continue;
    }
    if (!client.send_all(hello_frame->data(), hello_frame->size(), left_until(end)))
      return "cannot send to the collector: " + client.error();
    if (auto refused = await_verdict(client, end)) return refused;
    if (!client.send_all(frames.data(), frames.size(), left_until(end)))
      return "cannot send to the collector: " + client.error();
    return await_close(client, end);
  }
  return "cannot reach the collector at " + target.host + ":" + std::to_string(target.port) + ": " +
         why;
}

}  // namespace traceml::collector
