// The record-kind table (model/record_kinds.hpp) and what the transport
// derives from it: each frame byte names one kind, and decode(frame) and
// encode_into(Record) agree with each kind's own codec.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <type_traits>
#include <variant>

#include "model/record_kinds.hpp"
#include "transport/frame.hpp"
#include "transport/record_codec.hpp"

namespace traceml::transport {
namespace {

TEST(RecordKinds, FrameBytesNamesAndFileTypesAreEachOnce) {
  std::set<int> frames = {static_cast<int>(FrameType::Hello), static_cast<int>(FrameType::Bye),
                          static_cast<int>(FrameType::Verdict)};
  std::set<std::string> names;
  std::set<std::string> jsonl;
  model::for_each_kind([&](const auto& row) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name;
    EXPECT_EQ(model::kind_name(row.kind), std::string(row.name));
    if (row.jsonl_type != nullptr) {
      EXPECT_TRUE(jsonl.insert(row.jsonl_type).second) << row.name;
    }
    if (row.frame == 0) return;
    EXPECT_TRUE(frames.insert(row.frame).second) << row.name << " reuses frame byte " << +row.frame;
    EXPECT_NE(row.direction, model::Direction::Local) << row.name;
    const auto type = frame_type_from_byte(row.frame);
    ASSERT_TRUE(type.has_value()) << row.name;
    EXPECT_EQ(std::string(frame_type_name(*type)), row.name);
  });
  // The bytes the wire has always used (docs/transport.md).
  EXPECT_EQ(frame_type_of<model::StepRecord>(), FrameType::Step);
  EXPECT_EQ(frame_type_of<model::StepMemoryRecord>(), FrameType::StepMemory);
  EXPECT_EQ(frame_type_of<model::SystemSample>(), FrameType::System);
  EXPECT_EQ(frame_type_of<model::ProcessSample>(), FrameType::Process);
  EXPECT_EQ(frame_type_of<model::TracerStats>(), FrameType::TracerStats);
  EXPECT_EQ(frame_type_of<model::RankPosition>(), FrameType::Heartbeat);
  EXPECT_EQ(int(frame_type_of<model::RankGoodbye>()), 10);  // protocol 4; no FrameType name
  EXPECT_STREQ(frame_type_name(frame_type_of<model::RankGoodbye>()), "goodbye");
  EXPECT_FALSE(frame_type_from_byte(0).has_value());
  EXPECT_EQ(int(frame_type_of<model::RankEnd>()), 11);  // protocol 5: relays only
  EXPECT_STREQ(frame_type_name(frame_type_of<model::RankEnd>()), "rank_end");
  EXPECT_EQ(int(frame_type_of<model::ProfileChunk>()), 12);  // protocol 6
  EXPECT_STREQ(frame_type_name(frame_type_of<model::ProfileChunk>()), "profile");
  EXPECT_EQ(int(frame_type_of<model::ProfileReady>()), 13);    // protocol 7
  EXPECT_EQ(int(frame_type_of<model::ProfileRequest>()), 14);  // protocol 7, collector to rank
  EXPECT_STREQ(frame_type_name(frame_type_of<model::ProfileRequest>()), "profile_request");
  EXPECT_EQ(int(frame_type_of<model::ProfiledSteps>()), 15);  // protocol 8
  EXPECT_STREQ(frame_type_name(frame_type_of<model::ProfiledSteps>()), "profiled_steps");
  EXPECT_FALSE(frame_type_from_byte(16).has_value());
}

TEST(RecordKinds, EveryFrameDecodesToItsKindAndEncodesAsItsOwnCodec) {
  int kinds_with_frames = 0;
  model::for_each_kind([&](const auto& row) {
    using R = typename std::decay_t<decltype(row)>::Type;
    R record{};
    std::vector<std::uint8_t> through_record;
    const bool encoded = encode_into(through_record, model::Record(record));
    if constexpr (model::row_of<R>().frame == 0) {
      EXPECT_FALSE(encoded) << row.name << " has no frame of its own";
      EXPECT_TRUE(through_record.empty());
    } else {
      ++kinds_with_frames;
      ASSERT_TRUE(encoded) << row.name;
      const std::vector<std::uint8_t> payload = encode(record);
      EXPECT_EQ(through_record, payload) << row.name;
      const auto decoded = decode(Frame{frame_type_of<R>(), payload});
      ASSERT_TRUE(decoded.has_value()) << row.name;
      EXPECT_EQ(model::kind_of(*decoded), row.kind) << row.name;
      EXPECT_EQ(encode(std::get<R>(*decoded)), payload) << row.name;
      // One byte more is malformed for every kind.
      std::vector<std::uint8_t> longer = payload;
      longer.push_back(0);
      EXPECT_FALSE(decode(Frame{frame_type_of<R>(), longer}).has_value()) << row.name;
    }
  });
  EXPECT_GE(kinds_with_frames, 7);  // the six of protocol 3, the goodbye, and any added since
  // Frames that carry no record.
  EXPECT_FALSE(decode(Frame{FrameType::Bye, {}}).has_value());
  EXPECT_FALSE(decode(Frame{FrameType::Hello, {}}).has_value());
}

TEST(RecordKinds, TheChecksAreTheRows) {
  model::StepRecord bad;
  bad.step = 0;  // step ids start at 1
  EXPECT_EQ(model::check(model::Record(bad)), model::check_step(bad));
  EXPECT_TRUE(model::check(model::Record(bad)).has_value());
  // A kind without a check (the heartbeat: its decoder checks it) passes.
  EXPECT_FALSE(model::check(model::Record(model::RankPosition{})).has_value());
  // The goodbye's exit status is what a parent can see: 0 to 255.
  EXPECT_FALSE(model::check(model::Record(model::RankGoodbye{2, 255})).has_value());
  EXPECT_EQ(model::check(model::Record(model::RankGoodbye{2, 256})),
            "'exit_status' must be an integer between 0 and 255, got 256");
  EXPECT_EQ(model::check(model::Record(model::RankGoodbye{2, -1})),
            "'exit_status' must be an integer >= 0, got -1");
}

TEST(RecordKinds, AGoodbyeRoundTripsThroughItsFrame) {
  const model::RankGoodbye g{3, 42};
  std::vector<std::uint8_t> bytes;
  ASSERT_GT(append_record_frame(bytes, g), 0u);
  FrameDecoder d;
  EXPECT_EQ(d.feed(bytes.data(), bytes.size()), bytes.size());
  const auto frame = d.next();
  ASSERT_TRUE(frame.has_value());
  // i32 rank, presence byte, i32 status: derived from its field list.
  EXPECT_EQ(frame->payload, (std::vector<std::uint8_t>{3, 0, 0, 0, 1, 42, 0, 0, 0}));
  const auto back = decode(*frame);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(model::kind_of(*back), model::RecordKind::Goodbye);
  EXPECT_EQ(std::get<model::RankGoodbye>(*back).global_rank, 3);
  EXPECT_EQ(std::get<model::RankGoodbye>(*back).exit_status, 42);
  EXPECT_EQ(model::row_of<model::RankGoodbye>().since_protocol, 4);
  // Drained at an explicit shutdown: no status yet.
  bytes.clear();
  ASSERT_GT(append_record_frame(bytes, model::RankGoodbye{3, std::nullopt}), 0u);
  FrameDecoder d2;
  d2.feed(bytes.data(), bytes.size());
  const auto drained = decode(*d2.next());
  ASSERT_TRUE(drained.has_value());
  EXPECT_FALSE(std::get<model::RankGoodbye>(*drained).exit_status.has_value());
}

}  // namespace
}  // namespace traceml::transport
