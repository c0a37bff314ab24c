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

/// The most steps one profile covers (--profile-steps A:B): a profile of
/// every operator is meant for a few slow steps, and its size grows with them.
inline constexpr std::int64_t kMaxProfileSteps = 1000;
/// The most ops one profile keeps; past it the rank cuts the profile and says
/// how many it left out (about 100 bytes each on the wire, 200 in the file).
inline constexpr std::int64_t kMaxProfileOps = std::int64_t{1} << 20;
/// The most ops one chunk of a profile carries (the wire's list count is a
/// u16; with names and shapes at most 1 KiB each a chunk stays below a frame).
inline constexpr std::int64_t kMaxProfileChunkOps = 256;

}  // namespace traceml::model
