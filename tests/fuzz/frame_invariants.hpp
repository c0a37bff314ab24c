// What the transport promises about any input, checked on one input: the
// frame decoder's verdict does not depend on how the stream is chunked, its
// frames are exactly the bytes it was fed, and every payload decoder accepts
// only what its encoder writes (the encoding is canonical). Shared by the
// fuzz target fuzz_frame and the corpus replay of tests/transport/frame_test.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "model/record_kinds.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"
#include "transport/record_codec.hpp"

namespace traceml::fuzz {

using Bytes = std::vector<std::uint8_t>;

/// What one pass of the decoder over a stream gave.
struct StreamResult {
  std::vector<transport::Frame> frames;
  bool failed = false;
  std::string error;
};

/// Feeds `stream` in chunks of `chunk` bytes the way frame.hpp prescribes,
/// draining frames as it goes, then finish(). std::nullopt when the decoder
/// broke a promise on the way (buffered too much, failed without a reason).
inline std::optional<StreamResult> decode_stream(const Bytes& stream, std::size_t chunk) {
  transport::FrameDecoder d;
  StreamResult out;
  std::size_t at = 0;
  while (at < stream.size() && !d.failed()) {
    std::size_t n = std::min(chunk, stream.size() - at);
    while (n > 0) {
      const std::size_t took = d.feed(stream.data() + at, n);
      if (took > n) return std::nullopt;
      at += took;
      n -= took;
      if (d.buffered() > transport::kHeaderBytes + transport::kMaxFrameBytes) return std::nullopt;
      const std::size_t before = out.frames.size();
      while (auto f = d.next())
        out.frames.push_back(std::move(*f));
      if (d.failed()) break;
      // A decoder that takes nothing and delivers nothing would spin forever.
      if (took == 0 && out.frames.size() == before) return std::nullopt;
    }
  }
  const bool finished = d.finish();
  while (auto f = d.next())
    out.frames.push_back(std::move(*f));
  if (!finished && !d.failed()) return std::nullopt;
  out.failed = d.failed();
  out.error = d.error();
  if (out.failed == out.error.empty()) return std::nullopt;
  return out;
}

/// The broken promise of the payload decoders on `p`, if any. `accepted`
/// counts the decoders that took it.
inline std::optional<std::string> check_payload(const Bytes& p, int* accepted = nullptr) {
  using namespace transport;
  int n = 0;
  std::optional<std::string> broken;
  // Every kind the wire carries (its own frame, or inside the Hello), from
  // the table: a new kind is checked without an edit here.
  model::for_each_kind([&](const auto& row) {
    using R = typename std::decay_t<decltype(row)>::Type;
    if constexpr (model::row_of<R>().frame != 0 || model::schema::has_schema_v<R>) {
      if (auto v = decode<R>(p)) {
        ++n;
        if (encode(*v) != p && !broken)
          broken = std::string("decode of ") + row.name + " accepted a non-canonical payload";
      }
    }
  });
  if (broken) return broken;
  if (auto v = decode<model::SystemSample>(p); v && v->gpus.size() > kMaxGpusPerSample)
    return "decode of system accepted too many GPUs";
  if (auto v = decode<model::TracerStats>(p); v && v->strategy.size() > kMaxStringBytes)
    return "decode of tracer_stats: strategy too long";
  if (auto v = decode_hello(p)) {
    ++n;
    if (v->token.size() > kMaxStringBytes) return "decode_hello: token too long";
    if (encode_hello(*v) != p) return "decode_hello accepted a non-canonical payload";
    // The handshake verdict: its own token passes only at the protocol version
    // we speak; another token never passes.
    if (check_hello(*v, v->token).ok() != supported_protocol(v->protocol_version))
      return "check_hello: verdict on the hello's own token is wrong";
    if (check_hello(*v, v->token + "x").ok()) return "check_hello accepted a longer token";
    if (!v->token.empty() && check_hello(*v, v->token.substr(1)).ok())
      return "check_hello accepted a shorter token";
  }
  // The collector's answer, which a rank decodes (protocol 4).
  if (auto v = decode_verdict(p)) {
    ++n;
    if (encode_verdict(*v) != p) return "decode_verdict accepted a non-canonical payload";
    if (v->accepted && !v->reason.empty()) return "decode_verdict: accepted with a reason";
    if (v->reason.size() > kMaxStringBytes) return "decode_verdict: reason too long";
  }
  if (accepted != nullptr) *accepted += n;
  return std::nullopt;
}

/// Counts of what check_frame_input exercised, so that a test can tell that
/// both accepting and rejecting paths were reached.
struct InputCounts {
  int frames = 0;
  int accepted_payloads = 0;
  int failed_streams = 0;
};

/// The first broken promise of the transport on `data`, if any: `data` as a
/// byte stream (decoded whole and byte by byte, which must agree; its frames
/// re-encoded must give back the bytes they came from; their payloads through
/// every decoder), and `data` as a bare payload through every decoder.
inline std::optional<std::string> check_frame_input(const std::uint8_t* data, std::size_t size,
                                                    InputCounts* counts = nullptr) {
  const Bytes stream(data, data + size);
  InputCounts local;
  InputCounts& c = counts != nullptr ? *counts : local;
  if (auto why = check_payload(stream, &c.accepted_payloads)) return why;

  const std::optional<StreamResult> whole = decode_stream(stream, stream.size() + 1);
  if (!whole) return "the decoder broke its contract fed the stream at once";
  // Byte by byte is the most different chunking; it also finds state kept
  // across feed() calls. Long inputs are cut in 7-byte chunks to stay fast.
  const std::optional<StreamResult> pieces = decode_stream(stream, stream.size() > 4096 ? 7 : 1);
  if (!pieces) return "the decoder broke its contract fed the stream in pieces";
  if (whole->failed != pieces->failed || whole->error != pieces->error)
    return "the decoder's verdict depends on chunking: '" + whole->error + "' vs '" +
           pieces->error + "'";
  if (whole->frames.size() != pieces->frames.size())
    return "the decoder's frames depend on chunking";

  if (whole->failed) ++c.failed_streams;
  Bytes again;
  for (std::size_t i = 0; i < whole->frames.size(); ++i) {
    const transport::Frame& f = whole->frames[i];
    const transport::Frame& g = pieces->frames[i];
    if (f.type != g.type || f.payload != g.payload)
      return "the decoder's frames depend on chunking";
    if (f.payload.size() > transport::kMaxFrameBytes) return "a frame over kMaxFrameBytes";
    const std::optional<Bytes> encoded = transport::encode_frame(f.type, f.payload);
    if (!encoded) return "encode_frame refused a frame the decoder delivered";
    again.insert(again.end(), encoded->begin(), encoded->end());
    ++c.frames;
    if (auto why = check_payload(f.payload, &c.accepted_payloads)) return why;
  }
  // The frames are the stream's leading bytes, unchanged; a stream the
  // decoder accepted is nothing but its frames.
  if (again.size() > stream.size() || !std::equal(again.begin(), again.end(), stream.begin()))
    return "the frames are not the bytes of the stream";
  if (!whole->failed && again.size() != stream.size())
    return "the decoder accepted a stream with bytes left over";
  return std::nullopt;
}

}  // namespace traceml::fuzz
