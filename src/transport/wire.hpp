// Little-endian primitives of the transport's binary encoding: a writer that
// appends to a byte vector, and a bounds-checked reader over a byte span that
// turns every overrun into a failed read instead of an out-of-bounds access.
// Internal to the transport module (docs/transport.md has the layout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace traceml::transport::wire {

/// Appends fixed-width little-endian values. Byte order is written out by hand
/// so the wire format does not depend on the host's endianness.
class Writer {
 public:
  explicit Writer(std::vector<std::uint8_t>& out) : out_(out) {}

  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  /// The IEEE-754 bit pattern, so that a round trip is bit-exact (-0.0, denormals).
  void f64(double v) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  /// u16 length, then the bytes. The caller has capped `s` to what fits.
  void str(const std::string& s) {
    u16(static_cast<std::uint16_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  void put(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  std::vector<std::uint8_t>& out_;
};

/// Reads fixed-width little-endian values from [data, data + size). Every read
/// checks the bytes left first; once one fails the reader stays failed, so a
/// decoder can read a whole record and test ok() once at the end.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  [[nodiscard]] bool ok() const { return ok_; }
  /// True when every byte was consumed and no read failed: trailing bytes make
  /// a payload malformed, which keeps the encoding canonical.
  [[nodiscard]] bool done() const { return ok_ && pos_ == size_; }
  void fail() { ok_ = false; }
  /// Bytes consumed so far.
  [[nodiscard]] std::size_t pos() const { return pos_; }

  std::uint8_t u8() { return static_cast<std::uint8_t>(get(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(get(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
  std::uint64_t u64() { return get(8); }
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  double f64() {
    const std::uint64_t bits = u64();
    double v = 0.0;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  /// A u16-length string of at most `max_len` bytes; a longer one fails the read.
  std::string str(std::size_t max_len) {
    const std::size_t n = u16();
    if (!ok_ || n > max_len || n > size_ - pos_) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  std::uint64_t get(std::size_t bytes) {
    if (!ok_ || bytes > size_ - pos_) {
      ok_ = false;
      return 0;
    }
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < bytes; ++i)
      v |= std::uint64_t(data_[pos_ + i]) << (8 * i);
    pos_ += bytes;
    return v;
  }
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace traceml::transport::wire
