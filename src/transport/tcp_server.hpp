// The collector's side of the telemetry connection: listens, accepts many
// ranks at once, checks each connection's Hello (protocol version and run
// token) within a deadline, cuts the stream into frames and hands them to a
// handler. A connection that sends garbage, an oversized frame, a wrong token,
// or nothing in time is closed and reported; the others carry on.
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

struct ServerOptions {
  std::string bind_host = "127.0.0.1";
  std::uint16_t port = 0;  ///< 0: the system picks a free port (see TcpServer::port())
  std::string token;       ///< the run token every Hello must carry
  /// A connection that has not sent a valid Hello by then is closed.
  std::chrono::milliseconds hello_timeout{5000};
};

/// Identifies one accepted connection for the handler's calls.
using ConnectionId = std::uint64_t;

/// Receives what the server reads. Every call comes from the server's one I/O
/// thread, in order per connection; a handler must not block for long.
class ServerHandler {
 public:
  virtual ~ServerHandler() = default;
  /// A connection passed the handshake. `peer` is "address:port".
  virtual void on_hello(ConnectionId id, const Hello& hello, const std::string& peer) = 0;
  /// A frame after the Hello (never a Hello; a Bye too). Returning a reason
  /// closes the connection: the handler found the payload malformed.
  virtual std::optional<std::string> on_frame(ConnectionId id, const Frame& frame) = 0;
  /// A connection that passed the handshake ended: `clean` when it said Bye
  /// before closing; `reason` says why otherwise (peer closed, decode error).
  virtual void on_closed(ConnectionId id, bool clean, const std::string& reason) = 0;
  /// A connection was refused before or at the handshake (wrong token, bad
  /// frame, no Hello in time).
  virtual void on_rejected(const std::string& peer, const std::string& reason) = 0;
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
  /// Connections accepted and not yet closed, handshake passed or not.
  [[nodiscard]] std::size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace traceml::transport
