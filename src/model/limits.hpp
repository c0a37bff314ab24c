// Limits that more than one module enforces: the launcher's flags, the
// runtime's environment and the collector's Hello must agree on them, and
// model/ is the one module all three include.
#pragma once

#include <cstdint>

namespace traceml::model {

/// The largest rank number (and world size) traceml accepts anywhere: far
/// beyond any cluster, small enough that a rank number fits an int and a
/// per-rank table stays allocatable.
inline constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 24;

}  // namespace traceml::model
