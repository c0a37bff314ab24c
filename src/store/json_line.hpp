// One line of telemetry JSONL as a flat tree of values, parsed by a fast
// parser for the plain JSON producers write and by nlohmann's SAX parser for
// everything else; and the words messages use for its values. Internal to
// store/ (the JSONL reader).
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/jsonl_reader.hpp"

namespace traceml::store::jsonl {

inline constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

/// `s` made safe for a one-line message on a terminal: C0 controls and DEL
/// written as JSON escapes, C1 controls and ill-formed UTF-8 escaped by
/// model::escape_for_terminal.
std::string printable(std::string_view s);

// ---------------------------------------------------------------------------
// One line as a flat tree. Its vectors are reused from line to line, so a line
// costs no allocation once they have grown, which is what keeps a
// multi-million-line import fast (a json DOM allocates a map node and a key
// string per member).
//
// Two parsers fill the tree. A fast one handles the plain JSON that telemetry
// producers write (ASCII strings without escapes, numbers that fit their type);
// it never accepts what is not JSON, and gives up on anything else. nlohmann's
// SAX parser then parses the line again: it is the authority on what JSON is,
// and the source of the message when a line is not JSON. The fast path reads
// typical step lines about three times as fast as nlohmann's parser alone.

enum class Kind : std::uint8_t { Null, Boolean, Integer, Unsigned, Float, String, Object, Array };

struct Node {
  Kind kind = Kind::Null;
  bool boolean = false;
  std::int64_t integer = 0;
  std::uint64_t unsigned_integer = 0;
  double number = 0.0;
  std::size_t key_begin = 0;  ///< the member name in the parent object (into the text base)
  std::size_t key_size = 0;
  std::size_t text_begin = 0;  ///< a string value or a float's raw text (into the text base)
  std::size_t text_size = 0;
  std::size_t first_child = kNone;
  std::size_t next_sibling = kNone;
};

// Nesting deeper than this is left to nlohmann, which does not recurse.
inline constexpr int kMaxFastDepth = 32;
static_assert(static_cast<std::size_t>(kMaxFastDepth) < kMaxNestingDepth,
              "the fast parser gives up before the limit");

inline bool is_json_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class JsonLine {
 public:
  using Json = nlohmann::json;

  /// Parses one line; false with error() set when it is not valid JSON.
  bool parse(std::string_view line) {
    reset(line.data());
    const char* p = line.data();
    const char* const end = p + line.size();
    skip_space(p, end);
    if (p != end && fast_value(p, end, 0)) {
      skip_space(p, end);
      if (p == end) return true;
    }
    reset(line.data());
    const bool ok = Json::sax_parse(line.data(), line.data() + line.size(), this);
    base_ = text_.data();  // the SAX path copies names and strings into text_
    return ok;
  }

  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] const Node& node(std::size_t i) const { return nodes_[i]; }
  [[nodiscard]] std::size_t root() const { return 0; }
  [[nodiscard]] std::string_view key(const Node& n) const {
    return std::string_view(base_ + n.key_begin, n.key_size);
  }
  [[nodiscard]] std::string_view text(const Node& n) const {
    return std::string_view(base_ + n.text_begin, n.text_size);
  }

  // nlohmann SAX interface: names and strings are copied, nlohmann reuses its buffers.
  bool null() { return add(Node{}); }
  bool boolean(bool value) { return add_boolean(value); }
  bool number_integer(Json::number_integer_t value) { return add_integer(value); }
  bool number_unsigned(Json::number_unsigned_t value) { return add_unsigned(value); }
  bool number_float(Json::number_float_t value, const Json::string_t& raw) {
    return add_float(value, copy_text(raw), raw.size());
  }
  bool string(Json::string_t& value) { return add_string(copy_text(value), value.size()); }
  bool binary(Json::binary_t& /*value*/) { return true; }  // text JSON never has binary
  bool start_object(std::size_t /*elements*/) { return open_within_limit(Kind::Object); }
  bool end_object() { return close(); }
  bool start_array(std::size_t /*elements*/) { return open_within_limit(Kind::Array); }
  bool end_array() { return close(); }
  bool key(Json::string_t& name) {
    pending_key_begin_ = copy_text(name);
    pending_key_size_ = name.size();
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& last_token,
                   const nlohmann::detail::exception& ex) {
    if (ex.id == 406) {
      // nlohmann refuses numbers that overflow a double; name the field they were for.
      const std::string path = pending_path();
      error_ =
          printable(path.empty() ? "number out of range, got " + last_token
                                 : "'" + path + "' must be a finite number, got " + last_token);
      return false;
    }
    // ex.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: detail".
    // The detail quotes the line's bytes ("last read: ..."): ill-formed UTF-8
    // and C1 controls among them must not reach a terminal (printable()).
    const std::string what = printable(ex.what());
    const auto column = what.find("column ");
    const auto colon = column == std::string::npos ? column : what.find(": ", column);
    if (colon == std::string::npos) {
      error_ = "invalid JSON: " + what;
    } else {
      error_ =
          "invalid JSON at " + what.substr(column, colon - column) + ": " + what.substr(colon + 2);
    }
    return false;
  }

 private:
  struct Open {
    std::size_t node;
    std::size_t last_child;
    std::size_t children;
  };

  void reset(const char* base) {
    nodes_.clear();
    open_.clear();
    text_.clear();
    error_.clear();
    base_ = base;
  }

  std::size_t copy_text(const std::string& value) {
    const std::size_t begin = text_.size();
    text_.append(value);
    return begin;
  }

  bool add_boolean(bool value) {
    Node n;
    n.kind = Kind::Boolean;
    n.boolean = value;
    return add(n);
  }
  bool add_integer(std::int64_t value) {
    Node n;
    n.kind = Kind::Integer;
    n.integer = value;
    return add(n);
  }
  bool add_unsigned(std::uint64_t value) {
    Node n;
    n.kind = Kind::Unsigned;
    n.unsigned_integer = value;
    return add(n);
  }
  bool add_float(double value, std::size_t raw_begin, std::size_t raw_size) {
    Node n;
    n.kind = Kind::Float;
    n.number = value;
    n.text_begin = raw_begin;
    n.text_size = raw_size;
    return add(n);
  }
  bool add_string(std::size_t begin, std::size_t size) {
    Node n;
    n.kind = Kind::String;
    n.text_begin = begin;
    n.text_size = size;
    return add(n);
  }

  bool open(Kind kind) {
    Node n;
    n.kind = kind;
    if (!add(n)) return false;
    open_.push_back(Open{nodes_.size() - 1, kNone, 0});
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  /// SAX path: refuses a level beyond kMaxNestingDepth before storing it, so
  /// that a line of a million '[' costs a few kilobytes, not a node per '['.
  /// Returning false stops nlohmann's parser; error_ says why.
  bool open_within_limit(Kind kind) {
    if (open_.size() >= kMaxNestingDepth) {
      error_ = "nesting deeper than " + std::to_string(kMaxNestingDepth) +
               " levels (records of this format nest 3 levels)";
      return false;
    }
    return open(kind);
  }

  /// Stores one value; false (error_ set) beyond kMaxLineValues, so that a
  /// line's tree stays a few megabytes whatever the line holds.
  bool add(Node n) {
    const std::size_t index = nodes_.size();
    if (index >= kMaxLineValues) {
      error_ = "more than " + std::to_string(kMaxLineValues) +
               " values on one line (a record holds a few dozen)";
      return false;
    }
    if (!open_.empty()) {
      Open& parent = open_.back();
      if (nodes_[parent.node].kind == Kind::Object) {
        n.key_begin = pending_key_begin_;
        n.key_size = pending_key_size_;
      }
      if (parent.last_child == kNone) {
        nodes_[parent.node].first_child = index;
      } else {
        nodes_[parent.last_child].next_sibling = index;
      }
      parent.last_child = index;
      ++parent.children;
    }
    nodes_.push_back(n);
    return true;
  }

  /// Dotted path of the value being parsed, e.g. "events.forward.cpu_ms" or
  /// "gpus[1].power_w"; empty at the top level. SAX path only (names in text_).
  [[nodiscard]] std::string pending_path() const {
    std::string path;
    for (std::size_t depth = 0; depth < open_.size(); ++depth) {
      const Open& level = open_[depth];
      // The member or element of this level that is being parsed: a finished
      // child for outer levels, the pending value for the innermost one.
      const bool innermost = depth + 1 == open_.size();
      if (nodes_[level.node].kind == Kind::Array) {
        const std::size_t element = innermost ? level.children : level.children - 1;
        path += "[" + std::to_string(element) + "]";
      } else {
        // The innermost object may have no member yet (last_child is kNone):
        // its pending key is the name; only outer levels look at a child.
        std::size_t begin = pending_key_begin_;
        std::size_t size = pending_key_size_;
        if (!innermost) {
          const Node& member = nodes_[level.last_child];
          begin = member.key_begin;
          size = member.key_size;
        }
        if (!path.empty()) path += '.';
        path.append(text_, begin, size);
      }
    }
    return path;
  }

  // --- the fast path: offsets point into the line itself, nothing is copied.

  static void skip_space(const char*& p, const char* end) {
    while (p != end && is_json_space(*p))
      ++p;
  }

  /// A string of printable ASCII without escapes; anything else is left to nlohmann.
  bool fast_string(const char*& p, const char* end, std::size_t& begin, std::size_t& size) {
    const char* const start = ++p;  // past the opening quote
    while (p != end) {
      const auto c = static_cast<unsigned char>(*p);
      if (c == '"') {
        begin = static_cast<std::size_t>(start - base_);
        size = static_cast<std::size_t>(p - start);
        ++p;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p;
    }
    return false;
  }

  /// A number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  bool fast_number(const char*& p, const char* end) {
    const char* const start = p;
    const bool negative = *p == '-';
    if (negative) ++p;
    if (p == end) return false;
    if (*p == '0') {
      ++p;
    } else if (is_digit(*p)) {
      while (p != end && is_digit(*p))
        ++p;
    } else {
      return false;
    }
    const char* const integer_end = p;
    bool is_float = false;
    if (p != end && *p == '.') {
      ++p;
      if (p == end || !is_digit(*p)) return false;
      while (p != end && is_digit(*p))
        ++p;
      is_float = true;
    }
    if (p != end && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p != end && (*p == '+' || *p == '-')) ++p;
      if (p == end || !is_digit(*p)) return false;
      while (p != end && is_digit(*p))
        ++p;
      is_float = true;
    }
    if (is_float) {
      double value = 0.0;
      // from_chars is correctly rounded, like the strtod nlohmann uses; out of
      // range (overflow or underflow) goes to nlohmann for its own handling.
      const auto r = std::from_chars(start, p, value);
      if (r.ec != std::errc() || r.ptr != p) return false;
      return add_float(value, static_cast<std::size_t>(start - base_),
                       static_cast<std::size_t>(p - start));
    }
    const char* digits = negative ? start + 1 : start;
    // 19 digits always fit in 64 bits; longer integers become floats in nlohmann.
    if (integer_end - digits > 19) return false;
    std::uint64_t magnitude = 0;
    for (; digits != integer_end; ++digits) {
      magnitude = magnitude * 10 + static_cast<std::uint64_t>(*digits - '0');
    }
    if (!negative) return add_unsigned(magnitude);
    if (magnitude > std::uint64_t{1} << 63) return false;
    // Two's complement negation, defined for INT64_MIN's magnitude too.
    return add_integer(static_cast<std::int64_t>(~magnitude + 1));
  }

  bool fast_literal(const char*& p, const char* end, std::string_view word) {
    if (static_cast<std::size_t>(end - p) < word.size() ||
        std::string_view(p, word.size()) != word) {
      return false;
    }
    p += word.size();
    return true;
  }

  bool fast_value(const char*& p, const char* end, int depth) {
    switch (*p) {
      case '{': {
        if (depth >= kMaxFastDepth) return false;
        if (!open(Kind::Object)) return false;
        ++p;
        skip_space(p, end);
        if (p != end && *p == '}') {
          ++p;
          return close();
        }
        for (;;) {
          if (p == end || *p != '"') return false;
          if (!fast_string(p, end, pending_key_begin_, pending_key_size_)) return false;
          skip_space(p, end);
          if (p == end || *p != ':') return false;
          ++p;
          skip_space(p, end);
          if (p == end || !fast_value(p, end, depth + 1)) return false;
          skip_space(p, end);
          if (p == end) return false;
          if (*p == '}') {
            ++p;
            return close();
          }
          if (*p != ',') return false;
          ++p;
          skip_space(p, end);
        }
      }
      case '[': {
        if (depth >= kMaxFastDepth) return false;
        if (!open(Kind::Array)) return false;
        ++p;
        skip_space(p, end);
        if (p != end && *p == ']') {
          ++p;
          return close();
        }
        for (;;) {
          if (p == end || !fast_value(p, end, depth + 1)) return false;
          skip_space(p, end);
          if (p == end) return false;
          if (*p == ']') {
            ++p;
            return close();
          }
          if (*p != ',') return false;
          ++p;
          skip_space(p, end);
        }
      }
      case '"': {
        std::size_t begin = 0;
        std::size_t size = 0;
        return fast_string(p, end, begin, size) && add_string(begin, size);
      }
      case 't':
        return fast_literal(p, end, "true") && add_boolean(true);
      case 'f':
        return fast_literal(p, end, "false") && add_boolean(false);
      case 'n':
        return fast_literal(p, end, "null") && add(Node{});
      default:
        return fast_number(p, end);
    }
  }

  std::vector<Node> nodes_;
  std::vector<Open> open_;
  std::string text_;            ///< SAX path: copies of names, strings and float texts
  const char* base_ = nullptr;  ///< what Node offsets point into: the line, or text_
  std::string error_;
  std::size_t pending_key_begin_ = 0;
  std::size_t pending_key_size_ = 0;
};

/// `s` cut for a message and made printable.
std::string shown(std::string_view s);
/// `s` cut, printable and in double quotes.
std::string quoted(std::string_view s);
/// A value as messages name it: "null", "a string \"x\"", "an object", "3".
std::string describe(const JsonLine& line, const Node& n);
/// Any JSON number as a double; std::nullopt for other kinds.
std::optional<double> number_of(const Node& n);
/// A JSON number that is an integer and fits 64 bits; std::nullopt otherwise.
std::optional<std::int64_t> integer_of(const Node& n);

}  // namespace traceml::store::jsonl
