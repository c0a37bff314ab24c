// Payload encoding of the records of model/record_kinds.hpp: compact
// little-endian binary, presence bits for optional values (absent is not 0),
// u16-length strings. A kind is laid out by its field list
// (transport/record_layout.hpp) unless it declares a layout of its own below
// (the step and the heartbeat). decode is strict: any malformed payload
// (short, trailing bytes, unknown presence bits, an over-long string or GPU
// list) gives std::nullopt, never an exception or an out-of-bounds read. The
// layout is in docs/transport.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/position.hpp"
#include "model/record_kinds.hpp"
#include "model/telemetry.hpp"
#include "transport/frame.hpp"
#include "transport/record_layout.hpp"

namespace traceml::transport {

/// The frame type that carries kind R (its row's frame byte).
template <class R>
constexpr FrameType frame_type_of() {
  static_assert(model::row_of<R>().frame != 0, "a kind without a frame of its own");
  return static_cast<FrameType>(model::row_of<R>().frame);
}

/// Appends the payload of `r` to `out`: a sender builds its batch with
/// append_frame and these, without a buffer per record.
template <class R>
void encode_into(std::vector<std::uint8_t>& out, const R& r) {
  layout::put(out, r);
}

/// The payload of `r` in a buffer of its own.
template <class R>
std::vector<std::uint8_t> encode(const R& r) {
  std::vector<std::uint8_t> out;
  encode_into(out, r);
  return out;
}

/// A payload of kind R; std::nullopt when it is malformed.
template <class R>
std::optional<R> decode(const std::vector<std::uint8_t>& payload) {
  return layout::get<R>(payload);
}

// Kinds with a layout of their own (record_codec.cpp says it).
template <>
void encode_into<model::StepRecord>(std::vector<std::uint8_t>& out, const model::StepRecord& s);
template <>
std::optional<model::StepRecord> decode<model::StepRecord>(
    const std::vector<std::uint8_t>& payload);
/// Heartbeat payload: i32 global rank, f64 unix seconds, i64 steps done, u8
/// loop phase, u8 flags (bit 0: the rank records steps). Written by hand and
/// checked here (a phase past kMaxLoopPhase, a negative or non-finite number,
/// an unknown flag or trailing bytes fail the decode).
template <>
void encode_into<model::RankPosition>(std::vector<std::uint8_t>& out, const model::RankPosition& p);
template <>
std::optional<model::RankPosition> decode<model::RankPosition>(
    const std::vector<std::uint8_t>& payload);

/// The payload of any record whose kind has a frame; false (nothing
/// appended) for a kind without one.
bool encode_into(std::vector<std::uint8_t>& out, const model::Record& r);

/// The record a frame carries: the kind whose frame byte is the frame's
/// type. std::nullopt for a malformed payload, or a frame that carries no
/// record (Hello, Bye).
std::optional<model::Record> decode(const Frame& frame);

/// Appends a whole frame of `r` (header and payload) to `out`. Returns its
/// size, or 0 when it is over kMaxFrameBytes (then nothing is appended).
template <class R>
std::size_t append_record_frame(std::vector<std::uint8_t>& out, const R& r) {
  return append_frame(out, frame_type_of<R>(),
                      [&r](std::vector<std::uint8_t>& o) { encode_into(o, r); });
}

}  // namespace traceml::transport
