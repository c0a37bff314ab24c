#include "transport/tcp_server.hpp"

#include <poll.h>

#include <asio.hpp>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace traceml::transport {
namespace {

using asio::ip::tcp;

// One read takes up to this much once a connection has passed its handshake:
// a batch of a few hundred ~70-byte frames per system call, so 64 busy ranks
// cost the I/O thread few wakeups.
constexpr std::size_t kReadBufferBytes = 64 * 1024;

// Before the handshake a read takes at most one whole Hello frame, all that a
// connection needs to pass it: a peer without the token never gets more read
// buffer than this. Frames that follow the Hello in the same read are handled
// as usual; the next read uses kReadBufferBytes.
constexpr std::size_t kPreHelloReadBytes = kHeaderBytes + kMaxPreHelloFrameBytes;

// How long to wait before accepting again after accept() itself failed (out
// of file descriptors, say): retrying at once would spin the I/O thread.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};

// "address:port" of a peer; IPv4 peers of a dual-stack socket are shown as IPv4.
std::string peer_text(const tcp::endpoint& ep) {
  asio::ip::address a = ep.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  if (a.is_v6()) return "[" + a.to_string() + "]:" + std::to_string(ep.port());
  return a.to_string() + ":" + std::to_string(ep.port());
}

std::string address_text(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

// A duration in seconds with at least one decimal: 5000 ms -> "5.0", 250 ms -> "0.25".
std::string seconds_text(std::chrono::milliseconds d) {
  const long long ms = d.count() < 0 ? 0 : d.count();
  std::string frac = std::to_string(1000 + ms % 1000).substr(1);  // "000".."999"
  while (frac.size() > 1 && frac.back() == '0')
    frac.pop_back();
  return std::to_string(ms / 1000) + "." + frac;
}

// Why listening failed and what to do about it, as the tail of the one-line error.
std::string listen_failure(const asio::error_code& ec) {
  if (ec == asio::error::address_in_use) return "address in use (pick another --aggregator-port)";
  if (ec == asio::error::access_denied) {
    return "permission denied (ports below 1024 need privileges: pick another "
           "--aggregator-port)";
  }
  // Asio names no error for EADDRNOTAVAIL; its codes are errno values.
  if (ec == asio::error_code(EADDRNOTAVAIL, asio::system_category())) {
    return "address not available (not an address of this machine: check "
           "--aggregator-bind-host)";
  }
  std::string message = ec.message();
  if (!message.empty()) {
    message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
  }
  return message + " (check --aggregator-bind-host and --aggregator-port)";
}

// One accepted connection. Touched only by the I/O thread.
struct Connection {
  Connection(tcp::socket s, ConnectionId connection_id, std::string peer_address)
      : socket(std::move(s)),
        hello_timer(socket.get_executor()),
        decoder(kMaxPreHelloFrameBytes),
        id(connection_id),
        peer(std::move(peer_address)),
        buffer(kPreHelloReadBytes) {}

  tcp::socket socket;
  asio::steady_timer hello_timer;
  // Takes frames up to kMaxPreHelloFrameBytes until the Hello passed, then
  // up to kMaxFrameBytes.
  FrameDecoder decoder;
  ConnectionId id;
  std::string peer;
  bool handshaken = false;
  // Bytes came after the Hello before it was read: a rank of protocol 4
  // whose Verdict was late writes without it, and reads none (a Verdict
  // reaching a rank that has closed would reset the connection and lose
  // what it had not delivered yet).
  bool wrote_past_hello = false;
  bool bye_seen = false;
  bool closed = false;
  // Protocol 4: the Hello's global rank and stream, while this connection
  // carries it (TcpServer::Impl::streams).
  std::optional<std::pair<int, std::uint64_t>> stream;
  // kPreHelloReadBytes until the handshake, kReadBufferBytes after it: a
  // connection without the token never gets the big buffer.
  std::vector<std::uint8_t> buffer;
};

using ConnectionPtr = std::shared_ptr<Connection>;

}  // namespace

const char* rejection_name(Rejection r) {
  switch (r) {
    case Rejection::TooManyPending:
      return "too_many_pending";
    case Rejection::HelloTimeout:
      return "hello_timeout";
    case Rejection::ClosedBeforeHello:
      return "closed_before_hello";
    case Rejection::BadFrame:
      return "bad_frame";
    case Rejection::NotHello:
      return "not_hello";
    case Rejection::MalformedHello:
      return "malformed_hello";
    case Rejection::ProtocolVersion:
      return "protocol_version";
    case Rejection::WrongToken:
      return "wrong_token";
    case Rejection::ConnectionError:
      return "connection_error";
  }
  return "unknown";
}

struct TcpServer::Impl {
  Impl(const ServerOptions& o, ServerHandler& h) : options(o), handler(h) {}

  ServerOptions options;
  ServerHandler& handler;

  // Declared before everything that holds a socket or timer on it, so that it
  // is destroyed last.
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::uint16_t port = 0;
  /// The listening socket, for backlog_waiting() from other threads (-1
  /// before listen and once shut down).
  std::atomic<int> listen_fd{-1};

  std::mutex lifecycle_mu;  // guards started/stopped and the thread handle
  bool started = false;
  bool stopped = false;
  std::thread thread;

  // Written by the I/O thread, read by any (finish() polls them).
  std::atomic<std::size_t> pending{0};
  std::atomic<std::size_t> handshaken{0};

  // I/O thread only.
  bool stopping = false;
  ConnectionId next_id = 1;
  std::unordered_map<ConnectionId, ConnectionPtr> connections;
  /// The connection carrying each open stream (global rank, stream): at
  /// most one entry per handshaken connection.
  std::map<std::pair<int, std::uint64_t>, ConnectionId> streams;

  void listen();
  void accept();
  void add_connection(tcp::socket socket);
  void refuse_over_cap(tcp::socket socket);
  void read(const ConnectionPtr& c);
  void on_read(const ConnectionPtr& c, const asio::error_code& ec, std::size_t n);
  void on_end_of_stream(const ConnectionPtr& c);
  bool on_frame(const ConnectionPtr& c, const Frame& frame);
  bool on_hello_frame(const ConnectionPtr& c, const Frame& frame);
  bool answer(const ConnectionPtr& c, const Hello& hello, const std::optional<std::string>& refused,
              std::uint64_t resume_from = 0);
  void take_stream(const ConnectionPtr& c, const Hello& hello);
  void end(const ConnectionPtr& c, bool clean, const std::string& reason);
  void fail(const ConnectionPtr& c, Rejection kind, const std::string& reason);
  bool close(const ConnectionPtr& c);
  void shut_down();
  void run();
};

void TcpServer::Impl::listen() {
  const std::string where = address_text(options.bind_host, options.port);
  asio::error_code ec;
  tcp::endpoint endpoint;
  const asio::ip::address address = asio::ip::make_address(options.bind_host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, options.port);
  } else {
    tcp::resolver resolver(io);
    const auto results =
        resolver.resolve(options.bind_host, std::to_string(options.port),
                         tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      throw TransportError("cannot listen on " + where +
                           ": cannot resolve the host (check --aggregator-bind-host)");
    }
    endpoint = results.begin()->endpoint();
  }
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    // Lets a collector restarted on the same port bind while the last run's
    // connections linger in TIME_WAIT; two live listeners still cannot share it.
    asio::error_code ignored;
    acceptor.set_option(tcp::acceptor::reuse_address(true), ignored);
    acceptor.bind(endpoint, ec);
  }
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    asio::error_code ignored;
    acceptor.close(ignored);
    throw TransportError("cannot listen on " + where + ": " + listen_failure(ec));
  }
  port = acceptor.local_endpoint(ec).port();
  listen_fd.store(acceptor.native_handle());
}

void TcpServer::Impl::accept() {
  acceptor.async_accept([this](const asio::error_code& ec, tcp::socket socket) {
    if (stopping || ec == asio::error::operation_aborted) return;
    if (ec) {
      accept_retry.expires_after(kAcceptRetryDelay);
      accept_retry.async_wait([this](const asio::error_code& wait_ec) {
        if (!wait_ec && !stopping) accept();
      });
      return;
    }
    // Accepting again comes first: reporting a refusal calls the handler,
    // which may throw, and the server must keep accepting all the same.
    accept();
    if (pending.load() >= options.max_pending) {
      refuse_over_cap(std::move(socket));
    } else {
      add_connection(std::move(socket));
    }
  });
}

void TcpServer::Impl::refuse_over_cap(tcp::socket socket) {
  asio::error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  const std::string peer = ec ? std::string("unknown peer") : peer_text(remote);
  socket.close(ec);
  handler.on_rejected(peer, Rejection::TooManyPending,
                      "too many connections waiting for their hello (limit " +
                          std::to_string(options.max_pending) + ")");
}

void TcpServer::Impl::add_connection(tcp::socket socket) {
  asio::error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  std::string peer = ec ? std::string("unknown peer") : peer_text(remote);
  auto c = std::make_shared<Connection>(std::move(socket), next_id++, std::move(peer));
  connections.emplace(c->id, c);
  pending.fetch_add(1);

  c->hello_timer.expires_after(options.hello_timeout);
  c->hello_timer.async_wait([this, c](const asio::error_code& wait_ec) {
    if (wait_ec || c->closed || c->handshaken) return;
    fail(c, Rejection::HelloTimeout,
         "no hello within " + seconds_text(options.hello_timeout) + " s");
  });
  read(c);
}

void TcpServer::Impl::read(const ConnectionPtr& c) {
  // Grown here, between reads: on_read walks the old buffer while the Hello
  // passes.
  if (c->handshaken && c->buffer.size() < kReadBufferBytes) c->buffer.resize(kReadBufferBytes);
  c->socket.async_read_some(
      asio::buffer(c->buffer),
      [this, c](const asio::error_code& ec, std::size_t n) { on_read(c, ec, n); });
}

void TcpServer::Impl::on_read(const ConnectionPtr& c, const asio::error_code& ec, std::size_t n) {
  if (c->closed) return;
  if (ec == asio::error::eof) {
    on_end_of_stream(c);
    return;
  }
  if (ec) {
    fail(c, Rejection::ConnectionError, "connection error: " + ec.message());
    return;
  }
  // The decoder takes only what fits in its bounded buffer; drain frames and
  // feed the rest. A full buffer always holds a whole frame, so every round
  // either consumes bytes or yields a frame.
  const std::uint8_t* p = c->buffer.data();
  std::size_t left = n;
  while (left > 0) {
    const std::size_t took = c->decoder.feed(p, left);
    p += took;
    left -= took;
    bool drained = false;
    while (std::optional<Frame> frame = c->decoder.next()) {
      drained = true;
      if (!c->handshaken) c->wrote_past_hello = left > 0 || c->decoder.buffered() > 0;
      if (!on_frame(c, *frame)) {
        handler.on_read_end();
        return;
      }
    }
    handler.on_read_end();
    if (c->decoder.failed()) {
      fail(c, Rejection::BadFrame, c->decoder.error());
      return;
    }
    if (took == 0 && !drained) {
      fail(c, Rejection::BadFrame, "internal error: the frame decoder made no progress");
      return;
    }
  }
  read(c);
}

void TcpServer::Impl::on_end_of_stream(const ConnectionPtr& c) {
  // Every complete frame was drained after its bytes arrived, so all finish()
  // can find is a truncated tail.
  if (!c->decoder.finish()) {
    fail(c, Rejection::ClosedBeforeHello, c->decoder.error());
    return;
  }
  if (!c->handshaken) {
    fail(c, Rejection::ClosedBeforeHello, "peer closed before sending a hello");
    return;
  }
  end(c, c->bye_seen, "peer closed");
}

bool TcpServer::Impl::on_frame(const ConnectionPtr& c, const Frame& frame) {
  if (!c->handshaken) return on_hello_frame(c, frame);
  if (frame.type == FrameType::Hello) {
    end(c, false, "protocol error: a second hello on an established connection");
    return false;
  }
  if (frame.type == FrameType::Bye) c->bye_seen = true;
  std::optional<std::string> reason;
  try {
    reason = handler.on_frame(c->id, frame);
  } catch (const std::exception& e) {
    reason = std::string("the collector failed on a ") + frame_type_name(frame.type) +
             " frame: " + e.what();
  }
  if (reason) {
    end(c, false, *reason);
    return false;
  }
  if (c->bye_seen) {
    // The rank's stream is over: its connection ends here, also when a
    // process it forked holds the socket open, and nothing after is read.
    end(c, true, "bye");
    return false;
  }
  return true;
}

bool TcpServer::Impl::on_hello_frame(const ConnectionPtr& c, const Frame& frame) {
  if (frame.type != FrameType::Hello) {
    fail(c, Rejection::NotHello,
         std::string("first frame was ") + frame_type_name(frame.type) + ", expected hello");
    return false;
  }
  std::optional<Hello> hello = decode_hello(frame.payload);
  if (!hello) {
    fail(c, Rejection::MalformedHello, "malformed hello");
    return false;
  }
  const HelloCheck check = check_hello(*hello, options.token);
  if (!check.ok()) {
    answer(c, *hello, check.reason);
    fail(c,
         !supported_protocol(hello->protocol_version) ? Rejection::ProtocolVersion
                                                      : Rejection::WrongToken,
         *check.reason);
    return false;
  }
  // Counted as handshaken before it leaves the pending count, so that a
  // caller polling both never sees the connection in neither.
  c->handshaken = true;
  handshaken.fetch_add(1);
  pending.fetch_sub(1);
  c->hello_timer.cancel();
  c->decoder.set_max_payload_bytes(kMaxFrameBytes);
  take_stream(c, *hello);
  HelloReply reply;
  try {
    reply = handler.on_hello(c->id, *hello, c->peer);
  } catch (const std::exception& e) {
    reply.refused = std::string("the collector failed on the hello: ") + e.what();
  }
  std::optional<std::string>& refused = reply.refused;
  if (!answer(c, *hello, refused, reply.resume_from) && !refused)
    refused = "could not answer the hello";
  if (refused) {
    // Handshaken already: the handler hears of the end through on_closed.
    end(c, false, *refused);
    return false;
  }
  return true;
}

void TcpServer::Impl::take_stream(const ConnectionPtr& c, const Hello& hello) {
  // A relay speaks for ranks, it is none of their streams.
  if (hello.stream == 0 || hello.role != PeerRole::Rank) return;
  const std::pair<int, std::uint64_t> key{hello.identity.global_rank, hello.stream};
  if (const auto it = streams.find(key); it != streams.end()) {
    // The rank gave that connection up (it stalled, or broke on its side)
    // and resumes here: what the old one still holds unread would come
    // twice, so it is read no further.
    if (const auto old = connections.find(it->second); old != connections.end()) {
      try {
        end(ConnectionPtr(old->second), false, "replaced by the rank's new connection");
      } catch (const std::exception&) {
        // The handler failed on the old one's end: the new one goes on.
      }
    }
  }
  streams[key] = c->id;
  c->stream = key;
}

bool TcpServer::Impl::answer(const ConnectionPtr& c, const Hello& hello,
                             const std::optional<std::string>& refused, std::uint64_t resume_from) {
  if (hello.protocol_version < kVerdictProtocolVersion) return true;  // it reads nothing
  if (c->wrote_past_hello) return true;  // it stopped waiting for the Verdict
  Verdict v;
  v.accepted = !refused;
  if (refused) v.reason = *refused;
  v.resume_from = resume_from;
  const auto bytes = encode_frame(FrameType::Verdict, encode_verdict(v));
  if (!bytes) return false;
  // A few dozen bytes on a connection that has carried nothing our way: the
  // socket buffer takes them at once, without a write queue. A rank of
  // protocol 4 sends nothing after its Hello (one frame, within one read of
  // kPreHelloReadBytes) until it has read this, so a refusal's close finds
  // no unread bytes and ends with a FIN, not a reset that could discard the
  // verdict before the rank reads it.
  asio::error_code ec;
  c->socket.non_blocking(true, ec);
  std::size_t n = 0;
  if (!ec) n = c->socket.write_some(asio::buffer(*bytes), ec);
  if (ec || n != bytes->size()) return false;
  if (refused) c->socket.shutdown(tcp::socket::shutdown_send, ec);
  return true;
}

bool TcpServer::Impl::close(const ConnectionPtr& c) {
  if (c->closed) return false;
  c->closed = true;
  c->hello_timer.cancel();
  asio::error_code ignored;
  c->socket.close(ignored);
  connections.erase(c->id);
  if (c->stream) {
    const auto it = streams.find(*c->stream);
    if (it != streams.end() && it->second == c->id) streams.erase(it);
  }
  (c->handshaken ? handshaken : pending).fetch_sub(1);
  return true;
}

void TcpServer::Impl::end(const ConnectionPtr& c, bool clean, const std::string& reason) {
  if (!close(c)) return;
  handler.on_closed(c->id, clean, reason);
}

void TcpServer::Impl::fail(const ConnectionPtr& c, Rejection kind, const std::string& reason) {
  const bool handshaken_before = c->handshaken;
  if (!close(c)) return;
  if (handshaken_before) {
    handler.on_closed(c->id, false, reason);
  } else {
    handler.on_rejected(c->peer, kind, reason);
  }
}

void TcpServer::Impl::shut_down() {
  stopping = true;
  listen_fd.store(-1);
  asio::error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  // Copied first: end() erases from the map.
  std::vector<ConnectionPtr> all;
  all.reserve(connections.size());
  for (const auto& entry : connections)
    all.push_back(entry.second);
  for (const ConnectionPtr& c : all) {
    if (c->handshaken) {
      end(c, c->bye_seen, "server stopped");
    } else {
      close(c);  // not refused, just cut short: nothing to report for it
    }
  }
}

void TcpServer::Impl::run() {
  // Returns once shut_down() has closed everything and the aborted operations
  // have completed. A handler that throws from on_closed/on_rejected must not
  // take the other connections down with the thread.
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[TraceML] collector: a connection handler failed: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "[TraceML] collector: a connection handler failed\n");
    }
  }
}

TcpServer::TcpServer(const ServerOptions& options, ServerHandler& handler)
    : impl_(std::make_unique<Impl>(options, handler)) {
  try {
    impl_->listen();
  } catch (const TransportError&) {
    throw;
  } catch (const std::exception& e) {
    throw TransportError("cannot listen on " + address_text(options.bind_host, options.port) +
                         ": " + e.what());
  }
}

TcpServer::~TcpServer() {
  stop();
}

std::uint16_t TcpServer::port() const {
  return impl_->port;
}

void TcpServer::start() {
  Impl& s = *impl_;
  const std::lock_guard<std::mutex> lock(s.lifecycle_mu);
  if (s.started || s.stopped) return;
  s.started = true;
  s.accept();
  s.thread = std::thread([&s] { s.run(); });
}

void TcpServer::stop() {
  Impl& s = *impl_;
  const std::lock_guard<std::mutex> lock(s.lifecycle_mu);
  if (s.stopped) return;
  s.stopped = true;
  if (!s.started) {
    asio::error_code ignored;
    s.acceptor.close(ignored);
    return;
  }
  asio::post(s.io, [&s] { s.shut_down(); });
  if (s.thread.joinable()) s.thread.join();
}

bool TcpServer::send(ConnectionId id, std::vector<std::uint8_t> frame) {
  Impl& s = *impl_;
  // Posted under the lock: stop() cannot have begun, and joins the I/O
  // thread (which runs or drops the handler) before the server goes.
  const std::lock_guard<std::mutex> lock(s.lifecycle_mu);
  if (!s.started || s.stopped) return false;
  asio::post(s.io, [&s, id, bytes = std::move(frame)] {
    const auto it = s.connections.find(id);
    if (it == s.connections.end() || !it->second->handshaken || it->second->closed) return;
    const ConnectionPtr c = it->second;
    asio::error_code ec;
    c->socket.non_blocking(true, ec);
    std::size_t n = 0;
    if (!ec) n = c->socket.write_some(asio::buffer(bytes), ec);
    if (n == bytes.size()) return;
    if (n == 0 && ec == asio::error::would_block) return;  // dropped: the socket is full
    try {
      s.end(c, false, n > 0 ? "a frame to the rank went out in part" : ec.message());
    } catch (const std::exception&) {
      // The handler failed on the end: the server goes on.
    }
  });
  return true;
}

std::size_t TcpServer::open_connections() const {
  // Two loads, so a connection passing its handshake in between may be seen
  // in both or neither; callers poll.
  return impl_->pending.load() + impl_->handshaken.load();
}

std::size_t TcpServer::handshaken_connections() const {
  return impl_->handshaken.load();
}

std::size_t TcpServer::pending_connections() const {
  return impl_->pending.load();
}

void TcpServer::settle(std::chrono::milliseconds limit) const {
  for (int round = 0; round < 2; ++round) {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> ran = done->get_future();
    asio::post(impl_->io, [done] { done->set_value(); });
    if (ran.wait_for(limit) != std::future_status::ready) return;  // not running, or busy
  }
}

bool TcpServer::backlog_waiting() const {
  const int fd = impl_->listen_fd.load();
  if (fd < 0) return false;
  // A listening socket is readable while its accept queue holds a connection.
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

}  // namespace traceml::transport
