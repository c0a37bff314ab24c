// Payload encoding of the telemetry records (model/telemetry.hpp) carried by
// Step, StepMemory, System and Process frames: compact little-endian binary,
// presence bits for optional values (absent is not 0), u16-length strings.
// decode_* is strict: any malformed payload (short, trailing bytes, unknown
// presence bits, an over-long string or GPU list) gives std::nullopt, never an
// exception or an out-of-bounds read. The layout is in docs/transport.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/position.hpp"
#include "model/telemetry.hpp"

namespace traceml::transport {

/// Longest string (hostname, device, token) on the wire. Linux host names stop
/// at 64 bytes and DNS names at 253; 1 KiB is generous and keeps one string from
/// filling a frame. encode_* cuts a longer string to this length.
inline constexpr std::size_t kMaxStringBytes = 1024;

/// Most GPUs in one SystemSample. The largest nodes carry 16; encode_* sends the
/// first kMaxGpusPerSample of a longer list, which keeps every record far below
/// kMaxFrameBytes.
inline constexpr std::size_t kMaxGpusPerSample = 256;

std::vector<std::uint8_t> encode_step(const model::StepRecord& r);
std::optional<model::StepRecord> decode_step(const std::vector<std::uint8_t>& payload);

std::vector<std::uint8_t> encode_step_memory(const model::StepMemoryRecord& r);
std::optional<model::StepMemoryRecord> decode_step_memory(const std::vector<std::uint8_t>& payload);

std::vector<std::uint8_t> encode_system(const model::SystemSample& s);
std::optional<model::SystemSample> decode_system(const std::vector<std::uint8_t>& payload);

std::vector<std::uint8_t> encode_process(const model::ProcessSample& s);
std::optional<model::ProcessSample> decode_process(const std::vector<std::uint8_t>& payload);

/// Heartbeat payload: i32 global rank, f64 unix seconds, i64 steps done, u8
/// loop phase, u8 flags (bit 0: the rank records steps). Not a stored record:
/// written by hand, checked here (a phase past kMaxLoopPhase, a negative or
/// non-finite number, an unknown flag or trailing bytes fail the decode).
std::vector<std::uint8_t> encode_heartbeat(const model::RankPosition& p);
std::optional<model::RankPosition> decode_heartbeat(const std::vector<std::uint8_t>& payload);

std::vector<std::uint8_t> encode_tracer_stats(const model::TracerStats& s);
std::optional<model::TracerStats> decode_tracer_stats(const std::vector<std::uint8_t>& payload);

/// The payloads above appended to `out` instead of a buffer of their own: a
/// sender builds its batch with transport::append_frame and these.
void encode_step_into(std::vector<std::uint8_t>& out, const model::StepRecord& r);
void encode_step_memory_into(std::vector<std::uint8_t>& out, const model::StepMemoryRecord& r);
void encode_system_into(std::vector<std::uint8_t>& out, const model::SystemSample& s);
void encode_process_into(std::vector<std::uint8_t>& out, const model::ProcessSample& s);

/// A rank identity on its own, as carried inside a Hello payload.
std::vector<std::uint8_t> encode_rank_identity(const model::RankIdentity& id);
std::optional<model::RankIdentity> decode_rank_identity(const std::vector<std::uint8_t>& payload);

}  // namespace traceml::transport
