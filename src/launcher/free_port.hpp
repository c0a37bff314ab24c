// A TCP port nobody listens on now, for `--master-port 0` (the training's own
// rendezvous port, which the ranks open themselves) and for tests. Another
// process may take it before the ranks do; the pick makes that unlikely:
// it comes from below the kernel's ephemeral range, where the system never
// hands out ports for bind(0) or the local end of an outgoing connection (a
// busy machine does both all the time), and it is free on every address.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace traceml::launcher {

/// A port that 0.0.0.0 and [::] can bind now, chosen at random below the
/// ephemeral range; failing that, one the system hands out for 127.0.0.1:0.
/// std::nullopt if it cannot find any.
std::optional<std::uint16_t> pick_free_port();

/// The ephemeral range from the text of /proc/sys/net/ipv4/ip_local_port_range
/// ("32768\t60999\n"); std::nullopt when the text is not two ports in order.
std::optional<std::pair<std::uint16_t, std::uint16_t>> parse_ephemeral_range(
    const std::string& text);

}  // namespace traceml::launcher
