// Transport frame codec: the exact frame and payload bytes, exact round trips
// of every record with every optional absent and present, the decoder's
// verdict on malformed streams (with its exact one-line reasons), bounded
// buffering, and a fixed-seed fuzz loop and the fuzz_frame corpus, on which the
// decoders must neither crash nor accept a payload they would not have written.
#include "transport/frame.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "transport/hello.hpp"
#include "transport/record_codec.hpp"

#include "../fuzz/frame_invariants.hpp"

namespace traceml::transport {
namespace {

using Bytes = std::vector<std::uint8_t>;
using model::Event;

std::uint64_t bits_of(double v) {
  std::uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Bit-exact comparison: 0.0 and -0.0 differ, as the wire must keep them apart.
::testing::AssertionResult same(const std::optional<double>& a, const std::optional<double>& b) {
  if (a.has_value() != b.has_value()) return ::testing::AssertionFailure() << "presence differs";
  if (a && bits_of(*a) != bits_of(*b)) {
    return ::testing::AssertionFailure() << *a << " vs " << *b;
  }
  return ::testing::AssertionSuccess();
}

// Doubles that stress the encoding without NaN: extremes of range, the
// smallest denormal, signed zeros, infinities, a value with every mantissa bit.
const std::vector<double> kExtremes = {std::numeric_limits<double>::max(),
                                       std::numeric_limits<double>::lowest(),
                                       std::numeric_limits<double>::min(),
                                       std::numeric_limits<double>::denorm_min(),
                                       -std::numeric_limits<double>::denorm_min(),
                                       0.0,
                                       -0.0,
                                       std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity(),
                                       0.1,
                                       1.0 - std::numeric_limits<double>::epsilon(),
                                       1.7e300};

Bytes frame(FrameType t, const Bytes& payload) {
  return encode_frame(t, payload).value();
}

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts)
    out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Feeds everything the way the header comment prescribes, draining as it goes.
std::vector<Frame> feed_all(FrameDecoder& d, const Bytes& bytes, std::size_t chunk) {
  std::vector<Frame> frames;
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::size_t n = std::min(chunk, bytes.size() - at);
    std::size_t done = 0;
    while (done < n) {
      done += d.feed(bytes.data() + at + done, n - done);
      while (auto f = d.next())
        frames.push_back(std::move(*f));
    }
    at += n;
  }
  d.finish();
  while (auto f = d.next())
    frames.push_back(std::move(*f));
  return frames;
}

// ---------------------------------------------------------------- frames

TEST(Frame, HeaderIsLengthTypeVersionLittleEndian) {
  // length 3 -> 03 00 00 00, Step = 2, codec version 1, then the payload.
  EXPECT_EQ(frame(FrameType::Step, {0xAA, 0xBB, 0xCC}),
            (Bytes{0x03, 0x00, 0x00, 0x00, 0x02, 0x01, 0xAA, 0xBB, 0xCC}));
  // 300 = 0x012C -> 2C 01 00 00.
  const Bytes big = frame(FrameType::Bye, Bytes(300, 0));
  EXPECT_EQ(Bytes(big.begin(), big.begin() + 6), (Bytes{0x2C, 0x01, 0x00, 0x00, 0x06, 0x01}));
}

TEST(Frame, TypeValuesAreStable) {
  EXPECT_EQ(int(FrameType::Hello), 1);
  EXPECT_EQ(int(FrameType::Step), 2);
  EXPECT_EQ(int(FrameType::StepMemory), 3);
  EXPECT_EQ(int(FrameType::System), 4);
  EXPECT_EQ(int(FrameType::Process), 5);
  EXPECT_EQ(int(FrameType::Bye), 6);
  EXPECT_EQ(int(FrameType::TracerStats), 7);
  EXPECT_EQ(int(FrameType::Heartbeat), 8);
  EXPECT_FALSE(frame_type_from_byte(0));
  EXPECT_EQ(int(FrameType::Verdict), 9);
  EXPECT_TRUE(frame_type_from_byte(11));  // protocol 5's rank_end (model/record_kinds.hpp)
  EXPECT_TRUE(frame_type_from_byte(12));  // protocol 6's profile
  EXPECT_TRUE(frame_type_from_byte(13));  // protocol 7's profile_ready
  EXPECT_TRUE(frame_type_from_byte(14));  // protocol 7's profile_request
  EXPECT_TRUE(frame_type_from_byte(15));  // protocol 8's profiled_steps
  EXPECT_FALSE(frame_type_from_byte(16));
  EXPECT_EQ(frame_type_from_byte(9), FrameType::Verdict);
  EXPECT_STREQ(frame_type_name(FrameType::Verdict), "verdict");
  EXPECT_EQ(frame_type_from_byte(8), FrameType::Heartbeat);
  EXPECT_EQ(frame_type_from_byte(4), FrameType::System);
  EXPECT_STREQ(frame_type_name(FrameType::StepMemory), "step_memory");
}

TEST(Frame, PayloadSizeLimitIsInclusive) {
  EXPECT_EQ(kMaxFrameBytes, 1048576u);
  const auto at = encode_frame(FrameType::Step, Bytes(kMaxFrameBytes, 7));
  ASSERT_TRUE(at);
  EXPECT_EQ(at->size(), kMaxFrameBytes + kHeaderBytes);
  EXPECT_FALSE(encode_frame(FrameType::Step, Bytes(kMaxFrameBytes + 1, 7)));
}

// ---------------------------------------------------------------- decoder

TEST(FrameDecoder, ByteByByteAndOneChunkGiveTheSameFrames) {
  const Bytes stream =
      concat({frame(FrameType::Hello, {1, 2, 3}), frame(FrameType::Step, {}),
              frame(FrameType::System, Bytes(1000, 9)), frame(FrameType::Bye, {})});
  for (std::size_t chunk : {std::size_t{1}, std::size_t{5}, std::size_t{7}, stream.size()}) {
    FrameDecoder d;
    const auto frames = feed_all(d, stream, chunk);
    EXPECT_FALSE(d.failed()) << d.error();
    EXPECT_EQ(d.error(), "");
    ASSERT_EQ(frames.size(), 4u) << "chunk " << chunk;
    EXPECT_EQ(frames[0].type, FrameType::Hello);
    EXPECT_EQ(frames[0].payload, (Bytes{1, 2, 3}));
    EXPECT_EQ(frames[1].type, FrameType::Step);
    EXPECT_TRUE(frames[1].payload.empty());
    EXPECT_EQ(frames[2].type, FrameType::System);
    EXPECT_EQ(frames[2].payload, Bytes(1000, 9));
    EXPECT_EQ(frames[3].type, FrameType::Bye);
    EXPECT_EQ(d.buffered(), 0u);
  }
}

TEST(FrameDecoder, WaitsForTheWholeFrame) {
  const Bytes f = frame(FrameType::Step, {1, 2, 3, 4});
  FrameDecoder d;
  EXPECT_EQ(d.feed(f.data(), f.size() - 1), f.size() - 1);
  EXPECT_FALSE(d.next());
  EXPECT_FALSE(d.failed());
  EXPECT_EQ(d.feed(f.data() + f.size() - 1, 1), 1u);
  const auto got = d.next();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->payload, (Bytes{1, 2, 3, 4}));
  EXPECT_TRUE(d.finish());
}

TEST(FrameDecoder, OversizedLengthFailsBeforeThePayloadArrives) {
  // Length kMaxFrameBytes + 1 = 0x00100001 -> 01 00 10 00; only the header is fed.
  const Bytes header = {0x01, 0x00, 0x10, 0x00, 0x02, 0x01};
  FrameDecoder d;
  EXPECT_EQ(d.feed(header.data(), header.size()), 6u);
  EXPECT_FALSE(d.next());
  EXPECT_TRUE(d.failed());
  EXPECT_EQ(d.error(), "frame length 1048577 exceeds the maximum of 1048576 bytes");
  EXPECT_EQ(d.buffered(), 0u);
  // Exactly the maximum is a valid length: the decoder waits for the payload.
  FrameDecoder ok;
  const Bytes at_max = {0x00, 0x00, 0x10, 0x00, 0x02, 0x01};
  ok.feed(at_max.data(), at_max.size());
  EXPECT_FALSE(ok.next());
  EXPECT_FALSE(ok.failed());
}

TEST(FrameDecoder, HugeLengthFails) {
  const Bytes header = {0xFF, 0xFF, 0xFF, 0xFF, 0x02, 0x01};
  FrameDecoder d;
  d.feed(header.data(), header.size());
  EXPECT_FALSE(d.next());
  EXPECT_EQ(d.error(), "frame length 4294967295 exceeds the maximum of 1048576 bytes");
}

TEST(FrameDecoder, UnknownTypeFails) {
  for (std::uint8_t type : {std::uint8_t{0}, std::uint8_t{16}, std::uint8_t{255}}) {
    const Bytes f = {0x00, 0x00, 0x00, 0x00, type, 0x01};
    FrameDecoder d;
    d.feed(f.data(), f.size());
    EXPECT_FALSE(d.next());
    EXPECT_EQ(d.error(), "unknown frame type " + std::to_string(type));
  }
}

TEST(FrameDecoder, OtherCodecVersionFails) {
  const Bytes f = {0x00, 0x00, 0x00, 0x00, 0x06, 0x02};
  FrameDecoder d;
  d.feed(f.data(), f.size());
  EXPECT_FALSE(d.next());
  EXPECT_EQ(d.error(), "unsupported codec version 2 (this build speaks 1)");
}

TEST(FrameDecoder, FramesBeforeBadBytesAreDeliveredThenTheErrorSticks) {
  const Bytes stream =
      concat({frame(FrameType::Step, {5}), Bytes{0, 0, 0, 0, 16, 1}, frame(FrameType::Bye, {})});
  FrameDecoder d;
  EXPECT_EQ(d.feed(stream.data(), stream.size()), stream.size());
  const auto first = d.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->payload, (Bytes{5}));
  EXPECT_FALSE(d.next());
  EXPECT_EQ(d.error(), "unknown frame type 16");
  // Sticky: more valid bytes are swallowed and nothing more comes out.
  const Bytes more = frame(FrameType::Bye, {});
  EXPECT_EQ(d.feed(more.data(), more.size()), more.size());
  EXPECT_FALSE(d.next());
  EXPECT_FALSE(d.finish());
  EXPECT_EQ(d.error(), "unknown frame type 16");
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(FrameDecoder, GarbageFailsWithoutCrashing) {
  const std::string text = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  FrameDecoder d;
  d.feed(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  EXPECT_FALSE(d.next());
  // "GET " read as a little-endian u32 = 0x20544547 = 542393671 bytes.
  EXPECT_EQ(d.error(), "frame length 542393671 exceeds the maximum of 1048576 bytes");
}

TEST(FrameDecoder, TruncatedHeaderAtEndOfStreamFails) {
  const Bytes partial = {0x01, 0x00, 0x00};
  FrameDecoder d;
  d.feed(partial.data(), partial.size());
  EXPECT_FALSE(d.next());
  EXPECT_FALSE(d.failed());
  EXPECT_FALSE(d.finish());
  EXPECT_EQ(d.error(), "stream ended inside a frame header (3 of 6 bytes)");
}

TEST(FrameDecoder, TruncatedPayloadAtEndOfStreamFails) {
  const Bytes f = frame(FrameType::Step, Bytes(10, 1));  // 16 bytes in all
  FrameDecoder d;
  d.feed(f.data(), 12);
  EXPECT_FALSE(d.next());
  EXPECT_FALSE(d.finish());
  EXPECT_EQ(d.error(), "stream ended inside a frame (12 of 16 bytes)");
}

TEST(FrameDecoder, TruncatedTailBehindCompleteFramesFailsWhenReached) {
  const Bytes f = frame(FrameType::Step, {1});
  const Bytes stream = concat({f, Bytes(f.begin(), f.end() - 1)});
  FrameDecoder d;
  d.feed(stream.data(), stream.size());
  EXPECT_TRUE(d.finish());  // a complete frame is still waiting
  ASSERT_TRUE(d.next());
  EXPECT_FALSE(d.next());
  EXPECT_EQ(d.error(), "stream ended inside a frame (6 of 7 bytes)");
}

TEST(FrameDecoder, CleanEndAndBytesAfterTheEnd) {
  FrameDecoder empty;
  EXPECT_TRUE(empty.finish());
  EXPECT_FALSE(empty.failed());
  const Bytes f = frame(FrameType::Bye, {});
  EXPECT_EQ(empty.feed(f.data(), f.size()), f.size());
  EXPECT_EQ(empty.error(), "bytes received after the end of the stream");
}

TEST(FrameDecoder, BuffersAtMostOneMaximalFrame) {
  // Three maximal frames at once: only header + kMaxFrameBytes are taken.
  const Bytes one = frame(FrameType::System, Bytes(kMaxFrameBytes, 3));
  const Bytes stream = concat({one, one, one});
  FrameDecoder d;
  EXPECT_EQ(d.feed(stream.data(), stream.size()), kHeaderBytes + kMaxFrameBytes);
  EXPECT_EQ(d.feed(stream.data(), 1), 0u);  // full until drained
  const auto frames =
      feed_all(d, Bytes(stream.begin() + static_cast<std::ptrdiff_t>(one.size()), stream.end()),
               stream.size());
  EXPECT_FALSE(d.failed()) << d.error();
  ASSERT_EQ(frames.size(), 3u);
  for (const Frame& f : frames)
    EXPECT_EQ(f.payload.size(), kMaxFrameBytes);
}

TEST(FrameDecoder, LowerLimitRefusesALongerHeaderBeforeItsPayload) {
  // The server's limit before the Hello: 4097 = 0x1001 -> 01 10 00 00.
  const Bytes header = {0x01, 0x10, 0x00, 0x00, 0x01, 0x01};
  FrameDecoder d(kMaxPreHelloFrameBytes);
  EXPECT_EQ(d.max_payload_bytes(), 4096u);
  EXPECT_EQ(d.feed(header.data(), header.size()), 6u);
  EXPECT_FALSE(d.next());
  EXPECT_EQ(d.error(), "frame length 4097 exceeds the maximum of 4096 bytes");
  EXPECT_EQ(d.buffered(), 0u);

  // It takes no more than one header and one such payload at a time.
  const Bytes hello = frame(FrameType::Hello, Bytes(kMaxPreHelloFrameBytes, 7));
  const Bytes stream = concat({hello, hello});
  FrameDecoder small(kMaxPreHelloFrameBytes);
  EXPECT_EQ(small.feed(stream.data(), stream.size()), kHeaderBytes + kMaxPreHelloFrameBytes);
  ASSERT_TRUE(small.next());

  // Raised, it takes the rest and frames up to kMaxFrameBytes, never more.
  small.set_max_payload_bytes(std::size_t{1} << 30);
  EXPECT_EQ(small.max_payload_bytes(), kMaxFrameBytes);
  const Bytes big = frame(FrameType::Step, Bytes(100000, 9));
  const auto frames = feed_all(small, concat({hello, big}), 5000);
  EXPECT_FALSE(small.failed()) << small.error();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[1].payload.size(), 100000u);
}

TEST(FrameDecoder, LimitLoweredBelowWhatIsBufferedTakesNothingMore) {
  FrameDecoder d;
  const Bytes part = {0x00, 0x20, 0x00, 0x00, 0x02, 0x01, 1, 2, 3};  // 8192-byte frame, begun
  EXPECT_EQ(d.feed(part.data(), part.size()), part.size());
  d.set_max_payload_bytes(0);
  EXPECT_EQ(d.feed(part.data(), part.size()), 0u);
  EXPECT_FALSE(d.next());
  EXPECT_EQ(d.error(), "frame length 8192 exceeds the maximum of 0 bytes");
}

// ---------------------------------------------------------------- records

model::StepRecord step_with(const std::vector<std::pair<Event, model::Timing>>& events) {
  model::StepRecord s;
  s.global_rank = 3;
  s.step = 123456789012LL;
  s.ts = 1.7e9 + 0.25;
  for (const auto& [e, t] : events)
    s.events.set(e, t);
  return s;
}

void expect_same_step(const model::StepRecord& a, const model::StepRecord& b) {
  EXPECT_EQ(a.global_rank, b.global_rank);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(bits_of(a.ts), bits_of(b.ts));
  EXPECT_EQ(a.events.event_mask(), b.events.event_mask());
  EXPECT_EQ(a.events.cpu_mask(), b.events.cpu_mask());
  EXPECT_EQ(a.events.gpu_mask(), b.events.gpu_mask());
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    const auto e = static_cast<Event>(i);
    EXPECT_TRUE(same(a.events.cpu_ms(e), b.events.cpu_ms(e))) << i;
    EXPECT_TRUE(same(a.events.gpu_ms(e), b.events.gpu_ms(e))) << i;
    EXPECT_TRUE(same(a.events.begin_ms(e), b.events.begin_ms(e))) << i;
  }
  EXPECT_EQ(a.thread, b.thread);
}

TEST(RecordCodec, StepLayoutIsPinned) {
  // rank 1, step 2, ts 0.0, Forward (bit 2) measured on the CPU only, 1.0 ms:
  // i32 01000000, i64 0200..00, f64 0, masks 04 04 00, f64 1.0 = 0x3FF0000000000000.
  model::StepRecord s;
  s.global_rank = 1;
  s.step = 2;
  s.events.set(Event::Forward, {1.0, std::nullopt});
  EXPECT_EQ(encode(s), (Bytes{1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0,    0,   0,
                              0, 0, 0, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F}));
}

TEST(RecordCodec, StepRoundTripsEveryClockCombination) {
  // Each event is absent, or present with no clock, cpu only, gpu only, both.
  for (unsigned combo = 0; combo < 5; ++combo) {
    for (std::size_t i = 0; i < model::kEventCount; ++i) {
      std::vector<std::pair<Event, model::Timing>> events;
      if (combo > 0) {
        model::Timing t;
        if (combo == 2 || combo == 4) t.cpu_ms = kExtremes[i];
        if (combo == 3 || combo == 4) t.gpu_ms = kExtremes[i + 6];
        events.push_back({static_cast<Event>(i), t});
      }
      const model::StepRecord s = step_with(events);
      const auto back = decode<model::StepRecord>(encode(s));
      ASSERT_TRUE(back) << combo << " " << i;
      expect_same_step(s, *back);
    }
  }
  // All six events with both clocks, and negative ids.
  std::vector<std::pair<Event, model::Timing>> all;
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    all.push_back({static_cast<Event>(i), {kExtremes[i], kExtremes[11 - i]}});
  }
  model::StepRecord s = step_with(all);
  s.global_rank = std::numeric_limits<int>::min();
  s.step = std::numeric_limits<std::int64_t>::min();
  s.ts = -0.0;
  const auto back = decode<model::StepRecord>(encode(s));
  ASSERT_TRUE(back);
  expect_same_step(s, *back);
  EXPECT_EQ(encode(s).size(), 4u + 8 + 8 + 3 + 12 * 8);
}

model::StepGpuActivity activity_sample() {
  model::StepGpuActivity a;
  a.h2d_ms = 1.25;
  a.h2d_bytes = 128e6;
  a.h2d_copies = 4;
  a.h2d_pageable_copies = 3;
  a.h2d_pageable_bytes = 96e6;
  a.collective_ms = 7.5;
  a.busy_ms = 40.0;
  return a;
}

void expect_same_activity(const std::optional<model::StepGpuActivity>& a,
                          const std::optional<model::StepGpuActivity>& b) {
  ASSERT_EQ(a.has_value(), b.has_value());
  if (!a) return;
  EXPECT_EQ(bits_of(a->h2d_ms), bits_of(b->h2d_ms));
  EXPECT_EQ(bits_of(a->h2d_bytes), bits_of(b->h2d_bytes));
  EXPECT_EQ(a->h2d_copies, b->h2d_copies);
  EXPECT_EQ(a->h2d_pageable_copies, b->h2d_pageable_copies);
  EXPECT_EQ(bits_of(a->h2d_pageable_bytes), bits_of(b->h2d_pageable_bytes));
  EXPECT_EQ(bits_of(a->collective_ms), bits_of(b->collective_ms));
  EXPECT_EQ(bits_of(a->busy_ms), bits_of(b->busy_ms));
}

TEST(RecordCodec, StepGpuActivityLayoutIsPinned) {
  // The step of StepLayoutIsPinned with an activity block: bit 7 of the event
  // mask (04 | 80 = 84), then seven 8-byte values after the event values.
  model::StepRecord s;
  s.global_rank = 1;
  s.step = 2;
  s.events.set(Event::Forward, {1.0, std::nullopt});
  model::StepGpuActivity a;
  a.h2d_copies = 5;
  a.h2d_pageable_copies = 2;
  a.busy_ms = 1.0;
  s.gpu_activity = a;
  Bytes expected = {1, 0, 0, 0, 2,    0, 0, 0, 0, 0, 0, 0, 0, 0,    0,   0,
                    0, 0, 0, 0, 0x84, 4, 0, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F};
  const Bytes zero(8, 0);
  for (const Bytes& field : {zero,                                    // h2d_ms 0.0
                             zero,                                    // h2d_bytes 0.0
                             Bytes{5, 0, 0, 0, 0, 0, 0, 0},           // h2d_copies 5
                             Bytes{2, 0, 0, 0, 0, 0, 0, 0},           // h2d_pageable_copies 2
                             zero,                                    // h2d_pageable_bytes 0.0
                             zero,                                    // collective_ms 0.0
                             Bytes{0, 0, 0, 0, 0, 0, 0xF0, 0x3F}}) {  // busy_ms 1.0
    expected.insert(expected.end(), field.begin(), field.end());
  }
  ASSERT_EQ(expected.size(), 31u + 7 * 8);
  EXPECT_EQ(encode(s), expected);
  const auto back = decode<model::StepRecord>(expected);
  ASSERT_TRUE(back);
  expect_same_step(s, *back);
  expect_same_activity(s.gpu_activity, back->gpu_activity);
}

TEST(RecordCodec, StepGpuActivityRoundTripsAndIsOptional) {
  model::StepRecord s =
      step_with({{Event::Forward, {1.0, 2.0}}, {Event::TracedStepTime, {5.0, 6.0}}});
  const Bytes without = encode(s);
  const auto plain = decode<model::StepRecord>(without);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->gpu_activity.has_value());  // absent stays absent

  s.gpu_activity = activity_sample();
  const Bytes with = encode(s);
  EXPECT_EQ(with.size(), without.size() + 7 * 8);
  const auto back = decode<model::StepRecord>(with);
  ASSERT_TRUE(back);
  expect_same_step(s, *back);
  expect_same_activity(s.gpu_activity, back->gpu_activity);

  // A step that launched nothing still has its (all-zero) block: not absent.
  s.gpu_activity = model::StepGpuActivity{};
  const auto zero = decode<model::StepRecord>(encode(s));
  ASSERT_TRUE(zero);
  ASSERT_TRUE(zero->gpu_activity.has_value());
  EXPECT_EQ(zero->gpu_activity->h2d_copies, 0);

  // Extremes round-trip bit for bit.
  model::StepGpuActivity x;
  x.h2d_ms = kExtremes[0];
  x.h2d_bytes = kExtremes[1];
  x.h2d_copies = std::numeric_limits<std::int64_t>::max();
  x.h2d_pageable_copies = std::numeric_limits<std::int64_t>::min();
  x.h2d_pageable_bytes = kExtremes[2];
  x.collective_ms = kExtremes[3];
  x.busy_ms = -0.0;
  s.gpu_activity = x;
  const auto ext = decode<model::StepRecord>(encode(s));
  ASSERT_TRUE(ext);
  expect_same_activity(s.gpu_activity, ext->gpu_activity);
}

TEST(RecordCodec, StepGpuActivityMalformedIsRejected) {
  model::StepRecord s = step_with({{Event::H2D, {std::nullopt, 3.0}}});
  s.gpu_activity = activity_sample();
  const Bytes good = encode(s);
  ASSERT_TRUE(decode<model::StepRecord>(good));
  // Every strict prefix is short, including one cut inside the block.
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(decode<model::StepRecord>(Bytes(good.begin(), good.begin() + long(n)))) << n;
  }
  Bytes trailing = good;
  trailing.push_back(0);
  EXPECT_FALSE(decode<model::StepRecord>(trailing));
  // The flag cleared: the block becomes trailing bytes.
  Bytes no_flag = good;
  no_flag[20] = static_cast<std::uint8_t>(no_flag[20] & 0x7F);
  EXPECT_FALSE(decode<model::StepRecord>(no_flag));
  // The flag set on a step without a block: short.
  Bytes plain = encode(step_with({}));
  plain[20] = 0x80;
  EXPECT_FALSE(decode<model::StepRecord>(plain));
}

TEST(RecordCodec, StepTimelineBlockLayoutIsPinned) {
  // The step of StepLayoutIsPinned, begun 0.5 ms into the traced step, on
  // thread 2: bit 6 of the event mask (04 | 40 = 44), then after the event
  // values u16 thread 0200, u8 begin mask 04, f64 0.5 = 0x3FE0000000000000.
  model::StepRecord s;
  s.global_rank = 1;
  s.step = 2;
  s.thread = 2;
  s.events.set(Event::Forward, {1.0, std::nullopt});
  s.events.set_begin(Event::Forward, 0.5);
  const Bytes expected = {1, 0,    0,    0, 2, 0, 0,    0, 0, 0, 0, 0, 0,    0,
                          0, 0,    0,    0, 0, 0, 0x44, 4, 0, 0, 0, 0, 0,    0,
                          0, 0xF0, 0x3F, 2, 0, 4, 0,    0, 0, 0, 0, 0, 0xE0, 0x3F};
  EXPECT_EQ(encode(s), expected);
  const auto back = decode<model::StepRecord>(expected);
  ASSERT_TRUE(back);
  expect_same_step(s, *back);

  // Thread alone, begins alone, and both with a GPU activity block after.
  model::StepRecord t = step_with({{Event::InputWait, {2.0, {}}},
                                   {Event::Forward, {1.0, 3.0}},
                                   {Event::TracedStepTime, {6.0, 5.5}}});
  t.thread = 65535;
  EXPECT_EQ(encode(t).size(), encode(step_with({})).size() + 5 * 8 + 3);
  t.events.set_begin(Event::InputWait, -2.5);  // before the step: a fetch for it
  t.events.set_begin(Event::Forward, kExtremes[3]);
  t.gpu_activity = activity_sample();
  for (const int thread : {0, 7, 65535}) {
    t.thread = thread;
    const auto again = decode<model::StepRecord>(encode(t));
    ASSERT_TRUE(again) << thread;
    expect_same_step(t, *again);
    expect_same_activity(t.gpu_activity, again->gpu_activity);
  }
}

TEST(RecordCodec, StepTimelineBlockMalformedIsRejected) {
  model::StepRecord s =
      step_with({{Event::H2D, {1.0, 3.0}}, {Event::TracedStepTime, {5.0, std::nullopt}}});
  s.events.set_begin(Event::H2D, 0.25);
  s.thread = 1;
  const Bytes good = encode(s);
  ASSERT_TRUE(decode<model::StepRecord>(good));
  for (std::size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(decode<model::StepRecord>(Bytes(good.begin(), good.begin() + long(n)))) << n;
  // Where the block sits: after the values (3 of 8 bytes), thread then mask.
  const std::size_t block = good.size() - 8 - 3;
  ASSERT_EQ(good[block], 1);
  ASSERT_EQ(good[block + 2], 1u << unsigned(Event::H2D));
  // A begin on an event that was not measured (forward), and one of the
  // traced step itself.
  Bytes unmeasured = good;
  unmeasured[block + 2] = std::uint8_t(1u << unsigned(Event::Forward));
  EXPECT_FALSE(decode<model::StepRecord>(unmeasured));
  Bytes traced = good;
  traced[block + 2] = std::uint8_t(1u << unsigned(Event::TracedStepTime));
  EXPECT_FALSE(decode<model::StepRecord>(traced));
  // An empty block (thread 0, no begin) is not what an encoder writes.
  model::StepRecord plain = step_with({{Event::Forward, {1.0, {}}}});
  Bytes empty = encode(plain);
  empty[20] = std::uint8_t(empty[20] | 0x40);
  empty.insert(empty.end(), {0, 0, 0});
  EXPECT_FALSE(decode<model::StepRecord>(empty));
  // The same block saying thread 3 is fine.
  empty[empty.size() - 3] = 3;
  const auto three = decode<model::StepRecord>(empty);
  ASSERT_TRUE(three);
  EXPECT_EQ(three->thread, 3);
}

TEST(RecordCodec, GpuOnlyTimingRoundTrips) {
  // H2D captured from CUPTI with no H2D phase marked: a GPU value, no CPU value.
  const model::StepRecord s = step_with({{Event::H2D, {std::nullopt, 2.5}}});
  const auto back = decode<model::StepRecord>(encode(s));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->events.has(Event::H2D));
  EXPECT_FALSE(back->events.cpu_ms(Event::H2D).has_value());
  EXPECT_EQ(back->events.gpu_ms(Event::H2D), 2.5);
}

TEST(RecordCodec, StepMemoryLayoutAndRoundTrips) {
  model::StepMemoryRecord m;
  m.global_rank = 1;
  m.step = 2;
  m.device = "cu";
  m.peak_reserved_bytes = 1.0;
  // i32 1, i64 2, str "cu" (02 00 'c' 'u'), presence 0b10, f64 1.0.
  EXPECT_EQ(encode(m), (Bytes{1, 0,   0,   0, 2, 0, 0, 0, 0, 0, 0,    0,   2,
                              0, 'c', 'u', 2, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F}));
  for (unsigned mask = 0; mask < 4; ++mask) {
    for (double v : kExtremes) {
      model::StepMemoryRecord r;
      r.global_rank = 7;
      r.step = std::numeric_limits<std::int64_t>::max();
      r.device = mask % 2 ? "cuda:7" : "";
      if (mask & 1) r.peak_allocated_bytes = v;
      if (mask & 2) r.peak_reserved_bytes = -v;
      const auto back = decode<model::StepMemoryRecord>(encode(r));
      ASSERT_TRUE(back);
      EXPECT_EQ(back->global_rank, 7);
      EXPECT_EQ(back->step, r.step);
      EXPECT_EQ(back->device, r.device);
      EXPECT_TRUE(same(back->peak_allocated_bytes, r.peak_allocated_bytes));
      EXPECT_TRUE(same(back->peak_reserved_bytes, r.peak_reserved_bytes));
    }
  }
}

TEST(RecordCodec, LongStringsAreCutToTheLimit) {
  model::StepMemoryRecord m;
  m.device = std::string(kMaxStringBytes + 10, 'x');
  const auto back = decode<model::StepMemoryRecord>(encode(m));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->device, std::string(kMaxStringBytes, 'x'));
}

void expect_same_gpu(const model::GpuSample& a, const model::GpuSample& b) {
  EXPECT_EQ(a.index, b.index);
  EXPECT_TRUE(same(a.util_percent, b.util_percent));
  EXPECT_TRUE(same(a.mem_used_bytes, b.mem_used_bytes));
  EXPECT_TRUE(same(a.mem_total_bytes, b.mem_total_bytes));
  EXPECT_TRUE(same(a.temperature_c, b.temperature_c));
  EXPECT_TRUE(same(a.power_w, b.power_w));
  EXPECT_TRUE(same(a.power_limit_w, b.power_limit_w));
}

void expect_same_system(const model::SystemSample& a, const model::SystemSample& b) {
  EXPECT_EQ(a.node_rank, b.node_rank);
  EXPECT_EQ(bits_of(a.ts), bits_of(b.ts));
  EXPECT_TRUE(same(a.cpu_percent, b.cpu_percent));
  EXPECT_TRUE(same(a.ram_used_bytes, b.ram_used_bytes));
  EXPECT_TRUE(same(a.ram_total_bytes, b.ram_total_bytes));
  ASSERT_EQ(a.gpus.size(), b.gpus.size());
  for (std::size_t i = 0; i < a.gpus.size(); ++i)
    expect_same_gpu(a.gpus[i], b.gpus[i]);
}

TEST(RecordCodec, SystemRoundTripsEveryOptional) {
  // Host fields: all 8 presence combinations; GPUs: none, then one GPU per
  // presence combination of its 6 fields (64 GPUs).
  for (unsigned mask = 0; mask < 8; ++mask) {
    model::SystemSample s;
    s.node_rank = int(mask);
    s.ts = kExtremes[mask];
    if (mask & 1) s.cpu_percent = 250.5;
    if (mask & 2) s.ram_used_bytes = kExtremes[mask + 1];
    if (mask & 4) s.ram_total_bytes = 0.0;
    auto back = decode<model::SystemSample>(encode(s));
    ASSERT_TRUE(back);
    expect_same_system(s, *back);
    for (unsigned g = 0; g < 64; ++g) {
      model::GpuSample gpu;
      gpu.index = int(g) - 1;
      const double v = kExtremes[g % kExtremes.size()];
      if (g & 1) gpu.util_percent = v;
      if (g & 2) gpu.mem_used_bytes = v;
      if (g & 4) gpu.mem_total_bytes = v;
      if (g & 8) gpu.temperature_c = v;
      if (g & 16) gpu.power_w = v;
      if (g & 32) gpu.power_limit_w = v;
      s.gpus.push_back(gpu);
    }
    back = decode<model::SystemSample>(encode(s));
    ASSERT_TRUE(back);
    expect_same_system(s, *back);
  }
}

TEST(RecordCodec, SystemGpuListIsCutToTheLimit) {
  model::SystemSample s;
  for (int i = 0; i < 300; ++i)
    s.gpus.push_back({i, 1.0, {}, {}, {}, {}, {}});
  const auto back = decode<model::SystemSample>(encode(s));
  ASSERT_TRUE(back);
  ASSERT_EQ(back->gpus.size(), kMaxGpusPerSample);
  EXPECT_EQ(back->gpus.back().index, 255);
}

TEST(RecordCodec, ProcessRoundTripsEveryOptional) {
  // 16 combinations of the four host fields x gpu absent / gpu with each of
  // its 16 presence combinations.
  for (unsigned mask = 0; mask < 16; ++mask) {
    for (int g = -1; g < 16; ++g) {
      model::ProcessSample s;
      s.global_rank = 5;
      s.ts = 1.5;
      if (mask & 1) s.cpu_percent = 812.25;
      if (mask & 2) s.cpu_cores = std::numeric_limits<int>::max();
      if (mask & 4) s.rss_bytes = std::numeric_limits<double>::max();
      if (mask & 8) s.ram_total_bytes = std::numeric_limits<double>::denorm_min();
      if (g >= 0) {
        model::ProcessGpu gpu;
        if (g & 1) gpu.device = 0;
        if (g & 2) gpu.allocated_bytes = -0.0;
        if (g & 4) gpu.reserved_bytes = 8e9;
        if (g & 8) gpu.total_bytes = std::numeric_limits<double>::infinity();
        s.gpu = gpu;
      }
      const auto back = decode<model::ProcessSample>(encode(s));
      ASSERT_TRUE(back);
      EXPECT_EQ(back->global_rank, 5);
      EXPECT_EQ(back->ts, 1.5);
      EXPECT_TRUE(same(back->cpu_percent, s.cpu_percent));
      EXPECT_EQ(back->cpu_cores, s.cpu_cores);
      EXPECT_TRUE(same(back->rss_bytes, s.rss_bytes));
      EXPECT_TRUE(same(back->ram_total_bytes, s.ram_total_bytes));
      ASSERT_EQ(back->gpu.has_value(), s.gpu.has_value());
      if (s.gpu) {
        EXPECT_EQ(back->gpu->device, s.gpu->device);
        EXPECT_TRUE(same(back->gpu->allocated_bytes, s.gpu->allocated_bytes));
        EXPECT_TRUE(same(back->gpu->reserved_bytes, s.gpu->reserved_bytes));
        EXPECT_TRUE(same(back->gpu->total_bytes, s.gpu->total_bytes));
      }
    }
  }
}

model::RankIdentity identity_with(unsigned mask) {
  model::RankIdentity id;
  id.global_rank = 17;
  if (mask & 1) id.local_rank = 1;
  if (mask & 2) id.node_rank = 2;
  if (mask & 4) id.hostname = mask & 8 ? "" : "node-02.cluster";
  if (mask & 8) id.local_world_size = 8;
  if (mask & 16) id.world_size = std::numeric_limits<int>::min();
  return id;
}

TEST(RecordCodec, RankIdentityRoundTripsEveryOptional) {
  for (unsigned mask = 0; mask < 32; ++mask) {
    const model::RankIdentity id = identity_with(mask);
    const auto back = decode<model::RankIdentity>(encode(id));
    ASSERT_TRUE(back) << mask;
    EXPECT_EQ(back->global_rank, 17);
    EXPECT_EQ(back->local_rank, id.local_rank);
    EXPECT_EQ(back->node_rank, id.node_rank);
    EXPECT_EQ(back->hostname, id.hostname);  // "" present stays apart from absent
    EXPECT_EQ(back->local_world_size, id.local_world_size);
    EXPECT_EQ(back->world_size, id.world_size);
  }
}

TEST(RecordCodec, TracerStatsCarriesTheGpuClock) {
  model::TracerStats s;
  s.global_rank = 1;
  s.strategy = "ddp";
  s.gpu = model::TracerStats::Gpu{2, 990, 10, 4};
  s.activity_lost = 0;  // CUPTI ran and lost nothing: present, not absent
  const Bytes bytes = encode(s);
  EXPECT_EQ(bytes.size(), 4u + 8u + 5u + 24u + 1u + (4u + 24u) + 8u);
  const auto back = decode<model::TracerStats>(bytes);
  ASSERT_TRUE(back);
  ASSERT_TRUE(back->gpu);
  EXPECT_EQ(back->gpu->device, 2);
  EXPECT_EQ(back->gpu->steps_resolved, 990);
  EXPECT_EQ(back->gpu->steps_unresolved, 10);
  EXPECT_EQ(back->gpu->scopes_skipped, 4);
  EXPECT_EQ(back->activity_lost, 0);
  EXPECT_FALSE(back->overhead_ns_per_step);
  EXPECT_FALSE(decode<model::TracerStats>(Bytes(bytes.begin(), bytes.end() - 1)));
  Bytes unknown_bit = bytes;
  unknown_bit[4 + 8 + 5 + 24] |= 0x08;  // a presence bit nobody defined
  EXPECT_FALSE(decode<model::TracerStats>(unknown_bit));
}

TEST(RecordCodec, TracerStatsRoundTripsAndRejectsTruncation) {
  model::TracerStats s;
  s.global_rank = 3;
  s.pid = 4242;
  s.strategy = "ddp";
  s.steps_recorded = 1000;
  s.records_sent = 1990;
  s.records_dropped = 10;
  for (const std::optional<double> cost : {std::optional<double>{}, std::optional<double>{312.5}}) {
    s.overhead_ns_per_step = cost;
    const Bytes bytes = encode(s);
    // i32 + i64 + (u16 + 3) + 3 * i64 + presence byte (+ f64 when present).
    EXPECT_EQ(bytes.size(), 4u + 8u + 5u + 24u + 1u + (cost ? 8u : 0u));
    const auto back = decode<model::TracerStats>(bytes);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->global_rank, 3);
    EXPECT_EQ(back->pid, 4242);
    EXPECT_EQ(back->strategy, "ddp");
    EXPECT_EQ(back->steps_recorded, 1000);
    EXPECT_EQ(back->records_sent, 1990);
    EXPECT_EQ(back->records_dropped, 10);
    EXPECT_EQ(back->overhead_ns_per_step, cost);
    EXPECT_FALSE(decode<model::TracerStats>(Bytes(bytes.begin(), bytes.end() - 1)));
    Bytes longer = bytes;
    longer.push_back(0);
    EXPECT_FALSE(decode<model::TracerStats>(longer));
  }
}

TEST(RecordCodec, MalformedPayloadsAreRejected) {
  model::StepMemoryRecord m;
  m.device = "cuda:0";
  m.peak_allocated_bytes = 4.0;
  const Bytes good = encode(m);
  ASSERT_TRUE(decode<model::StepMemoryRecord>(good));
  // Every strict prefix is short.
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(decode<model::StepMemoryRecord>(Bytes(good.begin(), good.begin() + long(n)))) << n;
  }
  Bytes trailing = good;
  trailing.push_back(0);
  EXPECT_FALSE(decode<model::StepMemoryRecord>(trailing));
  Bytes unknown_bit = good;
  unknown_bit[4 + 8 + 2 + 6] |= 0x04;  // presence byte after i32, i64, str(6)
  EXPECT_FALSE(decode<model::StepMemoryRecord>(unknown_bit));

  // A string length over kMaxStringBytes: 1025 = 0x0401 -> 01 04.
  Bytes long_str = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x04};
  long_str.resize(long_str.size() + 1025 + 1, 0);
  EXPECT_FALSE(decode<model::StepMemoryRecord>(long_str));

  // Step: a cpu clock on an event that was not measured; an event bit above 5.
  Bytes step = encode(model::StepRecord{});
  ASSERT_TRUE(decode<model::StepRecord>(step));
  step[20] = 0x00;
  step[21] = 0x01;
  EXPECT_FALSE(decode<model::StepRecord>(step));
  step[20] = 0x40;  // a timeline block that is not there: short
  step[21] = 0x00;
  EXPECT_FALSE(decode<model::StepRecord>(step));

  // System: a GPU count the payload cannot hold, and one over the limit.
  Bytes sys = encode(model::SystemSample{});
  sys[sys.size() - 2] = 3;
  EXPECT_FALSE(decode<model::SystemSample>(sys));
  sys[sys.size() - 2] = 0x01;
  sys[sys.size() - 1] = 0x01;  // 257
  EXPECT_FALSE(decode<model::SystemSample>(sys));
}

// ---------------------------------------------------------------- hello

TEST(Hello, LayoutAndRoundTrip) {
  Hello h;
  h.token = "ab";
  h.identity.global_rank = 2;
  h.stream = 0x0102030405060708;
  // u16 version 8, str "ab", u64 stream, u8 role (a rank), identity: i32 2,
  // presence 0.
  EXPECT_EQ(encode_hello(h),
            (Bytes{8, 0, 2, 0, 'a', 'b', 8, 7, 6, 5, 4, 3, 2, 1, 0, 2, 0, 0, 0, 0}));
  h.role = PeerRole::Relay;
  EXPECT_EQ(encode_hello(h),
            (Bytes{8, 0, 2, 0, 'a', 'b', 8, 7, 6, 5, 4, 3, 2, 1, 1, 2, 0, 0, 0, 0}));
  EXPECT_EQ(decode_hello(encode_hello(h))->role, PeerRole::Relay);
  // No third role.
  EXPECT_FALSE(decode_hello({5, 0, 2, 0, 'a', 'b', 8, 7, 6, 5, 4, 3, 2, 1, 2, 2, 0, 0, 0, 0}));
  // Protocol 4 has no role: always a rank.
  h.protocol_version = 4;
  EXPECT_EQ(encode_hello(h), (Bytes{4, 0, 2, 0, 'a', 'b', 8, 7, 6, 5, 4, 3, 2, 1, 2, 0, 0, 0, 0}));
  EXPECT_EQ(decode_hello(encode_hello(h))->role, PeerRole::Rank);
  h.role = PeerRole::Rank;
  // Protocol 3 has no stream.
  h.protocol_version = 3;
  EXPECT_EQ(encode_hello(h), (Bytes{3, 0, 2, 0, 'a', 'b', 2, 0, 0, 0, 0}));
  for (unsigned mask = 0; mask < 32; ++mask) {
    h.protocol_version = std::uint16_t(mask * 2000);
    h.token = std::string(mask * 3, char('a' + mask));
    h.stream = mask * 0x9e3779b97f4a7c15u;
    h.identity = identity_with(mask);
    const auto back = decode_hello(encode_hello(h));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->protocol_version, h.protocol_version);
    EXPECT_EQ(back->stream, h.protocol_version >= 4 ? h.stream : 0u);
    EXPECT_EQ(back->token, h.token);
    EXPECT_EQ(back->identity.hostname, h.identity.hostname);
    EXPECT_EQ(back->identity.world_size, h.identity.world_size);
  }
  EXPECT_FALSE(decode_hello({1, 0, 2, 0, 'a', 'b', 2, 0, 0, 0}));
  EXPECT_FALSE(decode_hello({1, 0, 2, 0, 'a', 'b', 2, 0, 0, 0, 0, 0}));
}

TEST(Hello, LargestHelloFitsThePreHelloLimit) {
  Hello h;
  h.token = std::string(kMaxStringBytes + 10, 't');  // cut to kMaxStringBytes
  h.identity.global_rank = 1;
  h.identity.local_rank = 2;
  h.identity.node_rank = 3;
  h.identity.hostname = std::string(kMaxStringBytes, 'h');
  h.identity.local_world_size = 4;
  h.identity.world_size = 5;
  const Bytes p = encode_hello(h);
  EXPECT_EQ(p.size(), kMaxHelloPayloadBytes);
  EXPECT_EQ(kMaxHelloPayloadBytes, 2084u);
  EXPECT_LE(p.size(), kMaxPreHelloFrameBytes);
  EXPECT_TRUE(decode_hello(p));
}

TEST(Hello, CheckAcceptsOnlyThisProtocolAndToken) {
  Hello h;
  h.token = "s3cret-token";
  EXPECT_TRUE(check_hello(h, "s3cret-token").ok());
  EXPECT_FALSE(check_hello(h, "s3cret-token").reason);
  const std::string wrong = "wrong run token (the connection is not from this run)";
  for (const char* other : {"s3cret-tokeN", "s3cret-toke", "s3cret-token!", "", "x"}) {
    const HelloCheck c = check_hello(h, other);
    EXPECT_FALSE(c.ok()) << other;
    EXPECT_EQ(c.reason.value_or(""), wrong);
  }
  Hello empty;
  EXPECT_TRUE(check_hello(empty, "").ok());
  EXPECT_EQ(check_hello(empty, "t").reason.value_or(""), wrong);

  // Version 1 ranks (no heartbeats), 2 (no timeline block), 3 (no Verdict),
  // 4 (no role), 5 (no profiles), 6 (no profile requests) and 7 (no
  // capture said begun) are still taken; 0 and 9 are not.
  for (const int v : {1, 2, 3, 4, 5, 6, 7}) {
    h.protocol_version = std::uint16_t(v);
    EXPECT_TRUE(check_hello(h, "s3cret-token").ok()) << v;
  }
  for (const int v : {0, 9}) {
    h.protocol_version = std::uint16_t(v);
    EXPECT_EQ(
        check_hello(h, "s3cret-token").reason.value_or(""),
        "protocol version " + std::to_string(v) + " is not supported (this build speaks 1 to 8)");
  }
}

// ---------------------------------------------------------------- fuzz
//
// The promises checked on each input are those of the libFuzzer target
// fuzz_frame (tests/fuzz/frame_invariants.hpp); here they run on a fixed-seed
// loop and on the fuzz corpus, so that every build checks them cheaply.

using fuzz::InputCounts;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // gcc
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;  // clang
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

void expect_promises_kept(const Bytes& input, InputCounts& counts) {
  const auto why = fuzz::check_frame_input(input.data(), input.size(), &counts);
  EXPECT_FALSE(why) << why.value_or("") << " (input of " << input.size() << " bytes)";
}

model::RankPosition heartbeat_sample() {
  model::RankPosition p;
  p.global_rank = 3;
  p.ts = 1764892800.25;
  p.steps_done = 811;
  p.phase = model::LoopPhase::Backward;
  return p;
}

// The heartbeat: every field back as it went, and every value the decoder
// must refuse (a phase past the last, a negative count, a bad time, an
// unknown flag, a byte short or over).
TEST(Heartbeat, RoundTripsAndRefusesWhatNoRankSends) {
  model::RankPosition p = heartbeat_sample();
  p.recording = false;
  const Bytes bytes = encode(p);
  EXPECT_EQ(bytes.size(), 22u);
  const auto back = decode<model::RankPosition>(bytes);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->global_rank, 3);
  EXPECT_DOUBLE_EQ(back->ts, p.ts);
  EXPECT_EQ(back->steps_done, 811);
  EXPECT_EQ(back->phase, model::LoopPhase::Backward);
  EXPECT_FALSE(back->recording);
  const auto with = [&](std::size_t at, std::uint8_t v) {
    Bytes b = bytes;
    b[at] = v;
    return decode<model::RankPosition>(b);
  };
  EXPECT_FALSE(with(20, model::kMaxLoopPhase + 1));  // phase
  EXPECT_TRUE(with(20, model::kMaxLoopPhase));
  EXPECT_FALSE(with(21, 2));     // flags
  EXPECT_FALSE(with(3, 0x80));   // negative rank
  EXPECT_FALSE(with(19, 0x80));  // negative steps
  EXPECT_FALSE(with(11, 0xC1));  // a time below zero
  Bytes nan = bytes;             // exponent all ones, mantissa not zero: NaN
  nan[10] = 0xFF;
  nan[11] = 0x7F;
  EXPECT_FALSE(decode<model::RankPosition>(nan));
  EXPECT_FALSE(decode<model::RankPosition>(Bytes(bytes.begin(), bytes.end() - 1)));
  Bytes longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decode<model::RankPosition>(longer));
}

model::TracerStats tracer_stats_sample() {
  model::TracerStats t;
  t.global_rank = 3;
  t.pid = 4242;
  t.strategy = "ddp";
  t.steps_recorded = 1000;
  t.records_sent = 2990;
  t.records_dropped = 10;
  t.overhead_ns_per_step = 850.5;
  t.gpu = model::TracerStats::Gpu{1, 990, 10, 3};
  t.activity_lost = 7;
  return t;
}

/// A profile chunk with every field present: two ops, one of them linked to
/// its backward, one with shapes.
model::ProfileChunk profile_sample() {
  model::ProfileChunk p;
  p.global_rank = 1;
  p.first_step = 5;
  p.last_step = 8;
  p.chunk = 3;
  p.last = 1;
  p.ops_cut = 2;
  p.error = "cut";
  p.ops.push_back(
      model::ProfileOp{"aten::addmm", 1'796'553'490'210'827, 20, 1, 40, 0, "[[32, 64]]"});
  p.ops.push_back(model::ProfileOp{"aten::relu", 1'796'553'490'210'850, 3, 1, std::nullopt, 0, ""});
  return p;
}

/// The seed inputs of fuzz_frame, written by the real encoders: a whole
/// session, each frame type on its own, bare payloads, and two bad streams.
std::vector<std::pair<std::string, Bytes>> corpus_seeds() {
  model::StepRecord step = step_with({{Event::InputWait, {0.5, {}}},
                                      {Event::H2D, {0.25, 0.2}},
                                      {Event::Forward, {1.0, 2.0}},
                                      {Event::Backward, {3.0, {}}},
                                      {Event::OptimizerStep, {0.75, 0.7}},
                                      {Event::TracedStepTime, {6.0, 5.5}}});
  step.gpu_activity = activity_sample();
  step.events.set_begin(Event::InputWait, -0.5);
  step.events.set_begin(Event::Forward, 0.25);
  step.thread = 1;
  model::SystemSample sys;
  sys.node_rank = 1;
  sys.ts = 1.7e9;
  sys.cpu_percent = 3.0;
  sys.ram_used_bytes = 1e9;
  sys.ram_total_bytes = 64e9;
  sys.gpus.push_back({0, 50.0, 1e9, 8e10, 60.0, 300.0, 400.0});
  sys.gpus.push_back({1, {}, 2e9, 8e10, {}, {}, {}});
  model::ProcessSample proc;
  proc.global_rank = 3;
  proc.ts = 1.7e9;
  proc.cpu_percent = 180.0;
  proc.cpu_cores = 8;
  proc.rss_bytes = 3e9;
  proc.gpu = model::ProcessGpu{0, 1.0, 2.0, 3.0};
  Hello hello;
  hello.token = "0123456789abcdef0123456789abcdef";
  hello.identity = identity_with(31 & ~8u);
  model::TracerStats first;
  first.global_rank = 3;
  first.pid = 4242;
  first.strategy = "ddp";
  const model::StepMemoryRecord mem{3, 123456789012LL, "cuda:0", 5e9, 6e9};

  const Bytes f_hello = frame(FrameType::Hello, encode_hello(hello));
  const Bytes f_step = frame(FrameType::Step, encode(step));
  const Bytes f_mem = frame(FrameType::StepMemory, encode(mem));
  const Bytes f_sys = frame(FrameType::System, encode(sys));
  const Bytes f_proc = frame(FrameType::Process, encode(proc));
  const Bytes f_stats = frame(FrameType::TracerStats, encode(tracer_stats_sample()));
  const Bytes f_bye = frame(FrameType::Bye, {});
  const Bytes f_beat = frame(FrameType::Heartbeat, encode(heartbeat_sample()));
  const Bytes f_goodbye =
      frame(frame_type_of<model::RankGoodbye>(), encode(model::RankGoodbye{3, 1}));
  const Bytes session = concat({f_hello, frame(FrameType::TracerStats, encode(first)), f_step,
                                f_beat, f_mem, f_sys, f_proc, f_stats, f_goodbye, f_bye});
  // Protocol 5: another node's relay, with a rank's end and its box's step.
  Hello relay = hello;
  relay.role = PeerRole::Relay;
  model::RankEnd end{
      3, 137, 9, 0, 123456789011LL, int(model::LoopPhase::Backward), "0123456789abcdef"};
  const Bytes f_end = frame(frame_type_of<model::RankEnd>(), encode(end));
  const Bytes relay_session =
      concat({frame(FrameType::Hello, encode_hello(relay)), f_end, f_step, f_mem, f_bye});
  Bytes bad_version = f_bye;
  bad_version[5] = kCodecVersion + 1;
  Verdict refused;
  refused.accepted = false;
  refused.reason = "wrong run token (the connection is not from this run)";
  return {{"session.bin", session},
          {"verdict_accepted.bin", frame(FrameType::Verdict, encode_verdict(Verdict{}))},
          {"verdict_refused.bin", frame(FrameType::Verdict, encode_verdict(refused))},
          {"hello.bin", f_hello},
          {"step.bin", f_step},
          {"step_memory.bin", f_mem},
          {"system.bin", f_sys},
          {"process.bin", f_proc},
          {"tracer_stats.bin", f_stats},
          {"heartbeat.bin", f_beat},
          {"goodbye.bin", f_goodbye},
          {"rank_end.bin", f_end},
          {"profile.bin", frame(frame_type_of<model::ProfileChunk>(), encode(profile_sample()))},
          {"profile_ready.bin",
           frame(frame_type_of<model::ProfileReady>(), encode(model::ProfileReady{3}))},
          {"profile_request.bin", frame(frame_type_of<model::ProfileRequest>(),
                                        encode(model::ProfileRequest{3, 120, 10}))},
          {"profiled_steps.bin",
           frame(frame_type_of<model::ProfiledSteps>(), encode(model::ProfiledSteps{3, 120, 129}))},
          {"relay_session.bin", relay_session},
          {"truncated_session.bin", Bytes(session.begin(), session.end() - 5)},
          {"bad_version.bin", bad_version},
          {"payload_step.bin", encode(step)},
          {"payload_tracer_stats.bin", encode(tracer_stats_sample())},
          {"payload_hello.bin", encode_hello(hello)}};
}

const std::filesystem::path kCorpus =
    std::filesystem::path(TRACEML_TEST_DATA_DIR) / "fuzz" / "corpus" / "fuzz_frame";

Bytes read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The committed seeds are what today's encoders write, so that a layout change
// shows here; TRACEML_UPDATE_GOLDEN=1 rewrites them.
TEST(FuzzCorpus, SeedsAreTheEncodersBytes) {
  const auto seeds = corpus_seeds();
  if (std::getenv("TRACEML_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(kCorpus);
    for (const auto& [name, bytes] : seeds) {
      std::ofstream(kCorpus / name, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    }
    GTEST_SKIP() << "fuzz_frame seeds rewritten";
  }
  for (const auto& [name, bytes] : seeds) {
    ASSERT_TRUE(std::filesystem::exists(kCorpus / name))
        << name << " missing; run with TRACEML_UPDATE_GOLDEN=1";
    EXPECT_EQ(read_bytes(kCorpus / name), bytes) << name;
  }
}

// Every corpus input, the seeds and the inputs that once broke a promise.
TEST(FuzzCorpus, EveryInputKeepsTheTransportsPromises) {
  InputCounts counts;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) {
    ++files;
    SCOPED_TRACE(entry.path().filename().string());
    expect_promises_kept(read_bytes(entry.path()), counts);
  }
  EXPECT_GE(files, 12);
  // The seeds reach both verdicts and every record decoder accepts one.
  EXPECT_GT(counts.frames, 10);
  EXPECT_GT(counts.failed_streams, 1);
  EXPECT_GE(counts.accepted_payloads, 12);
}

TEST(Fuzz, RandomAndMutatedInputNeverCrashesAndFailsCleanly) {
  // CPU time, not wall time: the bound is on the test's own cost, which a
  // loaded machine does not change.
  const std::clock_t start = std::clock();
  std::mt19937 rng(20261202u);  // mt19937's sequence is fixed by the standard
  auto byte = [&] { return static_cast<std::uint8_t>(rng() & 0xFFu); };
  auto below = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };

  // Valid frames of every kind, to mutate.
  model::SystemSample sys;
  sys.cpu_percent = 3.0;
  sys.gpus.push_back({0, 50.0, 1e9, 8e10, 60.0, 300.0, 400.0});
  model::ProcessSample proc;
  proc.cpu_cores = 8;
  proc.gpu = model::ProcessGpu{0, 1.0, 2.0, 3.0};
  Hello hello;
  hello.token = "tok";
  hello.identity = identity_with(31);
  model::StepRecord step = step_with({{Event::Forward, {1.0, 2.0}}, {Event::Backward, {3.0, {}}}});
  step.gpu_activity = activity_sample();
  const std::vector<Bytes> payloads = {
      encode(step),        encode(model::StepMemoryRecord{1, 2, "cuda:0", 5.0, {}}),
      encode(sys),         encode(proc),
      encode_hello(hello), encode(tracer_stats_sample())};
  const FrameType types[] = {FrameType::Step,    FrameType::StepMemory, FrameType::System,
                             FrameType::Process, FrameType::Hello,      FrameType::TracerStats};
  constexpr std::size_t kKinds = std::size(types);

  InputCounts counts;
  for (int iter = 0; iter < 20000; ++iter) {
    Bytes buf;
    if (iter % 2 == 0) {
      // Random bytes; half the time behind a plausible header so that the
      // payload decoders, not only the header checks, see random input.
      const std::size_t n = below(64);
      for (std::size_t i = 0; i < n; ++i)
        buf.push_back(byte());
      if (iter % 4 == 0) buf = frame(types[below(kKinds)], buf);
    } else {
      // A valid stream of 1-3 frames, then 1-4 mutations: flip, truncate, insert.
      for (std::size_t k = 0, count = 1 + below(3); k < count; ++k) {
        const std::size_t which = below(kKinds);
        const Bytes f = frame(types[which], payloads[which]);
        buf.insert(buf.end(), f.begin(), f.end());
      }
      for (std::size_t m = 0, count = 1 + below(4); m < count && !buf.empty(); ++m) {
        switch (below(3)) {
          case 0:
            buf[below(buf.size())] ^= static_cast<std::uint8_t>(1u << below(8));
            break;
          case 1:
            buf.resize(below(buf.size()));
            break;
          default:
            buf.insert(buf.begin() + long(below(buf.size() + 1)), byte());
        }
      }
    }
    expect_promises_kept(buf, counts);
  }
  const double ms = 1000.0 * double(std::clock() - start) / CLOCKS_PER_SEC;
  // Both outcomes must be exercised, or the loop proves nothing: mutated
  // streams still deliver their intact leading frames, whose payloads decode,
  // and most random headers are rejected.
  EXPECT_GT(counts.frames, 5000);
  EXPECT_GT(counts.accepted_payloads, 2000);
  EXPECT_GT(counts.failed_streams, 5000);
  std::printf("fuzz: %d frames, %d payloads accepted, %d streams rejected\n", counts.frames,
              counts.accepted_payloads, counts.failed_streams);
  // The bound keeps the loop cheap in the ordinary build; a sanitizer
  // multiplies its cost (ASan at -O0 by about 8), so there it is only shown.
  if (!kSanitized) {
    EXPECT_LT(ms, 2000.0);
  }
  std::printf("fuzz: %.0f ms of CPU time\n", ms);
}

}  // namespace
}  // namespace traceml::transport
