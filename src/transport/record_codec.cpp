#include "transport/record_codec.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "transport/wire.hpp"

namespace traceml::transport {
namespace {

using wire::Reader;
using wire::Writer;

std::string capped(const std::string& s) {
  return s.substr(0, kMaxStringBytes);
}

// Presence bits: one byte per record (or nested object) with bit i set when its
// i-th optional field is present; the present values follow in bit order.
// Bits a layout does not define must be clear, or the payload is malformed.
class Presence {
 public:
  void add(bool present) {
    if (present) bits_ = std::uint8_t(bits_ | (1u << n_));
    ++n_;
  }
  [[nodiscard]] std::uint8_t bits() const { return bits_; }

 private:
  std::uint8_t bits_ = 0;
  unsigned n_ = 0;
};

bool has(std::uint8_t bits, unsigned i) {
  return (bits >> i & 1u) != 0;
}
/// Reads a presence byte of `count` defined bits; fails the reader on others.
std::uint8_t read_presence(Reader& r, unsigned count) {
  const std::uint8_t bits = r.u8();
  if ((bits >> count) != 0) r.fail();
  return bits;
}

template <typename T>
std::optional<T> finished(const Reader& r, T value) {
  if (!r.done()) return std::nullopt;
  return value;
}

// ---------------------------------------------------------------------------
// Records derived from their field lists (model/telemetry.hpp). A record is
// laid out as: its always-present values in list order; then, if it has
// optional members, one presence byte (bit i: the i-th optional member in
// list order) and the present ones; then its lists, each a u16 count and the
// elements. A nested record is laid out the same way, in place.
//   int: i32   std::int64_t: i64   double: f64   string: u16 length + bytes

template <class R>
void put_record(Writer& w, const R& r);
template <class R>
void get_record(Reader& r, R& out, std::size_t payload_size);

template <class V>
void put_value(Writer& w, const V& v) {
  if constexpr (std::is_same_v<V, int>) {
    w.i32(v);
  } else if constexpr (std::is_same_v<V, std::int64_t>) {
    w.i64(v);
  } else if constexpr (std::is_same_v<V, double>) {
    w.f64(v);
  } else if constexpr (std::is_same_v<V, std::string>) {
    w.str(capped(v));
  } else {
    static_assert(model::schema::has_schema_v<V>, "a field type the codec does not know");
    put_record(w, v);
  }
}

template <class V>
void get_value(Reader& r, V& v, std::size_t payload_size) {
  if constexpr (std::is_same_v<V, int>) {
    v = r.i32();
  } else if constexpr (std::is_same_v<V, std::int64_t>) {
    v = r.i64();
  } else if constexpr (std::is_same_v<V, double>) {
    v = r.f64();
  } else if constexpr (std::is_same_v<V, std::string>) {
    v = r.str(kMaxStringBytes);
  } else {
    get_record(r, v, payload_size);
  }
}

/// The fewest bytes an encoded R takes: what a list count is checked
/// against before anything is allocated for it.
template <class R>
constexpr std::size_t min_encoded_bytes() {
  std::size_t n = model::schema::optional_count<R>() > 0 ? 1 : 0;
  model::schema::for_each_field<R>([&n](const auto& f) {
    using M = typename std::decay_t<decltype(f)>::Member;
    if constexpr (std::is_same_v<M, int>) n += 4;
    if constexpr (std::is_same_v<M, std::int64_t> || std::is_same_v<M, double>) n += 8;
    if constexpr (std::is_same_v<M, std::string> || model::schema::is_vector_v<M>) n += 2;
  });
  return n;
}

/// The first part of a layout: the values a record always has.
template <class R>
void put_required(Writer& w, const R& r) {
  using namespace model::schema;
  for_each_field<R>([&](const auto& f) {
    using M = typename std::decay_t<decltype(f)>::Member;
    if constexpr (!is_optional_v<M> && !is_vector_v<M>) put_value(w, r.*(f.member));
  });
}
template <class R>
void get_required(Reader& r, R& out, std::size_t payload_size) {
  using namespace model::schema;
  for_each_field<R>([&](const auto& f) {
    using M = typename std::decay_t<decltype(f)>::Member;
    if constexpr (!is_optional_v<M> && !is_vector_v<M>) get_value(r, out.*(f.member), payload_size);
  });
}

template <class R>
void put_record(Writer& w, const R& r) {
  using namespace model::schema;
  put_required(w, r);
  if constexpr (optional_count<R>() > 0) {
    static_assert(optional_count<R>() <= 8, "one presence byte holds 8 optional members");
    Presence p;
    for_each_field<R>([&](const auto& f) {
      using M = typename std::decay_t<decltype(f)>::Member;
      if constexpr (is_optional_v<M>) p.add((r.*(f.member)).has_value());
    });
    w.u8(p.bits());
    for_each_field<R>([&](const auto& f) {
      using M = typename std::decay_t<decltype(f)>::Member;
      if constexpr (is_optional_v<M>) {
        if (const auto& v = r.*(f.member)) put_value(w, *v);
      }
    });
  }
  for_each_field<R>([&](const auto& f) {
    using M = typename std::decay_t<decltype(f)>::Member;
    if constexpr (is_vector_v<M>) {
      const auto& list = r.*(f.member);
      const std::size_t count = std::min(list.size(), kMaxGpusPerSample);
      w.u16(static_cast<std::uint16_t>(count));
      for (std::size_t i = 0; i < count; ++i)
        put_record(w, list[i]);
    }
  });
}

template <class R>
void get_record(Reader& r, R& out, std::size_t payload_size) {
  using namespace model::schema;
  get_required(r, out, payload_size);
  if constexpr (optional_count<R>() > 0) {
    const std::uint8_t bits = read_presence(r, optional_count<R>());
    unsigned i = 0;
    for_each_field<R>([&](const auto& f) {
      using M = typename std::decay_t<decltype(f)>::Member;
      if constexpr (is_optional_v<M>) {
        if (has(bits, i++) && r.ok()) {
          // emplace(V{}), not emplace(): clang sees a nested record with
          // default member initializers (TracerStats::Gpu) as not
          // default-constructible here.
          get_value(r, (out.*(f.member)).emplace(value_type_t<M>{}), payload_size);
        }
      }
    });
  }
  for_each_field<R>([&](const auto& f) {
    using M = typename std::decay_t<decltype(f)>::Member;
    if constexpr (is_vector_v<M>) {
      using E = typename M::value_type;
      const std::size_t count = r.u16();
      // A count the payload cannot hold fails here, before any allocation sized by it.
      if (!r.ok() || count > kMaxGpusPerSample ||
          count * min_encoded_bytes<E>() > payload_size - r.pos()) {
        r.fail();
        return;
      }
      auto& list = out.*(f.member);
      list.reserve(count);
      for (std::size_t i = 0; i < count && r.ok(); ++i)
        get_record(r, list.emplace_back(), payload_size);
    }
  });
}

template <class R>
void encode_record_into(std::vector<std::uint8_t>& out, const R& record) {
  Writer w(out);
  put_record(w, record);
}

template <class R>
std::vector<std::uint8_t> encode_record(const R& record) {
  std::vector<std::uint8_t> out;
  encode_record_into(out, record);
  return out;
}

template <class R>
std::optional<R> decode_record(const std::vector<std::uint8_t>& payload) {
  Reader r(payload.data(), payload.size());
  R record;
  get_record(r, record, payload.size());
  return finished(r, std::move(record));
}

}  // namespace

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

std::vector<std::uint8_t> encode_step(const model::StepRecord& s) {
  std::vector<std::uint8_t> out;
  encode_step_into(out, s);
  return out;
}

void encode_step_into(std::vector<std::uint8_t>& out, const model::StepRecord& s) {
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

std::optional<model::StepRecord> decode_step(const std::vector<std::uint8_t>& payload) {
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

// The other records are laid out by their field lists alone (docs/transport.md).

std::vector<std::uint8_t> encode_step_memory(const model::StepMemoryRecord& m) {
  return encode_record(m);
}
void encode_step_memory_into(std::vector<std::uint8_t>& out, const model::StepMemoryRecord& m) {
  encode_record_into(out, m);
}
void encode_system_into(std::vector<std::uint8_t>& out, const model::SystemSample& s) {
  encode_record_into(out, s);
}
void encode_process_into(std::vector<std::uint8_t>& out, const model::ProcessSample& s) {
  encode_record_into(out, s);
}
std::optional<model::StepMemoryRecord> decode_step_memory(
    const std::vector<std::uint8_t>& payload) {
  return decode_record<model::StepMemoryRecord>(payload);
}

std::vector<std::uint8_t> encode_system(const model::SystemSample& s) {
  return encode_record(s);
}
std::optional<model::SystemSample> decode_system(const std::vector<std::uint8_t>& payload) {
  return decode_record<model::SystemSample>(payload);
}

std::vector<std::uint8_t> encode_process(const model::ProcessSample& s) {
  return encode_record(s);
}
std::optional<model::ProcessSample> decode_process(const std::vector<std::uint8_t>& payload) {
  return decode_record<model::ProcessSample>(payload);
}

std::vector<std::uint8_t> encode_heartbeat(const model::RankPosition& p) {
  std::vector<std::uint8_t> out;
  out.reserve(22);
  wire::Writer w(out);
  w.i32(p.global_rank);
  w.f64(p.ts);
  w.i64(p.steps_done);
  w.u8(static_cast<std::uint8_t>(p.phase));
  w.u8(p.recording ? 1 : 0);
  return out;
}

std::optional<model::RankPosition> decode_heartbeat(const std::vector<std::uint8_t>& payload) {
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

std::vector<std::uint8_t> encode_tracer_stats(const model::TracerStats& s) {
  return encode_record(s);
}
std::optional<model::TracerStats> decode_tracer_stats(const std::vector<std::uint8_t>& payload) {
  return decode_record<model::TracerStats>(payload);
}

std::vector<std::uint8_t> encode_rank_identity(const model::RankIdentity& id) {
  return encode_record(id);
}
std::optional<model::RankIdentity> decode_rank_identity(const std::vector<std::uint8_t>& payload) {
  return decode_record<model::RankIdentity>(payload);
}

}  // namespace traceml::transport
