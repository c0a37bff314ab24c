#include "transport/record_codec.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <variant>

#include "transport/hello.hpp"
#include "transport/wire.hpp"

namespace traceml::transport {

using layout::finished;
using layout::get_record;
using layout::get_required;
using layout::has;
using layout::put_record;
using layout::put_required;
using wire::Reader;
using wire::Writer;

// --- StepRecord: its values (i32 rank, i64 step, f64 ts), u8 event mask
// (bit 6: a timeline block follows; bit 7: a GPU activity block follows), u8
// cpu mask, u8 gpu mask, then per event in Event order its cpu_ms and gpu_ms
// if present, then the timeline block if any (u16 thread, u8 begin mask, then
// each begin_ms present in Event order), then the GPU activity block if any
// (StepGpuActivity's values in list order).
//
// The flags live in bits the six events leave free, so a step with neither
// block encodes exactly as before they existed (protocol 2 and earlier).
namespace {
constexpr unsigned kTimelineFlag = 1u << 6;
constexpr unsigned kGpuActivityFlag = 1u << 7;
constexpr unsigned kAllEvents = (1u << model::kEventCount) - 1;
constexpr unsigned kTracedBit = 1u << unsigned(model::Event::TracedStepTime);
}  // namespace

template <>
void encode_into<model::StepRecord>(std::vector<std::uint8_t>& out, const model::StepRecord& s) {
  Writer w(out);
  put_required(w, s);
  const auto& e = s.events;
  const auto begins = static_cast<std::uint8_t>(e.begin_mask());
  const bool timeline = begins != 0 || s.thread != 0;
  w.u8(static_cast<std::uint8_t>(e.event_mask() | (timeline ? kTimelineFlag : 0u) |
                                 (s.gpu_activity ? kGpuActivityFlag : 0u)));
  w.u8(static_cast<std::uint8_t>(e.cpu_mask()));
  w.u8(static_cast<std::uint8_t>(e.gpu_mask()));
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    if (has(static_cast<std::uint8_t>(e.cpu_mask()), unsigned(i))) w.f64(e.cpu_values()[i]);
    if (has(static_cast<std::uint8_t>(e.gpu_mask()), unsigned(i))) w.f64(e.gpu_values()[i]);
  }
  if (timeline) {
    w.u16(static_cast<std::uint16_t>(std::clamp(s.thread, 0, model::kMaxThread)));
    w.u8(begins);
    for (std::size_t i = 0; i < model::kEventCount; ++i)
      if (has(begins, unsigned(i))) w.f64(e.begin_values()[i]);
  }
  if (s.gpu_activity) put_record(w, *s.gpu_activity);
}

template <>
std::optional<model::StepRecord> decode<model::StepRecord>(
    const std::vector<std::uint8_t>& payload) {
  Reader r(payload.data(), payload.size());
  model::StepRecord s;
  get_required(r, s, payload.size());
  const std::uint8_t head = r.u8();
  const bool activity = (head & kGpuActivityFlag) != 0;
  const bool timeline = (head & kTimelineFlag) != 0;
  const auto events = static_cast<std::uint8_t>(head & kAllEvents);
  const std::uint8_t cpu = r.u8();
  const std::uint8_t gpu = r.u8();
  // A clock can only be present on a measured event, and only six events exist.
  if ((cpu & ~unsigned(events)) != 0 || (gpu & ~unsigned(events)) != 0) return std::nullopt;
  for (unsigned i = 0; i < model::kEventCount && r.ok(); ++i) {
    if (!has(events, i)) continue;
    model::Timing t;
    if (has(cpu, i)) t.cpu_ms = r.f64();
    if (has(gpu, i)) t.gpu_ms = r.f64();
    s.events.set(static_cast<model::Event>(i), t);
  }
  if (timeline) {
    s.thread = r.u16();
    const std::uint8_t begins = r.u8();
    // A begin is on the CPU clock, never of the traced step itself; a block
    // with nothing in it is not how an encoder writes a step.
    if ((begins & ~unsigned(cpu)) != 0 || (begins & kTracedBit) != 0 ||
        (begins == 0 && s.thread == 0))
      return std::nullopt;
    for (unsigned i = 0; i < model::kEventCount && r.ok(); ++i)
      if (has(begins, i)) s.events.set_begin(static_cast<model::Event>(i), r.f64());
  }
  if (activity) get_record(r, s.gpu_activity.emplace(), payload.size());
  return finished(r, s);
}

template <>
void encode_into<model::RankPosition>(std::vector<std::uint8_t>& out,
                                      const model::RankPosition& p) {
  wire::Writer w(out);
  w.i32(p.global_rank);
  w.f64(p.ts);
  w.i64(p.steps_done);
  w.u8(static_cast<std::uint8_t>(p.phase));
  w.u8(p.recording ? 1 : 0);
}

template <>
std::optional<model::RankPosition> decode<model::RankPosition>(
    const std::vector<std::uint8_t>& payload) {
  wire::Reader r(payload.data(), payload.size());
  model::RankPosition p;
  p.global_rank = r.i32();
  p.ts = r.f64();
  p.steps_done = r.i64();
  const std::uint8_t phase = r.u8();
  const std::uint8_t flags = r.u8();
  if (!r.done() || p.global_rank < 0 || !std::isfinite(p.ts) || p.ts < 0.0 || p.steps_done < 0 ||
      phase > model::kMaxLoopPhase || flags > 1)
    return std::nullopt;
  p.phase = static_cast<model::LoopPhase>(phase);
  p.recording = flags == 1;
  return p;
}

// ---------------------------------------------------------------------------
// Any kind, by its row.

namespace {

/// Every kind with a frame is one this build can speak and the frame
/// decoder knows.
template <std::size_t... I>
constexpr bool frames_known(std::index_sequence<I...>) {
  const auto ok = [](const auto& row) {
    return row.frame == 0 ||
           (row.since_protocol >= kOldestProtocolVersion && row.since_protocol <= kProtocolVersion);
  };
  return (ok(std::get<I>(model::kRecordKinds)) && ...);
}
static_assert(frames_known(std::make_index_sequence<model::kRecordKindCount>{}),
              "a kind's frame must come with a protocol version this build speaks");

}  // namespace

bool encode_into(std::vector<std::uint8_t>& out, const model::Record& r) {
  return std::visit(
      [&out](const auto& x) {
        using R = std::decay_t<decltype(x)>;
        if constexpr (model::row_of<R>().frame != 0) {
          encode_into(out, x);
          return true;
        } else {
          return false;
        }
      },
      r);
}

std::optional<model::Record> decode(const Frame& frame) {
  std::optional<model::Record> out;
  model::for_each_kind([&](const auto& row) {
    using R = typename std::decay_t<decltype(row)>::Type;
    if constexpr (model::row_of<R>().frame != 0) {
      if (static_cast<std::uint8_t>(frame.type) != row.frame) return;
      if (auto r = decode<R>(frame.payload)) out.emplace(std::in_place_type<R>, std::move(*r));
    }
  });
  return out;
}

}  // namespace traceml::transport
