#include "store/json_line.hpp"

#include <cmath>

#include "model/text.hpp"

namespace traceml::store::jsonl {

namespace {
// Quoted strings in messages are cut to this many bytes.
constexpr std::size_t kMaxQuotedChars = 60;
}  // namespace

// ---------------------------------------------------------------------------
// Values and messages.

/// `s` made safe for a one-line message on a terminal: C0 controls and DEL
/// (which an escaped JSON string can hold; newline and tab included) are
/// written as JSON escapes, then the C1 controls (U+0080..U+009F, which a
/// terminal may obey) and any ill-formed UTF-8 by model::escape_for_terminal.
std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char* const kHex = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    } else {
      out += c;
    }
  }
  return model::escape_for_terminal(out);
}

/// `s` for a message, printable and cut so that one bad line cannot flood stderr.
std::string shown(std::string_view s) {
  if (s.size() > kMaxQuotedChars) return printable(s.substr(0, kMaxQuotedChars)) + "...";
  return printable(s);
}

std::string quoted(std::string_view s) {
  return "\"" + shown(s) + "\"";
}

/// How a value reads after "got " in a message.
std::string describe(const JsonLine& line, const Node& n) {
  switch (n.kind) {
    case Kind::Null:
      return "null";
    case Kind::Boolean:
      return n.boolean ? "true" : "false";
    case Kind::Integer:
      return std::to_string(n.integer);
    case Kind::Unsigned:
      return std::to_string(n.unsigned_integer);
    case Kind::Float:
      return std::string(line.text(n));
    case Kind::String:
      return quoted(line.text(n));
    case Kind::Object:
      return "an object";
    case Kind::Array:
      return "an array";
  }
  return "?";
}

std::optional<double> number_of(const Node& n) {
  switch (n.kind) {
    case Kind::Integer:
      return static_cast<double>(n.integer);
    case Kind::Unsigned:
      return static_cast<double>(n.unsigned_integer);
    case Kind::Float:
      return n.number;
    default:
      return std::nullopt;
  }
}

/// The value as an integer; an integral float (3.0, 1e2) counts, 1.5 does not.
std::optional<std::int64_t> integer_of(const Node& n) {
  switch (n.kind) {
    case Kind::Integer:
      return n.integer;
    case Kind::Unsigned:
      if (n.unsigned_integer > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<std::int64_t>(n.unsigned_integer);
    case Kind::Float:
      // 2^63 is exactly representable, so the range test is exact.
      if (!std::isfinite(n.number) || std::trunc(n.number) != n.number) return std::nullopt;
      if (n.number < -9223372036854775808.0 || n.number >= 9223372036854775808.0) {
        return std::nullopt;
      }
      return static_cast<std::int64_t>(n.number);
    default:
      return std::nullopt;
  }
}

}  // namespace traceml::store::jsonl
