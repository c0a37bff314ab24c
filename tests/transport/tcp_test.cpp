// TCP layer of the telemetry transport over real loopback sockets (port 0):
// the handshake and its refusals with their exact reasons, frames delivered
// in order and intact, clean and unclean ends, many ranks at once, a client
// that fails within its deadline and survives a vanished peer without
// SIGPIPE, a prompt stop(), and one-line bind errors. Deadlines are generous:
// they only bound how long a failing test takes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "transport/frame.hpp"
#include "transport/hello.hpp"
#include "transport/record_codec.hpp"
#include "transport/tcp_client.hpp"
#include "transport/tcp_server.hpp"

namespace traceml::transport {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "run-token-0123456789abcdef";
constexpr auto kWait = 30s;       // bounds a failing wait only
constexpr auto kIoTimeout = 10s;  // client connect/send deadline in tests that expect success

Bytes frame_bytes(FrameType type, const Bytes& payload) {
  return *encode_frame(type, payload);
}

/// A Hello of protocol 3 unless told: these tests' peers read nothing back,
/// and a peer of protocol 4 that closes with the Verdict unread resets the
/// connection instead of closing it.
Bytes hello_frame(const std::string& token, int rank, std::uint16_t version = 3,
                  std::uint64_t stream = 0) {
  Hello h;
  h.protocol_version = version;
  h.token = token;
  h.stream = stream;
  h.identity.global_rank = rank;
  h.identity.world_size = 64;
  return frame_bytes(FrameType::Hello, encode_hello(h));
}

// A step record like a rank sends: five timed events, CPU clock only, ~70
// bytes on the wire.
Bytes step_payload(int rank, std::int64_t step) {
  model::StepRecord r;
  r.global_rank = rank;
  r.step = step;
  r.ts = 1.7e9 + double(step);
  for (model::Event e : {model::Event::InputWait, model::Event::H2D, model::Event::Forward,
                         model::Event::Backward, model::Event::TracedStepTime}) {
    r.events.set(e, model::Timing{double(step) * 0.5 + double(e), std::nullopt});
  }
  return encode(r);
}

Bytes step_frame(int rank, std::int64_t step) {
  return frame_bytes(FrameType::Step, step_payload(rank, step));
}

Bytes bye_frame() {
  return frame_bytes(FrameType::Bye, {});
}

void append(Bytes& out, const Bytes& more) {
  out.insert(out.end(), more.begin(), more.end());
}

bool send(TcpClient& c, const Bytes& b) {
  return c.send_all(b.data(), b.size(),
                    std::chrono::duration_cast<std::chrono::milliseconds>(kIoTimeout));
}

bool connect(TcpClient& c, std::uint16_t port, const std::string& host = "127.0.0.1") {
  return c.connect(host, port, std::chrono::duration_cast<std::chrono::milliseconds>(kIoTimeout));
}

struct Closed {
  ConnectionId id;
  bool clean;
  std::string reason;
};

struct Rejected {
  std::string peer;
  Rejection kind;
  std::string reason;
};

// Records every handler call; tests wait on it for the events they expect.
class Recorder : public ServerHandler {
 public:
  /// Keeps every frame (small tests), or only checks order and counts (the
  /// throughput test: frames of rank r carry steps 1, 2, 3, ... in order).
  explicit Recorder(bool keep_frames = true) : keep_frames_(keep_frames) {}

  HelloReply on_hello(ConnectionId id, const Hello& hello, const std::string& peer) override {
    const std::lock_guard<std::mutex> lock(mu_);
    hellos_[id] = hello;
    peers_[id] = peer;
    cv_.notify_all();
    return {refuse_identity_, resume_from_};
  }

  std::optional<std::string> on_frame(ConnectionId id, const Frame& frame) override {
    const std::lock_guard<std::mutex> lock(mu_);
    ++frame_count_;
    if (keep_frames_) {
      frames_[id].push_back(frame);
    } else if (frame.type == FrameType::Step) {
      const std::optional<model::StepRecord> r = decode<model::StepRecord>(frame.payload);
      std::int64_t& last = last_step_[id];
      if (!r || r->step != last + 1) ++out_of_order_;
      if (r) last = r->step;
    }
    cv_.notify_all();
    if (refuse_ && frame.type == *refuse_)
      return std::string("test refuses ") + frame_type_name(frame.type);
    return std::nullopt;
  }

  void on_closed(ConnectionId id, bool clean, const std::string& reason) override {
    const std::lock_guard<std::mutex> lock(mu_);
    closed_.push_back({id, clean, reason});
    cv_.notify_all();
  }

  void on_rejected(const std::string& peer, Rejection kind, const std::string& reason) override {
    const std::lock_guard<std::mutex> lock(mu_);
    rejected_.push_back({peer, kind, reason});
    cv_.notify_all();
  }

  /// Waits until `pred` (called under the lock) holds; false after kWait.
  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds limit = kWait) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return pred(*this); });
  }

  void refuse(FrameType t) {
    const std::lock_guard<std::mutex> lock(mu_);
    refuse_ = t;
  }

  /// Every Hello from now on is refused with `reason`, as the collector
  /// refuses an identity it cannot take.
  void refuse_identity(const std::string& reason) {
    const std::lock_guard<std::mutex> lock(mu_);
    refuse_identity_ = reason;
  }

  /// Every accepted Hello from now on is told `n` records already came.
  void resume_from(std::uint64_t n) {
    const std::lock_guard<std::mutex> lock(mu_);
    resume_from_ = n;
  }

  // Read under the lock (inside wait's predicate) or after the server stopped.
  std::map<ConnectionId, Hello> hellos_;
  std::map<ConnectionId, std::string> peers_;
  std::map<ConnectionId, std::vector<Frame>> frames_;
  std::map<ConnectionId, std::int64_t> last_step_;
  std::size_t frame_count_ = 0;
  std::size_t out_of_order_ = 0;
  std::vector<Closed> closed_;
  std::vector<Rejected> rejected_;

  std::mutex mu_;

 private:
  std::condition_variable cv_;
  bool keep_frames_;
  std::optional<FrameType> refuse_;
  std::optional<std::string> refuse_identity_;
  std::uint64_t resume_from_ = 0;
};

ServerOptions options(std::chrono::milliseconds hello_timeout = 10s) {
  ServerOptions o;
  o.token = kToken;
  o.hello_timeout = hello_timeout;
  return o;
}

// The connection id of the only handshaken connection.
ConnectionId only_id(Recorder& r) {
  const std::lock_guard<std::mutex> lock(r.mu_);
  EXPECT_EQ(r.hellos_.size(), 1u);
  return r.hellos_.empty() ? 0 : r.hellos_.begin()->first;
}

TEST(TcpTest, HandshakeThenFramesArriveInOrderWithPayloadsIntact) {
  Recorder rec;
  TcpServer server(options(), rec);
  ASSERT_NE(server.port(), 0);
  server.start();

  TcpClient client;
  ASSERT_TRUE(connect(client, server.port())) << client.error();
  EXPECT_TRUE(client.connected());
  EXPECT_EQ(client.error(), "");

  // The hello one byte per write, so that the server reassembles it from
  // many reads; then 100 steps in three writes that cut frames in the middle.
  const Bytes hello = hello_frame(kToken, 7);
  for (std::uint8_t b : hello)
    ASSERT_TRUE(client.send_all(&b, 1, 10000ms)) << client.error();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.hellos_.size() == 1; }));
  Bytes batch;
  for (int step = 1; step <= 100; ++step)
    append(batch, step_frame(7, step));
  const std::size_t cut1 = batch.size() / 3 + 5, cut2 = 2 * batch.size() / 3 + 11;
  ASSERT_TRUE(client.send_all(batch.data(), cut1, 10000ms));
  ASSERT_TRUE(client.send_all(batch.data() + cut1, cut2 - cut1, 10000ms));
  ASSERT_TRUE(client.send_all(batch.data() + cut2, batch.size() - cut2, 10000ms));
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.frame_count_ == 100; }));
  EXPECT_EQ(server.open_connections(), 1u);

  const ConnectionId id = only_id(rec);
  {
    const std::lock_guard<std::mutex> lock(rec.mu_);
    EXPECT_EQ(rec.hellos_[id].identity.global_rank, 7);
    EXPECT_EQ(rec.hellos_[id].identity.world_size, 64);
    EXPECT_EQ(rec.hellos_[id].token, kToken);
    EXPECT_EQ(rec.peers_[id].rfind("127.0.0.1:", 0), 0u) << rec.peers_[id];
    const std::vector<Frame>& frames = rec.frames_[id];
    ASSERT_EQ(frames.size(), 100u);
    for (int step = 1; step <= 100; ++step) {
      const Frame& f = frames[std::size_t(step - 1)];
      EXPECT_EQ(f.type, FrameType::Step);
      EXPECT_EQ(f.payload, step_payload(7, step)) << "step " << step;
    }
  }

  // Gone without a Bye: closed, not clean.
  client.close();
  EXPECT_FALSE(client.connected());
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.closed_.size() == 1; }));
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_EQ(rec.closed_[0].id, id);
  EXPECT_FALSE(rec.closed_[0].clean);
  EXPECT_EQ(rec.closed_[0].reason, "peer closed");
  EXPECT_EQ(server.open_connections(), 0u);
  EXPECT_TRUE(rec.rejected_.empty());
}

TEST(TcpTest, ByeThenCloseIsClean) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  TcpClient client;
  ASSERT_TRUE(connect(client, server.port())) << client.error();
  Bytes all = hello_frame(kToken, 0);
  append(all, step_frame(0, 1));
  append(all, bye_frame());
  ASSERT_TRUE(send(client, all)) << client.error();
  client.close();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.closed_.size() == 1; }));
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_TRUE(rec.closed_[0].clean);
  EXPECT_EQ(rec.closed_[0].reason, "bye");
  const std::vector<Frame>& frames = rec.frames_[rec.closed_[0].id];
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].type, FrameType::Step);
  EXPECT_EQ(frames[1].type, FrameType::Bye);
  EXPECT_TRUE(frames[1].payload.empty());
}

// Connects a client that completes the handshake, so that a test can check a
// refused neighbour leaves it working.
struct GoodRank {
  TcpClient client;
  ConnectionId id = 0;
};

void start_good_rank(GoodRank& g, TcpServer& server, Recorder& rec) {
  ASSERT_TRUE(connect(g.client, server.port())) << g.client.error();
  ASSERT_TRUE(send(g.client, hello_frame(kToken, 1))) << g.client.error();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.hellos_.size() == 1; }));
  g.id = only_id(rec);
}

// After a neighbour was refused: the good rank's frames still arrive and its
// connection is still open.
void expect_good_rank_unaffected(GoodRank& g, TcpServer& server, Recorder& rec) {
  ASSERT_TRUE(send(g.client, step_frame(1, 1))) << g.client.error();
  ASSERT_TRUE(rec.wait([&](Recorder& r) { return r.frames_[g.id].size() == 1; }));
  EXPECT_EQ(server.open_connections(), 1u);
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_TRUE(rec.closed_.empty());
}

// Sends `bytes` on a fresh connection and returns the one rejection: its kind
// name and reason, "kind: reason".
std::string rejection_of(TcpServer& server, Recorder& rec, const Bytes& bytes) {
  TcpClient bad;
  EXPECT_TRUE(connect(bad, server.port())) << bad.error();
  EXPECT_TRUE(send(bad, bytes)) << bad.error();
  EXPECT_TRUE(rec.wait([](Recorder& r) { return r.rejected_.size() == 1; }));
  const std::lock_guard<std::mutex> lock(rec.mu_);
  if (rec.rejected_.size() != 1) return "<no rejection>";
  EXPECT_EQ(rec.rejected_[0].peer.rfind("127.0.0.1:", 0), 0u) << rec.rejected_[0].peer;
  return std::string(rejection_name(rec.rejected_[0].kind)) + ": " + rec.rejected_[0].reason;
}

TEST(TcpTest, WrongTokenIsRejectedOthersUnaffected) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  GoodRank good;
  start_good_rank(good, server, rec);
  EXPECT_EQ(rejection_of(server, rec, hello_frame("another-run", 3)),
            "wrong_token: wrong run token (the connection is not from this run)");
  expect_good_rank_unaffected(good, server, rec);
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_EQ(rec.hellos_.size(), 1u);
}

TEST(TcpTest, OtherProtocolVersionIsRejected) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  EXPECT_EQ(rejection_of(server, rec, hello_frame(kToken, 0, 9)),
            "protocol_version: protocol version 9 is not supported (this build speaks 1 to 8)");
}

/// The first frame the server sends back after `hello`, read within 10 s;
/// std::nullopt when the connection closes or nothing comes.
std::optional<Frame> answer_to(const TcpServer& server, const Bytes& hello,
                               std::chrono::milliseconds limit = 10s) {
  TcpClient client;
  if (!connect(client, server.port()) || !client.send_all(hello.data(), hello.size(), kIoTimeout))
    return std::nullopt;
  FrameDecoder d;
  std::uint8_t buf[256];
  const Clock::time_point give_up = Clock::now() + limit;
  while (Clock::now() < give_up) {
    const auto k = client.receive_some(buf, sizeof buf, 100ms);
    if (!k) return std::nullopt;
    d.feed(buf, *k);
    if (auto f = d.next()) return f;
  }
  return std::nullopt;
}

TEST(TcpTest, AHelloOfProtocolFourIsAnsweredAcceptedOrRefusedWithTheReason) {
  // The socket is two-way from protocol 4: the rank reads the verdict on its
  // Hello, and a refused rank can say why instead of "Broken pipe".
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  const auto verdict_of = [&](const Bytes& hello) -> std::optional<Verdict> {
    const auto f = answer_to(server, hello);
    if (!f || f->type != FrameType::Verdict) return std::nullopt;
    return decode_verdict(f->payload);
  };
  const auto ok = verdict_of(hello_frame(kToken, 0, kProtocolVersion));
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->accepted);
  EXPECT_EQ(ok->reason, "");
  EXPECT_EQ(ok->protocol_version, kProtocolVersion);
  const auto wrong = verdict_of(hello_frame("another-run", 1, kProtocolVersion));
  ASSERT_TRUE(wrong);
  EXPECT_FALSE(wrong->accepted);
  EXPECT_EQ(wrong->reason, "wrong run token (the connection is not from this run)");
  // A later protocol is told which one this collector speaks.
  const auto later = verdict_of(hello_frame(kToken, 2, 9));
  ASSERT_TRUE(later);
  EXPECT_FALSE(later->accepted);
  EXPECT_EQ(later->protocol_version, 8);
  // The handler's refusal of an identity travels too.
  rec.refuse_identity("rank 7 is outside the run's world size 2");
  const auto outside = verdict_of(hello_frame(kToken, 7, kProtocolVersion));
  ASSERT_TRUE(outside);
  EXPECT_FALSE(outside->accepted);
  EXPECT_EQ(outside->reason, "rank 7 is outside the run's world size 2");
}

TEST(TcpTest, AStreamResumedOnANewConnectionEndsTheOldOneWhichIsReadNoFurther) {
  // A rank that gave a connection up (it stalled) resumes its stream on a
  // new one; the old one may still hold bytes the server has not read, which
  // would arrive twice once the rank resends from the resume point.
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  TcpClient old_side;
  ASSERT_TRUE(connect(old_side, server.port()));
  const Bytes hello = hello_frame(kToken, 3, kProtocolVersion, 0xabcdef);
  ASSERT_TRUE(old_side.send_all(hello.data(), hello.size(), kIoTimeout));
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.hellos_.size() == 1; }));
  rec.resume_from(41);
  // Another rank's stream, and the same stream of another rank, are not it.
  const auto other = answer_to(server, hello_frame(kToken, 4, kProtocolVersion, 0xabcdef));
  ASSERT_TRUE(other);
  ConnectionId first = 0;
  {
    const std::lock_guard<std::mutex> lock(rec.mu_);
    first = rec.hellos_.begin()->first;
  }
  const auto closed_first = [first](Recorder& r) {
    for (const Closed& c : r.closed_)
      if (c.id == first) return true;
    return false;
  };
  ASSERT_FALSE(rec.wait(closed_first, 300ms));
  const auto resumed = answer_to(server, hello);
  ASSERT_TRUE(resumed);
  ASSERT_EQ(resumed->type, FrameType::Verdict);
  const auto v = decode_verdict(resumed->payload);
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->accepted);
  EXPECT_EQ(v->resume_from, 41u);
  {
    const std::lock_guard<std::mutex> lock(rec.mu_);
    EXPECT_EQ(rec.hellos_.rbegin()->second.stream, 0xabcdefu);
  }
  ASSERT_TRUE(rec.wait(closed_first));
  {
    const std::lock_guard<std::mutex> lock(rec.mu_);
    for (const Closed& c : rec.closed_) {
      if (c.id != first) continue;
      EXPECT_FALSE(c.clean);
      EXPECT_EQ(c.reason, "replaced by the rank's new connection");
    }
  }
  // What the old connection sends now is never read.
  const Bytes late = frame_bytes(FrameType::Step, step_payload(3, 1));
  old_side.send_all(late.data(), late.size(), kIoTimeout);
  server.settle(1s);
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_TRUE(rec.frames_[first].empty());
}

TEST(TcpTest, AConnectionThatWrotePastItsHelloGetsNoVerdict) {
  // A rank whose Verdict was late writes without it; a Verdict reaching it
  // after it closed would reset the connection and lose what the server
  // had not read yet.
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  TcpClient client;
  ASSERT_TRUE(connect(client, server.port()));
  Bytes all = hello_frame(kToken, 0, kProtocolVersion, 7);
  append(all, step_frame(0, 1));
  ASSERT_TRUE(client.send_all(all.data(), all.size(), kIoTimeout));
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.frame_count_ == 1; }));
  std::uint8_t buf[64];
  const auto k = client.receive_some(buf, sizeof buf, 500ms);
  ASSERT_TRUE(k.has_value()) << "closed";
  EXPECT_EQ(*k, 0u) << "a Verdict came";
}

TEST(TcpTest, AHelloOfProtocolThreeGetsNoAnswer) {
  // A rank of protocol 3 reads nothing: bytes it never reads would only sit
  // in its socket buffer.
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  EXPECT_FALSE(answer_to(server, hello_frame(kToken, 0, 3), 500ms).has_value());
  EXPECT_TRUE(rec.wait([](Recorder& r) { return r.hellos_.size() == 1; }));
}

TEST(TcpTest, VerdictPayloadsRoundTripAndMalformedOnesAreRefused) {
  Verdict v;
  v.accepted = false;
  v.reason = "wrong run token";
  const auto back = decode_verdict(encode_verdict(v));
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->accepted);
  EXPECT_EQ(back->reason, "wrong run token");
  Bytes p = encode_verdict(v);
  p.push_back(0);
  EXPECT_FALSE(decode_verdict(p)) << "trailing byte";
  p = encode_verdict(v);
  p[2] = 2;
  EXPECT_FALSE(decode_verdict(p)) << "accepted neither 0 nor 1";
  p = encode_verdict(v);
  p[2] = 1;
  EXPECT_FALSE(decode_verdict(p)) << "accepted, with a reason";
  EXPECT_FALSE(decode_verdict(Bytes{4, 0}));
  // An accepted one says where the stream resumes; a refused one cannot.
  Verdict ok;
  ok.resume_from = 123456789012;
  const auto resumed = decode_verdict(encode_verdict(ok));
  ASSERT_TRUE(resumed);
  EXPECT_TRUE(resumed->accepted);
  EXPECT_EQ(resumed->resume_from, 123456789012u);
  p = encode_verdict(v);
  p.back() = 1;
  EXPECT_FALSE(decode_verdict(p)) << "refused, with a resume point";
  p = encode_verdict(ok);
  p.pop_back();
  EXPECT_FALSE(decode_verdict(p)) << "cut short";
}

// Ranks built against protocol 1 (no heartbeats) still connect.
TEST(TcpTest, ProtocolVersionOneIsStillAccepted) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  TcpClient client;
  ASSERT_TRUE(connect(client, server.port())) << client.error();
  const Bytes hello = hello_frame(kToken, 3, 1);
  ASSERT_TRUE(client.send_all(hello.data(), hello.size(), 10000ms)) << client.error();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.hellos_.size() == 1; }));
}

TEST(TcpTest, HttpRequestIsRejectedOthersUnaffected) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  GoodRank good;
  start_good_rank(good, server, rec);
  const std::string http = "GET / HTTP/1.1\r\n\r\n";
  // "GET " read as a little-endian length: 0x20544547, far over what may
  // come before a Hello.
  EXPECT_EQ(rejection_of(server, rec, Bytes(http.begin(), http.end())),
            "bad_frame: frame length 542393671 exceeds the maximum of 4096 bytes");
  expect_good_rank_unaffected(good, server, rec);
}

Bytes oversized_header() {
  const std::uint32_t length = std::uint32_t(kMaxFrameBytes) + 1;
  return {std::uint8_t(length),       std::uint8_t(length >> 8),     std::uint8_t(length >> 16),
          std::uint8_t(length >> 24), std::uint8_t(FrameType::Step), kCodecVersion};
}

TEST(TcpTest, OversizedFrameLengthIsRejectedAtOnce) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  GoodRank good;
  start_good_rank(good, server, rec);
  // Only the header is sent: the length is refused without waiting for a payload.
  EXPECT_EQ(rejection_of(server, rec, oversized_header()),
            "bad_frame: frame length 1048577 exceeds the maximum of 4096 bytes");
  expect_good_rank_unaffected(good, server, rec);
}

TEST(TcpTest, OversizedFrameAfterHandshakeClosesTheConnection) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  TcpClient client;
  ASSERT_TRUE(connect(client, server.port())) << client.error();
  Bytes all = hello_frame(kToken, 2);
  append(all, step_frame(2, 1));
  append(all, oversized_header());
  ASSERT_TRUE(send(client, all)) << client.error();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.closed_.size() == 1; }));
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_FALSE(rec.closed_[0].clean);
  EXPECT_EQ(rec.closed_[0].reason, "frame length 1048577 exceeds the maximum of 1048576 bytes");
  // The frame before the bad bytes was still delivered.
  EXPECT_EQ(rec.frames_[rec.closed_[0].id].size(), 1u);
  EXPECT_EQ(server.open_connections(), 0u);
}

TEST(TcpTest, FirstFrameOtherThanHelloIsRejected) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  EXPECT_EQ(rejection_of(server, rec, step_frame(0, 1)),
            "not_hello: first frame was step, expected hello");
}

TEST(TcpTest, MalformedHelloIsRejected) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  // A protocol version and nothing else: no token, no identity.
  EXPECT_EQ(rejection_of(server, rec, frame_bytes(FrameType::Hello, {1, 0})),
            "malformed_hello: malformed hello");
}

TEST(TcpTest, NoHelloBeforeTheTimeoutIsRejectedOthersUnaffected) {
  Recorder rec;
  TcpServer server(options(300ms), rec);
  server.start();
  GoodRank good;
  start_good_rank(good, server, rec);

  TcpClient silent;
  ASSERT_TRUE(connect(silent, server.port())) << silent.error();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.rejected_.size() == 1; }));
  {
    const std::lock_guard<std::mutex> lock(rec.mu_);
    EXPECT_EQ(rec.rejected_[0].reason, "no hello within 0.3 s");
    EXPECT_EQ(rec.rejected_[0].kind, Rejection::HelloTimeout);
  }
  // The good rank passed its handshake long before: its timer no longer applies.
  std::this_thread::sleep_for(400ms);
  expect_good_rank_unaffected(good, server, rec);
}

TEST(TcpTest, HelloTimeoutIsWrittenInSeconds) {
  Recorder rec;
  TcpServer server(options(1250ms), rec);
  server.start();
  TcpClient silent;
  ASSERT_TRUE(connect(silent, server.port())) << silent.error();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.rejected_.size() == 1; }));
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_EQ(rec.rejected_[0].reason, "no hello within 1.25 s");
}

TEST(TcpTest, CloseBeforeHelloIsRejected) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  TcpClient quitter;
  ASSERT_TRUE(connect(quitter, server.port())) << quitter.error();
  quitter.close();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.rejected_.size() == 1; }));
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_EQ(rec.rejected_[0].reason, "peer closed before sending a hello");
  EXPECT_EQ(rec.rejected_[0].kind, Rejection::ClosedBeforeHello);
  EXPECT_TRUE(rec.closed_.empty());
}

// ---- what a peer without the token can cost

// A raw loopback connection: TcpClient cannot tell that the server closed
// without sending. -1 on failure.
int raw_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd` within `wait` (end of stream or a reset).
bool closed_by_server(int fd, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, int(wait.count())) != 1) return false;
  char b = 0;
  return ::recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

template <class Pred>
bool wait_until(Pred pred) {
  const Clock::time_point deadline = Clock::now() + kWait;
  while (!pred() && Clock::now() < deadline)
    std::this_thread::sleep_for(2ms);
  return pred();
}

TEST(TcpTest, ConnectionsOverThePendingCapAreClosedAtOnceAndCounted) {
  Recorder rec;
  ServerOptions o = options();  // a 10 s Hello timeout: nothing here waits for it
  o.max_pending = 3;
  TcpServer server(o, rec);
  server.start();
  std::vector<int> waiting;
  for (int i = 0; i < 3; ++i) {
    waiting.push_back(raw_connect(server.port()));
    ASSERT_GE(waiting.back(), 0);
  }
  ASSERT_TRUE(wait_until([&] { return server.pending_connections() == 3; }));

  // Two more are closed at once, long before any Hello timeout.
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 2; ++i) {
    const int fd = raw_connect(server.port());
    ASSERT_GE(fd, 0);
    EXPECT_TRUE(closed_by_server(fd, 5000ms));
    ::close(fd);
  }
  EXPECT_LT(Clock::now() - t0, 5s);
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.rejected_.size() == 2; }));
  {
    const std::lock_guard<std::mutex> lock(rec.mu_);
    for (const Rejected& r : rec.rejected_) {
      EXPECT_EQ(r.kind, Rejection::TooManyPending);
      EXPECT_EQ(r.reason, "too many connections waiting for their hello (limit 3)");
      EXPECT_EQ(r.peer.rfind("127.0.0.1:", 0), 0u) << r.peer;
    }
  }
  EXPECT_EQ(server.pending_connections(), 3u);
  EXPECT_EQ(server.handshaken_connections(), 0u);

  // One leaves: a rank gets in, and once through its handshake it no longer
  // counts against the cap.
  ::close(waiting[0]);
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.rejected_.size() == 3; }));
  GoodRank good;
  start_good_rank(good, server, rec);
  EXPECT_EQ(server.handshaken_connections(), 1u);
  EXPECT_TRUE(wait_until([&] { return server.pending_connections() == 2; }));
  waiting[0] = raw_connect(server.port());
  EXPECT_TRUE(wait_until([&] { return server.pending_connections() == 3; }));
  EXPECT_EQ(server.open_connections(), 4u);
  {
    const std::lock_guard<std::mutex> lock(rec.mu_);
    EXPECT_EQ(rec.rejected_.size(), 3u);
    EXPECT_EQ(rec.rejected_[2].kind, Rejection::ClosedBeforeHello);
  }
  for (int fd : waiting)
    ::close(fd);
}

Bytes hello_header(std::uint32_t length) {
  return {std::uint8_t(length),       std::uint8_t(length >> 8),      std::uint8_t(length >> 16),
          std::uint8_t(length >> 24), std::uint8_t(FrameType::Hello), kCodecVersion};
}

TEST(TcpTest, FrameOverThePreHelloLimitIsRefusedBeforeItsBody) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  // Only the header: the server does not wait for the 4097 bytes it announces.
  EXPECT_EQ(rejection_of(server, rec, hello_header(std::uint32_t(kMaxPreHelloFrameBytes) + 1)),
            "bad_frame: frame length 4097 exceeds the maximum of 4096 bytes");
}

TEST(TcpTest, TheLargestHelloIsReadWholeAndJudgedOnItsToken) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  Hello h;
  h.token = std::string(kMaxStringBytes, 'x');
  h.identity.global_rank = 0;
  h.identity.local_rank = 0;
  h.identity.node_rank = 0;
  h.identity.hostname = std::string(kMaxStringBytes, 'h');
  h.identity.local_world_size = 1;
  h.identity.world_size = 1;
  const Bytes payload = encode_hello(h);
  ASSERT_EQ(payload.size(), kMaxHelloPayloadBytes);
  EXPECT_EQ(rejection_of(server, rec, frame_bytes(FrameType::Hello, payload)),
            "wrong_token: wrong run token (the connection is not from this run)");
}

TEST(TcpTest, LargeFramesPassOnceTheHelloHas) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  TcpClient client;
  ASSERT_TRUE(connect(client, server.port())) << client.error();
  // In one write, as a sender does: the limit rises between two frames of
  // one read.
  Bytes all = hello_frame(kToken, 5);
  append(all, frame_bytes(FrameType::System, Bytes(200000, 0x5A)));
  append(all, frame_bytes(FrameType::System, Bytes(kMaxFrameBytes, 0x5B)));
  append(all, bye_frame());
  ASSERT_TRUE(send(client, all)) << client.error();
  client.close();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.closed_.size() == 1; }));
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_TRUE(rec.closed_[0].clean) << rec.closed_[0].reason;
  const std::vector<Frame>& frames = rec.frames_[rec.closed_[0].id];
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].payload, Bytes(200000, 0x5A));
  EXPECT_EQ(frames[1].payload.size(), kMaxFrameBytes);
  EXPECT_TRUE(rec.rejected_.empty());
}

// Sends a hello and then `rest`, and returns the one on_closed call.
Closed closed_after(TcpServer& server, Recorder& rec, const Bytes& rest, bool close_after) {
  TcpClient client;
  EXPECT_TRUE(connect(client, server.port())) << client.error();
  Bytes all = hello_frame(kToken, 4);
  append(all, rest);
  EXPECT_TRUE(send(client, all)) << client.error();
  if (close_after) client.close();
  EXPECT_TRUE(rec.wait([](Recorder& r) { return r.closed_.size() == 1; }));
  const std::lock_guard<std::mutex> lock(rec.mu_);
  return rec.closed_.empty() ? Closed{0, true, "<not closed>"} : rec.closed_[0];
}

TEST(TcpTest, SecondHelloIsAProtocolError) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  const Closed c = closed_after(server, rec, hello_frame(kToken, 4), false);
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.reason, "protocol error: a second hello on an established connection");
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_TRUE(rec.frames_[c.id].empty());  // the second hello never reaches on_frame
}

TEST(TcpTest, AByeEndsTheConnectionAndNothingAfterItIsRead) {
  // The server ends a connection at its Bye, without waiting for the close:
  // a process the rank forked may hold the socket open long after.
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  Bytes rest = bye_frame();
  append(rest, step_frame(4, 1));
  const Closed c = closed_after(server, rec, rest, /*close_after=*/false);
  EXPECT_TRUE(c.clean);
  EXPECT_EQ(c.reason, "bye");
  const std::lock_guard<std::mutex> lock(rec.mu_);
  ASSERT_EQ(rec.frames_[c.id].size(), 1u);  // the Bye, not the step
  EXPECT_EQ(rec.frames_[c.id][0].type, FrameType::Bye);
}

TEST(TcpTest, HandlerRefusingAPayloadClosesTheConnection) {
  Recorder rec;
  rec.refuse(FrameType::System);
  TcpServer server(options(), rec);
  server.start();
  Bytes rest = step_frame(4, 1);
  append(rest, frame_bytes(FrameType::System, {1, 2, 3}));
  append(rest, step_frame(4, 2));  // never delivered: the connection is closed first
  const Closed c = closed_after(server, rec, rest, false);
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.reason, "test refuses system");
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_EQ(rec.frames_[c.id].size(), 2u);
}

TEST(TcpTest, StreamEndingInsideAFrameIsNotClean) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  const Bytes step = step_frame(4, 1);
  const Bytes half(step.begin(), step.begin() + 20);
  const Closed c = closed_after(server, rec, half, true);
  EXPECT_FALSE(c.clean);
  EXPECT_EQ(c.reason,
            "stream ended inside a frame (20 of " + std::to_string(step.size()) + " bytes)");
}

TEST(TcpTest, SixtyFourRanksAtOnceDeliverEveryFrame) {
  constexpr int kRanks = 64;
  constexpr int kSteps = 5000;
  constexpr int kFramesPerWrite = 500;  // a sender thread writes its queue in batches
  Recorder rec(false);
  TcpServer server(options(), rec);
  server.start();

  // Encoded before the clock starts: the measure is the collector's side.
  std::vector<std::vector<Bytes>> batches(kRanks);
  for (int rank = 0; rank < kRanks; ++rank) {
    Bytes b = hello_frame(kToken, rank);
    for (int step = 1; step <= kSteps; ++step) {
      append(b, step_frame(rank, step));
      if (step % kFramesPerWrite == 0)
        batches[std::size_t(rank)].push_back(std::move(b)), b.clear();
    }
    append(b, bye_frame());
    batches[std::size_t(rank)].push_back(std::move(b));
  }

  std::atomic<int> failures{0};
  std::vector<std::thread> ranks;
  const Clock::time_point t0 = Clock::now();
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] {
      TcpClient c;
      if (!connect(c, server.port())) {
        ++failures;
        return;
      }
      for (const Bytes& b : batches[std::size_t(rank)]) {
        if (!send(c, b)) {
          ++failures;
          return;
        }
      }
      c.close();
    });
  }
  for (std::thread& t : ranks)
    t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_TRUE(rec.wait([&](Recorder& r) { return r.closed_.size() == std::size_t(kRanks); }));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_EQ(rec.hellos_.size(), std::size_t(kRanks));
  EXPECT_EQ(rec.frame_count_, std::size_t(kRanks) * (kSteps + 1));  // steps + bye each
  EXPECT_EQ(rec.out_of_order_, 0u);
  for (const Closed& c : rec.closed_) {
    EXPECT_TRUE(c.clean) << c.reason;
    EXPECT_EQ(rec.last_step_[c.id], kSteps);
  }
  EXPECT_TRUE(rec.rejected_.empty());
  EXPECT_EQ(server.open_connections(), 0u);
  std::printf(
      "[ throughput ] %d ranks x %d step frames (%zu bytes each) in %.3f s: %.0f frames/s\n",
      kRanks, kSteps, step_frame(0, 1).size(), seconds, double(kRanks) * kSteps / seconds);
}

TEST(TcpTest, StopWithOpenConnectionsReturnsPromptly) {
  Recorder rec;
  auto server = std::make_unique<TcpServer>(options(), rec);
  server->start();
  std::vector<std::unique_ptr<TcpClient>> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    ranks.push_back(std::make_unique<TcpClient>());
    ASSERT_TRUE(connect(*ranks.back(), server->port())) << ranks.back()->error();
    ASSERT_TRUE(send(*ranks.back(), hello_frame(kToken, rank)));
  }
  TcpClient silent;  // connected, no hello yet
  ASSERT_TRUE(connect(silent, server->port())) << silent.error();
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.hellos_.size() == 3; }));
  const Clock::time_point deadline = Clock::now() + 20s;
  while (server->open_connections() != 4 && Clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(server->open_connections(), 4u);

  const Clock::time_point t0 = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_EQ(server->open_connections(), 0u);
  server->stop();  // idempotent
  {
    const std::lock_guard<std::mutex> lock(rec.mu_);
    ASSERT_EQ(rec.closed_.size(), 3u);
    for (const Closed& c : rec.closed_) {
      EXPECT_FALSE(c.clean);
      EXPECT_EQ(c.reason, "server stopped");
    }
    EXPECT_TRUE(rec.rejected_.empty());
  }
  server.reset();  // the destructor's stop() is a no-op now
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_EQ(rec.closed_.size(), 3u);
}

TEST(TcpTest, DestructorStopsARunningServer) {
  Recorder rec;
  TcpClient client;
  {
    TcpServer server(options(), rec);
    server.start();
    ASSERT_TRUE(connect(client, server.port())) << client.error();
    ASSERT_TRUE(send(client, hello_frame(kToken, 0)));
    ASSERT_TRUE(rec.wait([](Recorder& r) { return r.hellos_.size() == 1; }));
  }
  const std::lock_guard<std::mutex> lock(rec.mu_);
  ASSERT_EQ(rec.closed_.size(), 1u);
  EXPECT_EQ(rec.closed_[0].reason, "server stopped");
}

TEST(TcpTest, ClientConnectToAClosedPortFailsWithAReason) {
  std::uint16_t port = 0;
  {
    Recorder rec;
    TcpServer server(options(), rec);
    port = server.port();
  }  // nothing listens there any more
  TcpClient client;
  const Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(client.connect("127.0.0.1", port, 2000ms));
  EXPECT_LT(Clock::now() - t0, 10s);
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(client.error().rfind("cannot connect to 127.0.0.1:" + std::to_string(port) + ": ", 0),
            0u)
      << client.error();
  EXPECT_EQ(client.error().find('\n'), std::string::npos);

  const Bytes b{1, 2, 3};
  EXPECT_FALSE(client.send_all(b.data(), b.size(), 1000ms));
  EXPECT_EQ(client.error(), "send to 127.0.0.1:" + std::to_string(port) + " failed: not connected");
}

TEST(TcpTest, ClientResolvesAHostName) {
  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  TcpClient client;
  // "localhost" may list ::1 before 127.0.0.1: every address is tried.
  ASSERT_TRUE(connect(client, server.port(), "localhost")) << client.error();
  ASSERT_TRUE(send(client, hello_frame(kToken, 0)));
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.hellos_.size() == 1; }));
}

TEST(TcpTest, ClientReportsAnUnknownHostWithinItsDeadline) {
  TcpClient client;
  const Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(client.connect("no-such-host.invalid", 29765, 2000ms));
  // Whether the lookup fails at once or hangs on an unreachable DNS server,
  // the caller waits no longer than its deadline.
  EXPECT_LT(Clock::now() - t0, 6s);
  EXPECT_EQ(client.error().rfind("cannot resolve no-such-host.invalid: ", 0), 0u) << client.error();
}

TEST(TcpTest, ClientOverIpv6) {
  Recorder rec;
  ServerOptions o = options();
  o.bind_host = "::1";
  std::unique_ptr<TcpServer> server;
  try {
    server = std::make_unique<TcpServer>(o, rec);
  } catch (const TransportError& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  server->start();
  TcpClient client;
  ASSERT_TRUE(connect(client, server->port(), "::1")) << client.error();
  ASSERT_TRUE(send(client, hello_frame(kToken, 0)));
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.hellos_.size() == 1; }));
  const std::lock_guard<std::mutex> lock(rec.mu_);
  EXPECT_EQ(rec.peers_.begin()->second.rfind("[::1]:", 0), 0u) << rec.peers_.begin()->second;
}

// Restores a signal's disposition when the test ends.
class SignalDisposition {
 public:
  explicit SignalDisposition(int sig) : sig_(sig) { sigaction(sig_, nullptr, &saved_); }
  ~SignalDisposition() { sigaction(sig_, &saved_, nullptr); }
  SignalDisposition(const SignalDisposition&) = delete;
  SignalDisposition& operator=(const SignalDisposition&) = delete;
  void set_default() {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig_, &dfl, nullptr);
  }
  [[nodiscard]] bool is_default() const {
    struct sigaction now {};
    sigaction(sig_, nullptr, &now);
    return now.sa_handler == SIG_DFL;
  }

 private:
  int sig_;
  struct sigaction saved_ {};
};

TEST(TcpTest, SendToAPeerThatClosedFailsWithoutSigpipe) {
  // SIGPIPE at its default action kills the process: if a write raised it,
  // this test binary would die instead of passing.
  SignalDisposition sigpipe(SIGPIPE);
  sigpipe.set_default();

  Recorder rec;
  TcpServer server(options(), rec);
  server.start();
  TcpClient client;
  ASSERT_TRUE(connect(client, server.port())) << client.error();
  ASSERT_TRUE(send(client, hello_frame("another-run", 0)));  // the server closes on it
  ASSERT_TRUE(rec.wait([](Recorder& r) { return r.rejected_.size() == 1; }));

  // The first writes may still land in the socket buffer; once the peer's
  // reset is back, a write fails.
  const Bytes chunk(64 * 1024, 0xAB);
  bool failed = false;
  const Clock::time_point deadline = Clock::now() + 20s;
  while (!failed && Clock::now() < deadline) {
    failed = !client.send_all(chunk.data(), chunk.size(), 2000ms);
    if (!failed) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(failed);
  EXPECT_FALSE(client.connected());
  EXPECT_EQ(
      client.error().rfind("send to 127.0.0.1:" + std::to_string(server.port()) + " failed: ", 0),
      0u)
      << client.error();
  EXPECT_TRUE(sigpipe.is_default());  // the client changed no signal disposition
}

TEST(TcpTest, SendTimesOutWhenThePeerDoesNotRead) {
  // A listener that accepts nothing and reads nothing: once the socket buffers
  // on both sides are full, a write cannot finish.
  Recorder rec;
  TcpServer server(options(), rec);  // not started: the kernel completes the connect, nobody reads
  TcpClient client;
  ASSERT_TRUE(connect(client, server.port())) << client.error();
  const Bytes chunk(4 * 1024 * 1024, 0xCD);
  bool failed = false;
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 64 && !failed; ++i)
    failed = !client.send_all(chunk.data(), chunk.size(), 300ms);
  ASSERT_TRUE(failed);
  EXPECT_LT(Clock::now() - t0, 60s);
  EXPECT_FALSE(client.connected());
  EXPECT_NE(client.error().find(" timed out after 300 ms ("), std::string::npos) << client.error();
}

TEST(TcpTest, SendSomeKeepsTheConnectionToASlowPeerAndEveryByteArrivesOnce) {
  // A peer that reads nothing for a second, then everything: send_some hands
  // back what went out, keeps the socket, and the rest follows from where it
  // stopped. Every byte arrives once, in order (the sender's "slow is not
  // gone", issue 32).
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  TcpClient client;
  ASSERT_TRUE(client.connect("127.0.0.1", ntohs(a.sin_port), kIoTimeout)) << client.error();
  const int peer = ::accept(lfd, nullptr, nullptr);
  ASSERT_GE(peer, 0);
  Bytes data(48 * 1024 * 1024);
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<std::uint8_t>(i % 251);
  Bytes got;
  std::thread reader([&] {
    std::this_thread::sleep_for(1s);
    std::vector<std::uint8_t> buf(1 << 16);
    for (;;) {
      const ssize_t k = ::read(peer, buf.data(), buf.size());
      if (k <= 0) break;
      got.insert(got.end(), buf.begin(), buf.begin() + k);
    }
  });
  std::size_t sent = 0;
  int short_writes = 0;
  const Clock::time_point give_up = Clock::now() + kWait;
  while (sent < data.size() && Clock::now() < give_up) {
    const auto k = client.send_some(data.data() + sent, data.size() - sent, 100ms);
    ASSERT_TRUE(k.has_value()) << client.error();
    ASSERT_TRUE(client.connected());
    if (sent + *k < data.size()) ++short_writes;
    sent += *k;
  }
  client.close();
  reader.join();
  ::close(peer);
  ::close(lfd);
  EXPECT_GT(short_writes, 0) << "the peer never made a write wait: the test proved nothing";
  EXPECT_EQ(sent, data.size());
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
}

TEST(TcpTest, BindErrorsAreOneLineWithTheFix) {
  Recorder rec;
  TcpServer first(options(), rec);
  ServerOptions o = options();
  o.port = first.port();
  try {
    TcpServer second(o, rec);
    FAIL() << "a second server bound a port already listened on";
  } catch (const TransportError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot listen on 127.0.0.1:" + std::to_string(o.port) +
                                         ": address in use (pick another --aggregator-port)");
  }

  o = options();
  o.bind_host = "192.0.2.1";  // TEST-NET-1: never an address of this machine
  try {
    TcpServer elsewhere(o, rec);
    FAIL() << "bound an address this machine does not have";
  } catch (const TransportError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot listen on 192.0.2.1:0: address not available (not an address of this "
              "machine: check --aggregator-bind-host)");
  }
}

}  // namespace
}  // namespace traceml::transport
