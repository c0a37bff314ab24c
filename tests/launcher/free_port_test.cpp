#include "launcher/free_port.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

namespace traceml::launcher {
namespace {

TEST(EphemeralRange, ReadsTheKernelsTwoNumbers) {
  const auto range = parse_ephemeral_range("32768\t60999\n");
  ASSERT_TRUE(range);
  EXPECT_EQ(range->first, 32768);
  EXPECT_EQ(range->second, 60999);
  EXPECT_TRUE(parse_ephemeral_range("1024 1024"));
}

TEST(EphemeralRange, RefusesWhatIsNotTwoPortsInOrder) {
  for (const char* text : {"", "32768", "60999 32768", "0 100", "1024 65536", "a b",
                           "1024 2048 4096", "-5 10", "99999999999999999999 1"}) {
    EXPECT_FALSE(parse_ephemeral_range(text)) << text;
  }
}

bool listens_on_any(std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(port);
  const bool ok =
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && listen(fd, 1) == 0;
  close(fd);
  return ok;
}

// The ports a busy machine hands out by itself (bind(0), the local end of
// every outgoing connection) come from the ephemeral range: a port picked
// there is the one a parallel test or an unrelated client takes before the
// training's store binds it (CI once lost torchrun's rendezvous that way).
TEST(PickFreePort, PicksBelowTheEphemeralRangeAPortThatAllAddressesCanBind) {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto range = parse_ephemeral_range(text);
  if (!range || range->first < 11000) GTEST_SKIP() << "ephemeral range starts low: " << text;
  std::set<std::uint16_t> seen;
  for (int i = 0; i < 8; ++i) {
    const auto port = pick_free_port();
    ASSERT_TRUE(port);
    EXPECT_GE(*port, 10000);
    EXPECT_LT(*port, range->first);
    EXPECT_NE(*port, 29500);  // MASTER_PORT's usual value
    EXPECT_TRUE(listens_on_any(*port)) << *port;
    seen.insert(*port);
  }
  // Chosen at random: parallel callers do not all get the same port.
  EXPECT_GT(seen.size(), 1u);
}

}  // namespace
}  // namespace traceml::launcher
