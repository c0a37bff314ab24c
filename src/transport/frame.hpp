// Length-prefixed binary frames of the telemetry transport, and an incremental
// decoder that cuts a byte stream into frames and rejects malformed input
// (docs/transport.md). Pure: no sockets, no I/O, never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace traceml::transport {

/// What a frame's payload holds. Serialized values are stable: never renumber,
/// never reuse a retired value. A record's frame type is its kind's frame
/// byte (model/record_kinds.hpp); the names here are for readers and tests,
/// and a new kind needs none (transport::frame_type_of).
enum class FrameType : std::uint8_t {
  Hello = 1,        ///< first frame of a connection: protocol version, token, rank identity
  Step = 2,         ///< one model::StepRecord
  StepMemory = 3,   ///< one model::StepMemoryRecord
  System = 4,       ///< one model::SystemSample
  Process = 5,      ///< one model::ProcessSample
  Bye = 6,          ///< clean end of a rank's stream; empty payload
  TracerStats = 7,  ///< one model::TracerStats: the rank's own counters and cost
  Heartbeat = 8,    ///< one model::RankPosition, every interval (protocol 2)
  /// Collector to rank: the answer to a Hello of protocol 4 or later,
  /// accepted or refused with the reason (transport::Verdict).
  Verdict = 9,
};

/// The storage name of a frame type, for error messages and logs.
const char* frame_type_name(FrameType t);
/// The frame type of a header byte; std::nullopt for a value we do not know.
std::optional<FrameType> frame_type_from_byte(std::uint8_t b);

/// Version of the frame header and payload encodings, carried in every frame
/// header so that a peer built from another release is rejected on its first
/// frame instead of being misread.
inline constexpr std::uint8_t kCodecVersion = 1;

/// Header: u32 little-endian payload length, u8 frame type, u8 codec version.
inline constexpr std::size_t kHeaderBytes = 6;

/// Largest payload a frame may carry. The biggest record (a SystemSample with
/// the maximum number of GPUs) is a few KiB; 1 MiB leaves room for batching
/// later while a corrupt or hostile length cannot make the collector allocate
/// gigabytes: the decoder buffers at most one header plus one such payload.
inline constexpr std::size_t kMaxFrameBytes = std::size_t{1} << 20;

struct Frame {
  FrameType type = FrameType::Bye;
  std::vector<std::uint8_t> payload;
};

/// Appends a frame of `type` to `out` with the payload that `put_payload`
/// appends to `out` after the header: no buffer of its own, so a sender
/// batches frames without an allocation each. Returns the frame's size, or 0
/// when the payload is larger than kMaxFrameBytes (then nothing is appended).
template <typename F>
std::size_t append_frame(std::vector<std::uint8_t>& out, FrameType type, F&& put_payload) {
  const std::size_t at = out.size();
  out.resize(at + kHeaderBytes);
  put_payload(out);
  const std::size_t payload = out.size() - at - kHeaderBytes;
  if (payload > kMaxFrameBytes) {
    out.resize(at);
    return 0;
  }
  const auto n = static_cast<std::uint32_t>(payload);
  for (std::size_t i = 0; i < 4; ++i)
    out[at + i] = static_cast<std::uint8_t>(n >> (8 * i));
  out[at + 4] = static_cast<std::uint8_t>(type);
  out[at + 5] = kCodecVersion;
  return kHeaderBytes + payload;
}

/// Header + payload, ready to write to a socket; std::nullopt when the payload
/// is larger than kMaxFrameBytes (the peer's decoder would reject it).
std::optional<std::vector<std::uint8_t>> encode_frame(FrameType type,
                                                      const std::vector<std::uint8_t>& payload);

/// Cuts a byte stream into frames. Feed bytes as they arrive, take frames with
/// next(), call finish() at end of stream. Malformed input (a length over the
/// payload limit, an unknown type, another codec version, a stream that ends
/// inside a frame) puts the decoder into a sticky error state: next() returns
/// nothing more and error() says why in one line. Frames before the bad bytes
/// are still delivered, so the result does not depend on how the stream was
/// chunked.
///
/// Memory is bounded and follows what arrives: at most kHeaderBytes plus the
/// payload limit (kMaxFrameBytes unless set lower) is buffered, and nothing is
/// reserved up front. feed() accepts only what fits; the caller drains next()
/// and feeds the rest:
///
///   while (n > 0) { auto k = d.feed(p, n); p += k; n -= k;
///                   while (auto f = d.next()) handle(*f);
///                   if (d.failed()) break; }
class FrameDecoder {
 public:
  /// `max_payload_bytes` (capped at kMaxFrameBytes) is the longest payload a
  /// header may announce; a longer one fails the decoder at once.
  explicit FrameDecoder(std::size_t max_payload_bytes = kMaxFrameBytes);

  /// Changes the payload limit for the headers not yet accepted. The server
  /// starts a connection with a small limit (a Hello is tiny) and raises it to
  /// kMaxFrameBytes once the Hello has passed.
  void set_max_payload_bytes(std::size_t n);
  [[nodiscard]] std::size_t max_payload_bytes() const { return max_payload_; }

  /// Buffers up to `n` bytes of `data` and returns how many it took. Once the
  /// decoder has failed it takes everything and keeps nothing; bytes fed after
  /// finish() are an error.
  std::size_t feed(const std::uint8_t* data, std::size_t n);

  /// The next complete frame, or std::nullopt when more bytes are needed, the
  /// stream is exhausted, or the decoder has failed (see failed()).
  std::optional<Frame> next();

  /// Marks the end of the stream. Call after draining next(): bytes left that
  /// do not form a complete frame are a truncated frame, an error. Returns
  /// !failed(). Frames still buffered remain available through next().
  bool finish();

  [[nodiscard]] bool failed() const { return error_.has_value(); }
  /// The one-line reason of the failure; empty when the decoder has not failed.
  [[nodiscard]] const std::string& error() const;
  /// Bytes buffered and not yet returned as frames.
  [[nodiscard]] std::size_t buffered() const { return buf_.size() - pos_; }

 private:
  enum class Head { NeedMore, Bad, Ready };
  /// Validates the header at pos_ (setting error_ when it is bad) and reports
  /// whether the whole frame is buffered.
  Head check_head();
  void fail(std::string reason);

  std::vector<std::uint8_t> buf_;
  std::size_t max_payload_ = kMaxFrameBytes;
  std::size_t pos_ = 0;  // start of the first frame not yet returned
  bool finished_ = false;
  std::optional<std::string> error_;
};

}  // namespace traceml::transport
