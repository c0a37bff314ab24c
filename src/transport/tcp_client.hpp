// The rank's side of the telemetry connection: a TCP client whose every call
// has a deadline, so that a dead, slow or unreachable collector costs the
// sender thread a bounded wait and never the training thread anything. Writes
// never raise SIGPIPE. Never throws.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace traceml::transport {

class TcpClient {
 public:
  TcpClient();
  ~TcpClient();
  TcpClient(const TcpClient&) = delete;
  TcpClient& operator=(const TcpClient&) = delete;

  /// Resolves `host` and connects within `timeout`. Closes any previous
  /// connection first. On failure returns false and error() says why in one line.
  bool connect(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout);
  /// Writes all `n` bytes within `timeout`. On failure (peer gone, timeout)
  /// closes the connection, returns false and sets error().
  bool send_all(const std::uint8_t* data, std::size_t n, std::chrono::milliseconds timeout);
  /// Writes as much of the `n` bytes as the peer takes within `timeout` and
  /// returns how many went out. A slow peer is not a failure: the connection
  /// stays open, and the caller writes the rest later (a frame cut here is
  /// whole once the rest follows). On failure (peer gone, reset) closes the
  /// connection, returns std::nullopt and sets error().
  std::optional<std::size_t> send_some(const std::uint8_t* data, std::size_t n,
                                       std::chrono::milliseconds timeout);
  /// Reads what the peer has sent, up to `n` bytes, waiting at most
  /// `timeout` for the first byte (0: only what is there). Returns how many
  /// were read (0: none yet). When the peer has closed, or on failure,
  /// closes the connection, returns std::nullopt and sets error().
  std::optional<std::size_t> receive_some(std::uint8_t* data, std::size_t n,
                                          std::chrono::milliseconds timeout);
  /// Closes the connection (a no-op when not connected).
  void close();
  [[nodiscard]] bool connected() const;
  /// The last failure, one line; empty when none.
  [[nodiscard]] const std::string& error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace traceml::transport
