// The step block codec (store/step_block.hpp). A block is the codec byte,
// then each record:
//   varint   zigzag(step - previous record's step), the first from 0
//   8 bytes  ts, the double's bits, little-endian
//   varint   flags: bits 0-5 the events recorded, 6-11 the events with a CPU
//            value, 12-17 with a GPU value, 18 GPU activity present; since
//            codec 2, 19-24 the events with a begin, 25 a thread other than
//            0, 26 begins stored as 8-byte reals rather than nanoseconds
//   8 bytes  each CPU value present, in event order, then each GPU value
//   if bit 18: h2d_ms, h2d_bytes (8 bytes each), h2d_copies and
//            h2d_pageable_copies (zigzag varints), h2d_pageable_bytes,
//            collective_ms, busy_ms (8 bytes each)
//   each begin present, in event order: a zigzag varint of whole
//            nanoseconds, or (bit 26) the double's 8 bytes when one of them
//            is not a whole nanosecond (read from a file, not from a rank)
//   if bit 25: varint thread
// A CPU step with every phase timed is 59 bytes; with its begins, about 75.
#include "store/step_block.hpp"

#include <cmath>
#include <cstring>

#include "model/record_checks.hpp"

namespace traceml::store {

namespace {

constexpr unsigned kEvents = model::kEventCount;
constexpr unsigned kCpuShift = kEvents;
constexpr unsigned kGpuShift = 2 * kEvents;
constexpr unsigned kActivityBit = 3 * kEvents;
constexpr unsigned kBeginShift = kActivityBit + 1;
constexpr unsigned kThreadBit = kBeginShift + kEvents;
constexpr unsigned kRealBeginsBit = kThreadBit + 1;
constexpr std::uint64_t kEventBits = (1u << kEvents) - 1;
constexpr std::int64_t kMaxBeginNs = static_cast<std::int64_t>(model::kMaxBeginMs * 1e6);
/// The flags each codec knows: codec 1 ended at the activity bit.
constexpr std::uint64_t known_flags(std::uint8_t codec) {
  const unsigned last = codec == 1 ? kActivityBit : kRealBeginsBit;
  return (std::uint64_t{1} << (last + 1)) - 1;
}

/// A begin as the runtime makes it (whole nanoseconds / 1e6) comes back
/// exactly from its nanoseconds; `ns` is set when it does.
bool whole_nanoseconds(double ms, std::int64_t& ns) {
  if (!(std::fabs(ms) <= model::kMaxBeginMs)) return false;
  // Rounded by hand: llround is a library call, and the writer does this for
  // every begin of every step. Exact or not, the check below decides.
  const double scaled = ms * 1e6;
  ns = static_cast<std::int64_t>(scaled < 0.0 ? scaled - 0.5 : scaled + 0.5);
  // -0.0 == 0.0, but 0 nanoseconds read back as +0.0: a -0.0 goes as a real.
  return double(ns) * 1e-6 == ms && !(ns == 0 && std::signbit(ms));
}

void put_varint(std::string& out, std::uint64_t v) {
  char buf[10];
  std::size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out.append(buf, n);
}

std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
std::int64_t unzigzag(std::uint64_t z) {
  return static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
}

void put_real(std::string& out, double v) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  char buf[8];
  for (char& b : buf) {
    b = static_cast<char>(bits & 0xFF);
    bits >>= 8;
  }
  out.append(buf, 8);
}

}  // namespace

void StepBlockEncoder::clear() {
  data_.clear();
  data_.push_back(static_cast<char>(kStepBlockCodec));
  rows_ = 0;
  prev_step_ = 0;
  min_step_ = 0;
  max_step_ = 0;
}

void StepBlockEncoder::add(const model::StepRecord& r) {
  // Wrapping arithmetic: any two step ids give a delta that reads back exactly.
  const auto delta = static_cast<std::int64_t>(static_cast<std::uint64_t>(r.step) -
                                               static_cast<std::uint64_t>(prev_step_));
  put_varint(data_, zigzag(delta));
  prev_step_ = r.step;
  if (rows_ == 0 || r.step < min_step_) min_step_ = r.step;
  if (rows_ == 0 || r.step > max_step_) max_step_ = r.step;
  ++rows_;
  put_real(data_, r.ts);
  const unsigned cpu = r.events.cpu_mask();
  const unsigned gpu = r.events.gpu_mask();
  std::uint64_t flags =
      r.events.event_mask() | (std::uint64_t{cpu} << kCpuShift) | (std::uint64_t{gpu} << kGpuShift);
  if (r.gpu_activity) flags |= std::uint64_t{1} << kActivityBit;
  const unsigned begins = r.events.begin_mask();
  std::int64_t begin_ns[kEvents] = {};
  bool real_begins = false;
  for (unsigned e = 0; e < kEvents; ++e)
    if ((begins >> e) & 1u)
      real_begins |= !whole_nanoseconds(r.events.begin_values()[e], begin_ns[e]);
  flags |= std::uint64_t{begins} << kBeginShift;
  if (r.thread != 0) flags |= std::uint64_t{1} << kThreadBit;
  if (real_begins) flags |= std::uint64_t{1} << kRealBeginsBit;
  put_varint(data_, flags);
  for (unsigned e = 0; e < kEvents; ++e)
    if ((cpu >> e) & 1u) put_real(data_, r.events.cpu_values()[e]);
  for (unsigned e = 0; e < kEvents; ++e)
    if ((gpu >> e) & 1u) put_real(data_, r.events.gpu_values()[e]);
  if (const auto& a = r.gpu_activity) {
    put_real(data_, a->h2d_ms);
    put_real(data_, a->h2d_bytes);
    put_varint(data_, zigzag(a->h2d_copies));
    put_varint(data_, zigzag(a->h2d_pageable_copies));
    put_real(data_, a->h2d_pageable_bytes);
    put_real(data_, a->collective_ms);
    put_real(data_, a->busy_ms);
  }
  for (unsigned e = 0; e < kEvents; ++e) {
    if (((begins >> e) & 1u) == 0) continue;
    if (real_begins)
      put_real(data_, r.events.begin_values()[e]);
    else
      put_varint(data_, zigzag(begin_ns[e]));
  }
  if (r.thread != 0) put_varint(data_, static_cast<std::uint64_t>(r.thread));
}

StepBlockDecoder::StepBlockDecoder(std::string_view bytes, int rank, std::int64_t rows)
    : in_(bytes), rank_(rank), rows_(rows) {
  if (rows < 1 || rows > kMaxStepBlockRows)
    throw StepBlockError(0, "'rows' must be between 1 and " + std::to_string(kMaxStepBlockRows) +
                                ", got " + std::to_string(rows));
  if (in_.empty()) throw StepBlockError(0, "the block is empty (no codec byte)");
  codec_ = static_cast<std::uint8_t>(in_[0]);
  if (codec_ < 1 || codec_ > kStepBlockCodec)
    throw StepBlockError(0, "block codec " + std::to_string(codec_) + ", this traceml reads 1 to " +
                                std::to_string(kStepBlockCodec) +
                                " (use the traceml release that wrote it)");
  pos_ = 1;
}

void StepBlockDecoder::fail(const std::string& problem) const {
  throw StepBlockError(done_ + 1, problem);
}

std::uint64_t StepBlockDecoder::varint() {
  std::uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    if (pos_ >= in_.size()) fail("the block ends inside the record");
    const auto b = static_cast<std::uint8_t>(in_[pos_++]);
    if (shift == 63 && b > 1) fail("a number in the record does not fit 64 bits");
    v |= std::uint64_t{b & 0x7Fu} << shift;
    if ((b & 0x80) == 0) return v;
  }
}

double StepBlockDecoder::real() {
  if (in_.size() - pos_ < 8) fail("the block ends inside the record");
  std::uint64_t bits = 0;
  for (int i = 7; i >= 0; --i)
    bits = (bits << 8) | static_cast<std::uint8_t>(in_[pos_ + static_cast<std::size_t>(i)]);
  pos_ += 8;
  double v = 0.0;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

bool StepBlockDecoder::next(model::StepRecord& r) {
  if (done_ == rows_) {
    if (pos_ != in_.size()) {
      const std::size_t left = in_.size() - pos_;
      throw StepBlockError(
          0, std::to_string(left) + (left == 1 ? " byte follows" : " bytes follow") + " record " +
                 std::to_string(rows_) + ", the last that the block's 'rows' counts");
    }
    return false;
  }
  r = model::StepRecord{};
  r.global_rank = rank_;
  const std::int64_t delta = unzigzag(varint());
  r.step = static_cast<std::int64_t>(static_cast<std::uint64_t>(prev_step_) +
                                     static_cast<std::uint64_t>(delta));
  prev_step_ = r.step;
  r.ts = real();
  const std::uint64_t flags = varint();
  if ((flags & ~known_flags(codec_)) != 0)
    fail("its flags " + std::to_string(flags) + " set bits that block codec " +
         std::to_string(codec_) + " does not define");
  const std::uint64_t events = flags & kEventBits;
  const std::uint64_t cpu = (flags >> kCpuShift) & kEventBits;
  const std::uint64_t gpu = (flags >> kGpuShift) & kEventBits;
  if (((cpu | gpu) & ~events) != 0)
    fail("its flags give a clock value to an event that it does not record");
  double cpu_values[kEvents] = {};
  for (unsigned e = 0; e < kEvents; ++e)
    if ((cpu >> e) & 1u) cpu_values[e] = real();
  for (unsigned e = 0; e < kEvents; ++e) {
    if (((events >> e) & 1u) == 0) continue;
    model::Timing t;
    if ((cpu >> e) & 1u) t.cpu_ms = cpu_values[e];
    if ((gpu >> e) & 1u) t.gpu_ms = real();
    r.events.set(static_cast<model::Event>(e), t);
  }
  if ((flags >> kActivityBit) & 1u) {
    model::StepGpuActivity a;
    a.h2d_ms = real();
    a.h2d_bytes = real();
    a.h2d_copies = unzigzag(varint());
    a.h2d_pageable_copies = unzigzag(varint());
    a.h2d_pageable_bytes = real();
    a.collective_ms = real();
    a.busy_ms = real();
    r.gpu_activity = a;
  }
  const std::uint64_t begins = (flags >> kBeginShift) & kEventBits;
  const bool real_begins = ((flags >> kRealBeginsBit) & 1u) != 0;
  if (real_begins && begins == 0) fail("its flags store begins as reals but it has no begin");
  for (unsigned e = 0; e < kEvents; ++e) {
    if (((begins >> e) & 1u) == 0) continue;
    if (real_begins) {
      r.events.set_begin(static_cast<model::Event>(e), real());
    } else {
      const std::int64_t ns = unzigzag(varint());
      if (ns < -kMaxBeginNs || ns > kMaxBeginNs) fail("a begin is beyond the codec's range");
      r.events.set_begin(static_cast<model::Event>(e), double(ns) * 1e-6);
    }
  }
  if ((flags >> kThreadBit) & 1u) {
    const std::uint64_t thread = varint();
    if (thread == 0 || thread > std::uint64_t(model::kMaxThread))
      fail("its thread " + std::to_string(thread) + " is not between 1 and " +
           std::to_string(model::kMaxThread));
    r.thread = static_cast<int>(thread);
  }
  if (auto problem = model::check_step(r)) fail(*problem);
  ++done_;
  return true;
}

}  // namespace traceml::store
