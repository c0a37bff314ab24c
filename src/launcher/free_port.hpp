// A TCP port nobody listens on now, for `--master-port 0` (the training's own
// rendezvous port, which the ranks open themselves). Another process may take
// it before the ranks do; single-node runs and tests accept that small race.
#pragma once

#include <cstdint>
#include <optional>

namespace traceml::launcher {

/// A port the system hands out for 127.0.0.1:0; std::nullopt if it cannot.
std::optional<std::uint16_t> pick_free_port();

}  // namespace traceml::launcher
