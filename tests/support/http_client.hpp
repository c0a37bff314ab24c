// A plain HTTP/1.1 client over a real socket, for the tests of the metrics
// endpoint: what Prometheus does (GET, read the reply), and what a hostile
// peer does (a huge request, a slow one, idle connections, no reading).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace traceml::testing {

/// A connected socket to 127.0.0.1:`port`, closed on destruction (-1: none).
class Socket {
 public:
  explicit Socket(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] bool ok() const { return fd_ >= 0; }

  /// Sends all of `s`; false when the peer closed (or reset) the connection.
  bool send(const std::string& s) const {
    std::size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += std::size_t(n);
    }
    return true;
  }
  /// Reads until the peer closes, `want` bytes arrived, or `timeout`.
  /// `closed` says whether the peer closed.
  std::string read(std::chrono::milliseconds timeout, bool* closed = nullptr,
                   std::size_t want = std::size_t(-1)) const {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + timeout;
    if (closed != nullptr) *closed = false;
    while (out.size() < want) {
      const auto left = end - std::chrono::steady_clock::now();
      if (left.count() <= 0) break;
      // At least a millisecond: a timeout under one still polls once.
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, int(ms)) <= 0) break;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        if (closed != nullptr) *closed = true;
        break;
      }
      out.append(buf, std::size_t(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
};

struct HttpReply {
  int status = 0;  ///< 0: no reply
  std::string head;
  std::string body;
};

/// `method` `path` on 127.0.0.1:`port`, Connection: close; the whole reply.
inline HttpReply http_request(std::uint16_t port, const std::string& path,
                              const std::string& method = "GET",
                              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  HttpReply r;
  Socket s(port);
  if (!s.ok() ||
      !s.send(method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"))
    return r;
  const std::string all = s.read(timeout);
  const auto split = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.", 0) != 0 || split == std::string::npos) return r;
  r.status = std::stoi(all.substr(9, 3));
  r.head = all.substr(0, split);
  r.body = all.substr(split + 4);
  return r;
}

}  // namespace traceml::testing
