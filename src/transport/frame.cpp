#include "transport/frame.hpp"

#include <algorithm>
#include <utility>

#include "model/record_kinds.hpp"
#include "transport/wire.hpp"

namespace traceml::transport {

// Hello, Bye and Verdict carry no record; every other frame type is a record
// kind's (model/record_kinds.hpp), named as its kind.

const char* frame_type_name(FrameType t) {
  if (t == FrameType::Hello) return "hello";
  if (t == FrameType::Bye) return "bye";
  if (t == FrameType::Verdict) return "verdict";
  const char* name = "unknown";
  model::for_each_kind([&](const auto& row) {
    if (row.frame != 0 && row.frame == static_cast<std::uint8_t>(t)) name = row.name;
  });
  return name;
}

std::optional<FrameType> frame_type_from_byte(std::uint8_t b) {
  std::optional<FrameType> type;
  if (b == static_cast<std::uint8_t>(FrameType::Hello) ||
      b == static_cast<std::uint8_t>(FrameType::Bye) ||
      b == static_cast<std::uint8_t>(FrameType::Verdict))
    type = static_cast<FrameType>(b);
  model::for_each_kind([&](const auto& row) {
    if (row.frame != 0 && row.frame == b) type = static_cast<FrameType>(b);
  });
  return type;
}

std::optional<std::vector<std::uint8_t>> encode_frame(FrameType type,
                                                      const std::vector<std::uint8_t>& payload) {
  if (payload.size() > kMaxFrameBytes) return std::nullopt;
  std::vector<std::uint8_t> out;
  out.reserve(kHeaderBytes + payload.size());
  wire::Writer w(out);
  w.u32(static_cast<std::uint32_t>(payload.size()));
  w.u8(static_cast<std::uint8_t>(type));
  w.u8(kCodecVersion);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

namespace {

// Capacity an empty decoder keeps. A connection that once carried a large
// frame gives the rest back, so an idle connection costs what a few batches of
// records need (the server reads 64 KiB at a time), not the largest frame it
// ever saw; a busy one keeps its buffer instead of reallocating per read.
constexpr std::size_t kKeptCapacity = 256 * 1024;

}  // namespace

FrameDecoder::FrameDecoder(std::size_t max_payload_bytes)
    : max_payload_(std::min(max_payload_bytes, kMaxFrameBytes)) {}

void FrameDecoder::set_max_payload_bytes(std::size_t n) {
  max_payload_ = std::min(n, kMaxFrameBytes);
}

std::size_t FrameDecoder::feed(const std::uint8_t* data, std::size_t n) {
  if (failed()) return n;
  if (finished_) {
    fail("bytes received after the end of the stream");
    return n;
  }
  // Drop the frames already returned before growing, so that the buffer only
  // ever holds bytes not yet delivered.
  if (pos_ > 0) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
    pos_ = 0;
  }
  if (buf_.empty() && buf_.capacity() > kKeptCapacity) std::vector<std::uint8_t>().swap(buf_);
  // A limit lowered below what is buffered leaves no room rather than wrapping.
  const std::size_t limit = kHeaderBytes + max_payload_;
  const std::size_t room = limit > buf_.size() ? limit - buf_.size() : 0;
  const std::size_t take = std::min(n, room);
  if (take > 0) buf_.insert(buf_.end(), data, data + take);
  return take;
}

std::optional<Frame> FrameDecoder::next() {
  if (failed()) return std::nullopt;
  switch (check_head()) {
    case Head::Bad:
      return std::nullopt;
    case Head::NeedMore:
      if (finished_ && buffered() > 0) finish();  // reports the truncated tail
      return std::nullopt;
    case Head::Ready:
      break;
  }
  wire::Reader r(buf_.data() + pos_, kHeaderBytes);
  const std::uint32_t length = r.u32();
  Frame f;
  f.type = *frame_type_from_byte(r.u8());
  const auto begin = buf_.begin() + static_cast<std::ptrdiff_t>(pos_ + kHeaderBytes);
  f.payload.assign(begin, begin + static_cast<std::ptrdiff_t>(length));
  pos_ += kHeaderBytes + length;
  return f;
}

bool FrameDecoder::finish() {
  if (failed()) return false;
  finished_ = true;
  const std::size_t have = buffered();
  if (have == 0) return true;
  switch (check_head()) {
    case Head::Bad:
      return false;
    case Head::Ready:
      return true;  // the tail, if truncated, is reported when next() reaches it
    case Head::NeedMore:
      break;
  }
  if (have < kHeaderBytes) {
    fail("stream ended inside a frame header (" + std::to_string(have) + " of " +
         std::to_string(kHeaderBytes) + " bytes)");
  } else {
    wire::Reader r(buf_.data() + pos_, kHeaderBytes);
    const std::size_t want = kHeaderBytes + r.u32();
    fail("stream ended inside a frame (" + std::to_string(have) + " of " + std::to_string(want) +
         " bytes)");
  }
  return false;
}

const std::string& FrameDecoder::error() const {
  static const std::string kNone;
  return error_ ? *error_ : kNone;
}

FrameDecoder::Head FrameDecoder::check_head() {
  const std::size_t have = buffered();
  if (have < kHeaderBytes) return Head::NeedMore;
  wire::Reader r(buf_.data() + pos_, kHeaderBytes);
  const std::uint32_t length = r.u32();
  const std::uint8_t type = r.u8();
  const std::uint8_t version = r.u8();
  // Checked in header order so that the reason names the first bad field; the
  // length is checked before waiting for the payload, so an absurd length fails
  // at once instead of stalling the connection.
  if (length > max_payload_) {
    fail("frame length " + std::to_string(length) + " exceeds the maximum of " +
         std::to_string(max_payload_) + " bytes");
    return Head::Bad;
  }
  if (!frame_type_from_byte(type)) {
    fail("unknown frame type " + std::to_string(type));
    return Head::Bad;
  }
  if (version != kCodecVersion) {
    fail("unsupported codec version " + std::to_string(version) + " (this build speaks " +
         std::to_string(kCodecVersion) + ")");
    return Head::Bad;
  }
  return have - kHeaderBytes >= length ? Head::Ready : Head::NeedMore;
}

void FrameDecoder::fail(std::string reason) {
  error_ = std::move(reason);
  buf_.clear();
  buf_.shrink_to_fit();
  pos_ = 0;
}

}  // namespace traceml::transport
