#include "model/text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace traceml::model {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

/// Length of the well-formed UTF-8 sequence at s[i], or 0 when the bytes there
/// are not one (RFC 3629 table 3-7: the second byte's range depends on the first).
std::size_t sequence_length(std::string_view s, std::size_t i, char32_t* code_point) {
  const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(s[i + k]); };
  const std::uint8_t b0 = byte(0);
  if (b0 < 0x80) {
    *code_point = b0;
    return 1;
  }
  std::size_t n = 0;
  std::uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  }
  char32_t cp = b0 & (0xFFu >> (n + 1));
  for (std::size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (byte(k) & 0x3Fu);
  *code_point = cp;
  return n;
}

bool is_control(char32_t cp, bool one_line) {
  if (cp == '\t' || (cp == '\n' && !one_line)) return false;
  return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F);
}

}  // namespace

bool valid_utf8(std::string_view s) {
  char32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(s.size(), max_bytes));
  char32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i, &cp);
    const std::string_view piece = n == 0 ? kReplacement : s.substr(i, n);
    if (out.size() + piece.size() > max_bytes) break;
    out.append(piece);
    i += n == 0 ? 1 : n;
  }
  return out;
}

std::string escape_for_terminal(std::string_view s, bool one_line) {
  std::string out;
  out.reserve(s.size());
  char32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i, &cp);
    if (n == 0) {
      out.append(kReplacement);
      ++i;
      continue;
    }
    if (is_control(cp, one_line)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, cp < 0x80 ? "\\x%02x" : "\\u%04x", static_cast<unsigned>(cp));
      out.append(buf);
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace traceml::model
