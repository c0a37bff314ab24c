// The layout every record with a field list (model/telemetry.hpp) has on the
// wire, derived from that list at compile time: what record_codec's
// encode_into and decode do for any kind that declares no layout of its own.
// Internal to the transport module; docs/transport.md has the layout.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/schema.hpp"
#include "transport/wire.hpp"

namespace traceml::transport {

/// Longest string (hostname, device, token) on the wire. Linux host names stop
/// at 64 bytes and DNS names at 253; 1 KiB is generous and keeps one string from
/// filling a frame. An encoder cuts a longer string to this length.
inline constexpr std::size_t kMaxStringBytes = 1024;

/// Most GPUs in one SystemSample. The largest nodes carry 16; an encoder sends the
/// first kMaxGpusPerSample of a longer list, which keeps every record far below
/// kMaxFrameBytes.
inline constexpr std::size_t kMaxGpusPerSample = 256;

namespace layout {

using wire::Reader;
using wire::Writer;

inline std::string capped(const std::string& s) {
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

inline bool has(std::uint8_t bits, unsigned i) {
  return (bits >> i & 1u) != 0;
}
/// Reads a presence byte of `count` defined bits; fails the reader on others.
inline std::uint8_t read_presence(Reader& r, unsigned count) {
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
void put(std::vector<std::uint8_t>& out, const R& record) {
  Writer w(out);
  put_record(w, record);
}

template <class R>
std::optional<R> get(const std::vector<std::uint8_t>& payload) {
  Reader r(payload.data(), payload.size());
  R record;
  get_record(r, record, payload.size());
  return finished(r, std::move(record));
}

}  // namespace layout
}  // namespace traceml::transport
