// The collector's side of the telemetry connection: listens, accepts many
// ranks at once, checks each connection's Hello (protocol version and run
// token) within a deadline, cuts the stream into frames and hands them to a
// handler. A connection that sends garbage, an oversized frame, a wrong token,
// or nothing in time is closed and reported; the others carry on. What a peer
// without the token can cost is bounded: a few connections waiting for their
// Hello (kMaxPendingConnections), 4 KiB buffered each (kMaxPreHelloFrameBytes),
// for at most the Hello timeout (docs/transport.md, "Limits").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "transport/frame.hpp"
#include "transport/hello.hpp"

namespace traceml::transport {

/// The server cannot listen. what() is one line naming the address and the fix.
class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Connections that have not passed the handshake yet, at most, by default.
/// A rank's connection is in that state for one round trip (its Hello follows
/// the connect at once), so even a burst of ranks connecting together stays
/// far below 64, while a peer without the token that opens connections and
/// sends nothing holds at most 64 of them (64 x 4 KiB of buffers). A rank
/// caught beyond the cap in a burst is closed like any refused connection; its
/// sender reconnects after its back-off and resends what it buffered, so the
/// cap costs it a delay, not data.
inline constexpr std::size_t kMaxPendingConnections = 64;

/// Why a connection was refused before or at the handshake. The collector
/// counts refusals by kind (rejection_name) and keeps a few in detail.
enum class Rejection {
  TooManyPending,     ///< ServerOptions::max_pending connections were already waiting
  HelloTimeout,       ///< no valid Hello within ServerOptions::hello_timeout
  ClosedBeforeHello,  ///< the peer closed before its Hello was whole
  BadFrame,           ///< oversized frame, unknown frame type or codec version
  NotHello,           ///< the first frame was of another type
  MalformedHello,
  ProtocolVersion,
  WrongToken,
  ConnectionError,  ///< the socket failed (reset by the peer, say)
};

/// The snake_case name of a rejection kind ("wrong_token"), as stored.
const char* rejection_name(Rejection r);

struct ServerOptions {
  std::string bind_host = "127.0.0.1";
  std::uint16_t port = 0;  ///< 0: the system picks a free port (see TcpServer::port())
  std::string token;       ///< the run token every Hello must carry
  /// A connection that has not sent a valid Hello by then is closed.
  std::chrono::milliseconds hello_timeout{5000};
  /// Connections accepted and not through the handshake yet, at most; one
  /// more is closed at once and rejected (Rejection::TooManyPending).
  std::size_t max_pending = kMaxPendingConnections;
};

/// Identifies one accepted connection for the handler's calls.
using ConnectionId = std::uint64_t;

/// A handler's answer to a Hello that passed the handshake.
struct HelloReply {
  /// Set: the identity is refused, and why (the connection is closed).
  std::optional<std::string> refused;
  /// Protocol 4: the records of the Hello's stream already received
  /// (Verdict::resume_from).
  std::uint64_t resume_from = 0;
};

/// Receives what the server reads. Every call comes from the server's one I/O
/// thread, in order per connection; a handler must not block for long.
class ServerHandler {
 public:
  virtual ~ServerHandler() = default;
  /// A connection passed the handshake. `peer` is "address:port". Returning
  /// a reason closes the connection at once: the handler refuses the
  /// identity the Hello gives (it still hears of the end through on_closed).
  /// A Hello that resumes a stream (same global rank, same stream) still
  /// open on another connection ends that one first (on_closed, not clean):
  /// nothing more is read from it, so the resume point is final.
  virtual HelloReply on_hello(ConnectionId id, const Hello& hello, const std::string& peer) = 0;
  /// A frame after the Hello (never a Hello; a Bye too). Returning a reason
  /// closes the connection: the handler found the payload malformed.
  virtual std::optional<std::string> on_frame(ConnectionId id, const Frame& frame) = 0;
  /// The frames of one read from a connection were all handed to on_frame:
  /// a handler that gathers what on_frame gives (to take a lock once for
  /// many records) hands it on here. Also called when on_frame closed the
  /// connection half way through a read.
  virtual void on_read_end() {}
  /// A connection that passed the handshake ended: `clean` when it said Bye
  /// before closing; `reason` says why otherwise (peer closed, decode error).
  virtual void on_closed(ConnectionId id, bool clean, const std::string& reason) = 0;
  /// A connection was refused before or at the handshake (wrong token, bad
  /// frame, no Hello in time, too many waiting). `reason` is one line.
  virtual void on_rejected(const std::string& peer, Rejection kind, const std::string& reason) = 0;
};

class TcpServer {
 public:
  /// Binds and listens; throws TransportError when it cannot
  /// ("cannot listen on 127.0.0.1:29765: address in use (pick another --aggregator-port)").
  TcpServer(const ServerOptions& options, ServerHandler& handler);
  /// Stops (as stop()).
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  /// The port listened on (the chosen one when options.port was 0).
  [[nodiscard]] std::uint16_t port() const;
  /// Starts the I/O thread that accepts and reads.
  void start();
  /// Stops accepting, closes every connection (reporting on_closed for those
  /// that passed the handshake), joins the I/O thread. Idempotent.
  void stop();
  /// Writes `frame` (one whole encoded frame of a few dozen bytes: a
  /// ProfileRequest) to connection `id`, from any thread: the I/O thread
  /// writes it when it gets to it, whole or not at all, without a write
  /// queue (the collector sends a rank next to nothing: its socket buffer
  /// is empty). Returns false when the server is not running; a frame for
  /// a connection closed meanwhile, or one the socket cannot take now, is
  /// dropped, and one it took only in part ends the connection (the rank
  /// reconnects and resumes: nothing of its records is lost).
  bool send(ConnectionId id, std::vector<std::uint8_t> frame);
  /// Connections accepted and not yet closed, handshake passed or not.
  [[nodiscard]] std::size_t open_connections() const;
  /// Open connections that passed the handshake: the ranks still sending.
  [[nodiscard]] std::size_t handshaken_connections() const;
  /// Open connections still waiting for their Hello (at most max_pending).
  [[nodiscard]] std::size_t pending_connections() const;
  /// Whether a connection waits in the listen backlog, not yet accepted (the
  /// I/O thread has not got to it). Callable from any thread.
  [[nodiscard]] bool backlog_waiting() const;
  /// Waits (at most `limit` a round) until the I/O thread has handled what it
  /// had taken in when this was called: a connection it already took from the
  /// backlog, whose accept handler has not run yet, is then counted in
  /// pending_connections(). Two round trips through its queue, since a
  /// completion the reactor holds joins the queue after a handler posted
  /// meanwhile. Callable from any thread but the I/O thread.
  void settle(std::chrono::milliseconds limit) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace traceml::transport
