#include "transport/tcp_client.hpp"

#include <fcntl.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <asio.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace traceml::transport {
namespace {

using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// "host:port", with IPv6 literals bracketed so that the port stays readable.
std::string address_text(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string ms_text(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

// What the resolver thread hands back. Shared, because the thread outlives a
// connect() that stopped waiting for it.
struct Resolution {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::vector<tcp::endpoint> endpoints;
  std::string error;
};

// The endpoints of `host`, or std::nullopt with `error` set. A numeric address
// needs no lookup. A name is looked up on a detached thread because
// getaddrinfo cannot be cancelled: with an unreachable DNS server it blocks for
// the system resolver's own timeout (tens of seconds), far beyond the deadline
// the sender thread was promised. The thread finishes on its own later.
std::optional<std::vector<tcp::endpoint>> resolve(const std::string& host, std::uint16_t port,
                                                  Clock::time_point deadline, std::string& error) {
  asio::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (!ec) return std::vector<tcp::endpoint>{tcp::endpoint(address, port)};

  auto state = std::make_shared<Resolution>();
  std::thread([state, host, port] {
    std::vector<tcp::endpoint> endpoints;
    std::string failure;
    try {
      asio::io_context io;
      tcp::resolver resolver(io);
      asio::error_code rec;
      const auto results =
          resolver.resolve(host, std::to_string(port), tcp::resolver::numeric_service, rec);
      if (rec) {
        failure = rec.message();
      } else {
        for (const auto& entry : results)
          endpoints.push_back(entry.endpoint());
        if (endpoints.empty()) failure = "no address found";
      }
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "lookup failed";
    }
    const std::lock_guard<std::mutex> lock(state->mu);
    state->endpoints = std::move(endpoints);
    state->error = std::move(failure);
    state->done = true;
    state->cv.notify_all();
  }).detach();

  std::unique_lock<std::mutex> lock(state->mu);
  if (!state->cv.wait_until(lock, deadline, [&] { return state->done; })) {
    error = "cannot resolve " + host + ": the lookup did not finish in time";
    return std::nullopt;
  }
  if (!state->error.empty()) {
    error = "cannot resolve " + host + ": " + state->error;
    return std::nullopt;
  }
  return std::move(state->endpoints);
}

}  // namespace

struct TcpClient::Impl {
  asio::io_context io;
  tcp::socket socket{io};
  std::string peer;  // "host:port" of the current or last connection, for messages
  std::string error;

  // Runs the io_context until the one pending operation has completed (its
  // handler sets `done`) or `deadline` passes. On the deadline the socket is
  // closed, or with `keep_socket` the operation cancelled, and its
  // completion (operation_aborted, and what it did so far) is run too, so no
  // handler is left referring to the caller's stack. Returns whether the
  // operation finished before the deadline.
  //
  // Cancelling keeps the socket only for a single reactor operation
  // (async_write_some): a composed one (async_connect over several
  // addresses, async_write) takes operation_aborted from one step and
  // starts the next, uncancelled, which could then wait for minutes.
  bool run_until(Clock::time_point deadline, const bool& done, bool keep_socket = false) {
    io.restart();
    io.run_until(deadline);
    if (done) return true;
    asio::error_code ignored;
    if (keep_socket) {
      socket.cancel(ignored);
    } else {
      socket.close(ignored);
    }
    io.restart();
    io.run();
    return false;
  }

  void close_socket() {
    asio::error_code ignored;
    socket.close(ignored);
  }
};

TcpClient::TcpClient() : impl_(std::make_unique<Impl>()) {}

TcpClient::~TcpClient() = default;

bool TcpClient::connect(const std::string& host, std::uint16_t port,
                        std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  try {
    s.close_socket();
    s.error.clear();
    s.peer = address_text(host, port);
    const Clock::time_point deadline = Clock::now() + timeout;

    std::optional<std::vector<tcp::endpoint>> endpoints = resolve(host, port, deadline, s.error);
    if (!endpoints) return false;

    bool done = false;
    asio::error_code result;
    // Tries every address of the name in turn (IPv4 and IPv6 alike).
    asio::async_connect(s.socket, *endpoints,
                        [&](const asio::error_code& ec, const tcp::endpoint&) {
                          done = true;
                          result = ec;
                        });
    if (!s.run_until(deadline, done)) {
      s.close_socket();
      s.error = "cannot connect to " + s.peer + ": no answer within " + ms_text(timeout);
      return false;
    }
    if (result) {
      s.close_socket();
      s.error = "cannot connect to " + s.peer + ": " + result.message();
      return false;
    }
    // Batches go out in one write each; without Nagle the last partial segment
    // of a batch is not held back waiting for the collector's delayed ACK.
    // Keepalive lets a vanished collector host be noticed on an idle stream.
    asio::error_code ignored;
    s.socket.set_option(tcp::no_delay(true), ignored);
    s.socket.set_option(asio::socket_base::keep_alive(true), ignored);
    // A program the rank starts (system(), popen()) must not hold the
    // collector's connection open after the rank has gone.
    ::fcntl(s.socket.native_handle(), F_SETFD, FD_CLOEXEC);
    return true;
  } catch (const std::exception& e) {
    s.close_socket();
    s.error = "cannot connect to " + s.peer + ": " + e.what();
    return false;
  } catch (...) {
    s.close_socket();
    s.error = "cannot connect to " + s.peer + ": unknown failure";
    return false;
  }
}

std::optional<std::size_t> TcpClient::send_some(const std::uint8_t* data, std::size_t n,
                                                std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  if (!s.socket.is_open()) {
    s.error = "send to " + s.peer + " failed: not connected";
    return std::nullopt;
  }
  if (n == 0) return 0;
  try {
    // One async_write_some at a time, so that the deadline cancels the one
    // write in flight and the socket stays usable.
    const Clock::time_point deadline = Clock::now() + timeout;
    std::size_t written = 0;
    while (written < n) {
      bool done = false;
      asio::error_code result;
      std::size_t k = 0;
      // Asio sends with MSG_NOSIGNAL on Linux: a peer that has gone away
      // makes this fail with EPIPE instead of raising SIGPIPE in the
      // training process, whose signal dispositions are left as set.
      s.socket.async_write_some(asio::buffer(data + written, n - written),
                                [&](const asio::error_code& ec, std::size_t taken) {
                                  done = true;
                                  result = ec;
                                  k = taken;
                                });
      const bool in_time = s.run_until(deadline, done, true);
      written += k;
      if (result && result != asio::error::operation_aborted) {
        s.close_socket();
        s.error = "send to " + s.peer + " failed: " + result.message();
        return std::nullopt;
      }
      if (!in_time || result) break;  // the deadline: the rest goes later
    }
    if (written < n)
      s.error = "send to " + s.peer + ": the peer took " + std::to_string(written) + " of " +
                std::to_string(n) + " bytes in " + ms_text(timeout);
    return written;
  } catch (const std::exception& e) {
    s.close_socket();
    s.error = "send to " + s.peer + " failed: " + e.what();
    return std::nullopt;
  } catch (...) {
    s.close_socket();
    s.error = "send to " + s.peer + " failed: unknown failure";
    return std::nullopt;
  }
}

bool TcpClient::send_all(const std::uint8_t* data, std::size_t n,
                         std::chrono::milliseconds timeout) {
  const std::optional<std::size_t> written = send_some(data, n, timeout);
  if (!written) return false;
  if (*written == n) return true;
  // A frame cut here would be misread: the connection cannot be used again.
  impl_->close_socket();
  impl_->error = "send to " + impl_->peer + " timed out after " + ms_text(timeout) + " (" +
                 std::to_string(*written) + " of " + std::to_string(n) + " bytes written)";
  return false;
}

std::optional<std::size_t> TcpClient::receive_some(std::uint8_t* data, std::size_t n,
                                                   std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  if (!s.socket.is_open()) {
    s.error = "receive from " + s.peer + " failed: not connected";
    return std::nullopt;
  }
  if (n == 0) return 0;
  // A plain poll() and recv(): the sender reads a few bytes now and then
  // (the collector's answers), never while a write of its own is pending.
  pollfd p{s.socket.native_handle(), POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, timeout.count())));
  if (ready == 0 || (ready < 0 && errno == EINTR)) return 0;
  const ssize_t k = ready > 0 ? ::recv(p.fd, data, n, MSG_DONTWAIT) : -1;
  if (k > 0) return static_cast<std::size_t>(k);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  s.error = k == 0 ? "the collector at " + s.peer + " closed the connection"
                   : "receive from " + s.peer + " failed: " + std::strerror(errno);
  s.close_socket();
  return std::nullopt;
}

void TcpClient::close() {
  impl_->close_socket();
}

bool TcpClient::connected() const {
  return impl_->socket.is_open();
}

const std::string& TcpClient::error() const {
  return impl_->error;
}

}  // namespace traceml::transport
