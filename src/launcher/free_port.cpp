#include "launcher/free_port.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

namespace traceml::launcher {

namespace {

// Ports that launchers use by default (TCPStore's MASTER_PORT, torchrun's
// standalone rendezvous, traceml serve): free now, but another job of the
// same machine is likely to ask for them by name.
constexpr std::uint16_t kDefaultsOfOthers[] = {29400, 29500, 29765};

/// Whether a listening socket of `family` could bind `port` on every address.
bool can_bind_any(int family, std::uint16_t port) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return family == AF_INET6;  // no IPv6 here: nothing to collide with
  int rc;
  if (family == AF_INET6) {
    const int only = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof only);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(port);
    rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  }
  close(fd);
  return rc == 0;
}

std::optional<std::uint16_t> port_the_system_hands_out() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  std::optional<std::uint16_t> port;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

std::optional<std::pair<std::uint16_t, std::uint16_t>> parse_ephemeral_range(
    const std::string& text) {
  std::istringstream in(text);
  long low = 0;
  long high = 0;
  if (!(in >> low >> high)) return std::nullopt;
  std::string rest;
  if (in >> rest) return std::nullopt;
  if (low < 1 || high > 65535 || low > high) return std::nullopt;
  return std::make_pair(static_cast<std::uint16_t>(low), static_cast<std::uint16_t>(high));
}

std::optional<std::uint16_t> pick_free_port() {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto range = parse_ephemeral_range(text);
  // Below the range, above the well-known and the commonly registered ports.
  constexpr int kFloor = 10000;
  const int ceiling = range ? static_cast<int>(range->first) : 32768;
  if (ceiling - kFloor >= 1000) {
    std::random_device seed;
    std::mt19937 gen(seed());
    std::uniform_int_distribution<int> pick(kFloor, ceiling - 1);
    for (int tries = 0; tries < 64; ++tries) {
      const auto port = static_cast<std::uint16_t>(pick(gen));
      bool taken_by_default = false;
      for (const std::uint16_t d : kDefaultsOfOthers)
        taken_by_default |= port == d;
      if (taken_by_default) continue;
      if (can_bind_any(AF_INET, port) && can_bind_any(AF_INET6, port)) return port;
    }
  }
  return port_the_system_hands_out();
}

}  // namespace traceml::launcher
