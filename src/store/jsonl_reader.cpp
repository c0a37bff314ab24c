#include "store/jsonl_reader.hpp"

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "model/record_checks.hpp"
#include "model/text.hpp"

namespace traceml::store {

namespace {

using model::Event;

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
// Quoted strings in messages are cut to this many bytes.
constexpr std::size_t kMaxQuotedChars = 60;
// Unknown record types (and unknown event names) named in warnings; the rest
// are counted in one line.
constexpr std::size_t kNamedUnknowns = 5;

const char* const kHeaderProblem =
    "first line must be a {\"type\":\"run\",...} header (format \"traceml-telemetry\", version 1)";
const char* const kKnownEvents =
    "input_wait, h2d, forward, backward, optimizer_step, traced_step_time";

/// A problem found on the line being read; the importer adds "FILE:LINE: ".
struct Problem {
  std::string message;
};

[[noreturn]] void fail(std::string message) {
  throw Problem{std::move(message)};
}

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
constexpr int kMaxFastDepth = 32;
static_assert(static_cast<std::size_t>(kMaxFastDepth) < kMaxNestingDepth,
              "the fast parser gives up before the limit");

bool is_json_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string printable(std::string_view s);

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

/// Where a field sits inside a line, for messages: "ts", "events.forward.cpu_ms",
/// "gpus[1].util_percent", "gpu.reserved_bytes". Built only when a message needs it.
struct Scope {
  std::string_view outer;            ///< "" at the top level
  std::optional<std::size_t> index;  ///< array element of `outer`
  std::string_view inner;            ///< a member of `outer` (an event name)

  [[nodiscard]] std::string label(std::string_view key) const {
    std::string out(outer);
    if (index) out += "[" + std::to_string(*index) + "]";
    if (!inner.empty()) {
      out += '.';
      out.append(inner.data(), inner.size());
    }
    if (!out.empty()) out += '.';
    out.append(key.data(), key.size());
    return out;
  }
};

/// Typed access to the members of one JSON object of the line. Fields checks
/// that a value has the right JSON type and fits the model's C++ type; what
/// values a record may hold is model::check_*'s decision (model/record_checks),
/// shared with the collector and the run-database reader. The rules named in
/// type messages ("an integer >= 0") are the ones those checks apply.
class Fields {
 public:
  Fields(const JsonLine& line, std::size_t object, std::string_view record, Scope scope = {})
      : line_(line), object_(object), record_(record), scope_(scope) {}

  /// The node index of member `key`, or kNone; with duplicate keys the last one
  /// wins, as in a JSON DOM.
  [[nodiscard]] std::size_t find_index(std::string_view key) const {
    std::size_t found = kNone;
    for (std::size_t i = line_.node(object_).first_child; i != kNone;
         i = line_.node(i).next_sibling) {
      if (line_.key(line_.node(i)) == key) found = i;
    }
    return found;
  }

  /// The member `key`, or nullptr.
  [[nodiscard]] const Node* find(std::string_view key) const {
    const std::size_t i = find_index(key);
    return i == kNone ? nullptr : &line_.node(i);
  }

  [[nodiscard]] std::string label(std::string_view key) const { return scope_.label(key); }

  [[noreturn]] void missing(std::string_view key) const {
    fail("missing required key '" + label(key) + "' in a " + std::string(record_) + " line");
  }

  /// A duration, byte count, percent or timestamp (finite and >= 0); null or
  /// absent mean "not measured".
  [[nodiscard]] std::optional<double> amount(std::string_view key) const {
    const Node* n = find(key);
    if (n == nullptr || n->kind == Kind::Null) return std::nullopt;
    return checked_number(key, *n, "a finite number >= 0");
  }

  [[nodiscard]] double required_amount(std::string_view key) const {
    const Node* n = find(key);
    if (n == nullptr) missing(key);
    return checked_number(key, *n, "a finite number >= 0");
  }

  /// A reading that may be negative (a temperature); null or absent mean "not measured".
  [[nodiscard]] std::optional<double> number(std::string_view key) const {
    const Node* n = find(key);
    if (n == nullptr || n->kind == Kind::Null) return std::nullopt;
    return checked_number(key, *n, "a finite number");
  }

  /// A rank, index or count that fits an int (its lowest value `min`, for
  /// messages); null or absent mean unknown.
  [[nodiscard]] std::optional<int> small_integer(std::string_view key, int min) const {
    const Node* n = find(key);
    if (n == nullptr || n->kind == Kind::Null) return std::nullopt;
    return checked_small_integer(key, *n, min);
  }

  [[nodiscard]] int required_small_integer(std::string_view key, int min) const {
    const Node* n = find(key);
    if (n == nullptr) missing(key);
    return checked_small_integer(key, *n, min);
  }

  /// A 64-bit integer (a step id, a count; its lowest value `min`, for messages).
  [[nodiscard]] std::int64_t required_integer(std::string_view key, int min) const {
    const Node* n = find(key);
    if (n == nullptr) missing(key);
    const auto value = integer_of(*n);
    if (!value) fail(must_be_integer(key, min, *n));
    return *value;
  }

  /// As required_integer, and null counts as missing.
  [[nodiscard]] std::int64_t required_count(std::string_view key) const {
    const Node* n = find(key);
    if (n == nullptr || n->kind == Kind::Null) missing(key);
    return required_integer(key, 0);
  }

  [[nodiscard]] std::optional<std::string> text(std::string_view key) const {
    const Node* n = find(key);
    if (n == nullptr || n->kind == Kind::Null) return std::nullopt;
    if (n->kind != Kind::String) {
      fail("'" + label(key) + "' must be a string or null, got " + describe(line_, *n));
    }
    return std::string(line_.text(*n));
  }

 private:
  /// Any JSON number: the SAX path refuses what overflows a double, so it is finite.
  [[nodiscard]] double checked_number(std::string_view key, const Node& n, const char* rule) const {
    const auto value = number_of(n);
    if (!value) fail("'" + label(key) + "' must be " + rule + ", got " + describe(line_, n));
    return *value;
  }

  [[nodiscard]] std::string must_be_integer(std::string_view key, int min, const Node& n) const {
    return "'" + label(key) + "' must be an integer >= " + std::to_string(min) + ", got " +
           describe(line_, n);
  }

  [[nodiscard]] int checked_small_integer(std::string_view key, const Node& n, int min) const {
    const auto value = integer_of(n);
    // Below INT_MIN is also below `min`: the same message as the record check's.
    if (!value || *value < INT_MIN) fail(must_be_integer(key, min, n));
    if (*value > INT_MAX) {
      fail("'" + label(key) + "' is too large: got " + describe(line_, n) + ", at most " +
           std::to_string(INT_MAX));
    }
    return static_cast<int>(*value);
  }

  const JsonLine& line_;
  std::size_t object_;
  std::string_view record_;
  Scope scope_;
};

bool is_blank(std::string_view s) {
  for (const char c : s) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// The importer: turns lines into records, one at a time.

class Importer {
 public:
  explicit Importer(const std::string& source) : source_(source) {}

  void add_line(std::string_view text) {
    ++line_number_;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);  // CRLF files
    if (text.size() > kMaxLineBytes) too_long();
    if (is_blank(text)) return;
    try {
      read_record(text);
    } catch (const Problem& p) {
      throw TelemetryError(source_, line_number_, p.message);
    }
  }

  /// The next line is longer than kMaxLineBytes (found before it was all read).
  [[noreturn]] void next_line_too_long() {
    ++line_number_;
    too_long();
  }

  ReadResult finish() {
    if (!header_line_) {
      throw TelemetryError(source_, 1, std::string(kHeaderProblem) + ", but the file is empty");
    }
    for (const auto& [type, count] : unknown_types_.named) {
      if (count > 1) {
        result_.warnings.push_back(source_ + ": skipped " + std::to_string(count - 1) +
                                   " more line(s) of unknown type '" + shown(type) + "'");
      }
    }
    if (unknown_types_.others > 0) {
      result_.warnings.push_back(source_ + ": skipped " + std::to_string(unknown_types_.others) +
                                 " more line(s) of other unknown types (only the first " +
                                 std::to_string(kNamedUnknowns) + " types are named)");
    }
    for (const auto& [name, count] : unknown_events_.named) {
      if (count > 1) {
        result_.warnings.push_back(source_ + ": ignored unknown event '" + shown(name) + "' on " +
                                   std::to_string(count - 1) + " more line(s)");
      }
    }
    if (unknown_events_.others > 0) {
      result_.warnings.push_back(source_ + ": ignored " + std::to_string(unknown_events_.others) +
                                 " more unknown event(s) of other names (only the first " +
                                 std::to_string(kNamedUnknowns) + " names are named)");
    }
    if (texts_cut_ > 0) {
      result_.warnings.push_back(source_ + ": cut " + std::to_string(texts_cut_) +
                                 " string(s) to " + std::to_string(model::kMaxTextBytes) +
                                 " bytes, the longest text a record keeps");
    }
    return std::move(result_);
  }

 private:
  /// Unknown names seen so far: the first kNamedUnknowns are kept and named,
  /// the rest only counted, so that neither the warnings nor the memory grow
  /// with the number of distinct names in a file.
  struct Unknowns {
    std::map<std::string, std::int64_t> named;  ///< name -> occurrences; sorted: stable output
    std::int64_t others = 0;                    ///< occurrences of names not kept

    /// Counts one occurrence of `name`; true when it is the first of a named one.
    bool first_named(std::string_view name) {
      const auto it = named.find(std::string(name));
      if (it != named.end()) {
        ++it->second;
        return false;
      }
      if (named.size() < kNamedUnknowns) {
        named.emplace(std::string(name), 1);
        return true;
      }
      ++others;
      return false;
    }
  };

  [[noreturn]] void too_long() const {
    throw TelemetryError(source_, line_number_,
                         "line longer than " + std::to_string(kMaxLineBytes) +
                             " bytes, the longest this format allows (records are a few "
                             "hundred bytes; a line this long is not telemetry)");
  }

  /// Text as the model keeps it: at most model::kMaxTextBytes, counted when
  /// cut. JSON strings are valid UTF-8 (both parsers see to it); the check
  /// costs little and keeps the rule in one place.
  std::optional<std::string> kept(std::optional<std::string> text) {
    if (text && (text->size() > model::kMaxTextBytes || !model::valid_utf8(*text))) {
      ++texts_cut_;
      text = model::sanitize_utf8(*text, model::kMaxTextBytes);
    }
    return text;
  }

  /// Fails with `problem`, the shared record check's verdict, if there is one.
  static void check(const std::optional<std::string>& problem) {
    if (problem) fail(*problem);
  }

  void read_record(std::string_view text) {
    if (!json_.parse(text)) fail(json_.error());
    const Node& root = json_.node(json_.root());
    if (root.kind != Kind::Object) {
      fail("expected one JSON object per line, got " + describe(json_, root));
    }
    const Fields top(json_, json_.root(), "telemetry");
    const Node* type = top.find("type");
    if (!header_line_) {
      if (type == nullptr || type->kind != Kind::String || json_.text(*type) != "run") {
        fail(kHeaderProblem);
      }
      read_run(Fields(json_, json_.root(), "run"));
      header_line_ = line_number_;
      return;
    }
    if (type == nullptr) {
      fail(
          "missing required key 'type' (one of \"rank\", \"step\", \"step_memory\", "
          "\"system\", \"process\")");
    }
    if (type->kind != Kind::String) fail("'type' must be a string, got " + describe(json_, *type));
    const std::string_view name = json_.text(*type);
    if (name == "step") {
      read_step(Fields(json_, json_.root(), "step"));
    } else if (name == "step_memory") {
      read_step_memory(Fields(json_, json_.root(), "step_memory"));
    } else if (name == "system") {
      read_system(Fields(json_, json_.root(), "system"));
    } else if (name == "process") {
      read_process(Fields(json_, json_.root(), "process"));
    } else if (name == "rank") {
      read_rank(Fields(json_, json_.root(), "rank"));
    } else if (name == "run") {
      fail("a second {\"type\":\"run\"} line; a file holds one run, whose header is line " +
           std::to_string(header_line_) + " (write each run to its own file)");
    } else if (unknown_types_.first_named(name)) {
      result_.warnings.push_back(location() + "skipped line of unknown type '" + shown(name) + "'");
    }
  }

  // Records are read by their field lists (model/telemetry.hpp): each value
  // by its type and rule, then the nested records and lists.

  template <class R>
  void read_values(const Fields& f, R& r) {
    model::schema::for_each_value_field<R>(
        [&](const auto& field) { read_value(f, field, r.*(field.member)); });
  }

  template <class R>
  void read_nested(const Fields& f, R& r, std::string_view record) {
    model::schema::for_each_nested_field<R>(
        [&](const auto& field) { read_record_field(f, field, r.*(field.member), record); });
  }

  template <class R, class M>
  void read_value(const Fields& f, const model::schema::Field<R, M>& field, M& v) {
    using model::schema::Rule;
    const char* name = field.name;
    const int min = field.rule == Rule::Positive ? 1 : 0;
    if constexpr (std::is_same_v<M, std::string>) {
      v = kept(f.text(name)).value_or(std::string());
    } else if constexpr (std::is_same_v<M, std::optional<std::string>>) {
      v = kept(f.text(name));
    } else if constexpr (std::is_same_v<M, std::optional<double>>) {
      v = field.rule == Rule::Reading ? f.number(name) : f.amount(name);
    } else if constexpr (std::is_same_v<M, std::optional<int>>) {
      v = f.small_integer(name, min);
    } else if constexpr (std::is_same_v<M, double>) {
      v = f.required_amount(name);
    } else if constexpr (std::is_same_v<M, int>) {
      v = field.file_may_omit ? f.small_integer(name, min).value_or(v)
                              : f.required_small_integer(name, min);
    } else {
      static_assert(std::is_same_v<M, std::int64_t>, "a field type the reader does not know");
      v = f.required_integer(name, min);
    }
  }

  /// A nested record (absent or null: the record has none) or a list of them.
  template <class R, class M>
  void read_record_field(const Fields& f, const model::schema::Field<R, M>& field, M& v,
                         std::string_view record) {
    const std::size_t index = f.find_index(field.name);
    if (index == kNone || json_.node(index).kind == Kind::Null) return;
    const Node& node = json_.node(index);
    if constexpr (model::schema::is_vector_v<M>) {
      using E = typename M::value_type;
      if (node.kind != Kind::Array) {
        fail("'" + f.label(field.name) + "' must be an array of objects like " +
             model::schema::Schema<E>::example + " (empty when there are none), got " +
             describe(json_, node));
      }
      std::size_t position = 0;
      for (std::size_t i = node.first_child; i != kNone;
           i = json_.node(i).next_sibling, ++position) {
        const Node& element = json_.node(i);
        if (element.kind != Kind::Object) {
          fail("'" + f.label(field.name) + "[" + std::to_string(position) +
               "]' must be an object like " + model::schema::Schema<E>::example + ", got " +
               describe(json_, element));
        }
        E e;
        // A value a file may leave out defaults to the element's position
        // (TraceML's GPU index is its place in the list).
        model::schema::for_each_value_field<E>([&](const auto& x) {
          using X = typename std::decay_t<decltype(x)>::Member;
          if constexpr (std::is_same_v<X, int>) {
            if (x.file_may_omit) e.*(x.member) = static_cast<int>(position);
          }
        });
        const Fields g(json_, i, record, Scope{field.name, position, {}});
        read_values(g, e);
        v.push_back(std::move(e));
      }
    } else {
      using E = typename M::value_type;
      if (node.kind != Kind::Object) {
        fail("'" + f.label(field.name) + "' must be an object like " +
             model::schema::Schema<E>::example + " or null, got " + describe(json_, node));
      }
      const Fields g(json_, index, record, Scope{field.name, std::nullopt, {}});
      read_values(g, v.emplace());
    }
  }

  void read_run(const Fields& f) {
    const Node* format = f.find("format");
    if (format == nullptr) {
      f.missing("format");
    }
    if (format->kind != Kind::String || json_.text(*format) != kTelemetryFormatName) {
      fail("'format' must be \"traceml-telemetry\", got " + describe(json_, *format));
    }
    const Node* version = f.find("version");
    if (version == nullptr) f.missing("version");
    const auto v = integer_of(*version);
    if (!v || *v != kTelemetryFormatVersion) {
      fail("'version' must be 1, got " + describe(json_, *version) +
           " (this traceml reads telemetry format version 1)");
    }
    model::RunInfo& run = result_.telemetry.run;
    read_values(f, run);
    const Node* strategy = f.find("strategy");
    if (strategy != nullptr && strategy->kind != Kind::Null) {
      if (strategy->kind != Kind::String) {
        fail(
            "'strategy' must be a string (ddp, fsdp, single_process, distributed_unknown or "
            "unknown), got " +
            describe(json_, *strategy));
      }
      run.strategy = model::strategy_from_string(std::string(json_.text(*strategy)));
    }
    check(model::check_run_info(run));
  }

  void read_rank(const Fields& f) {
    model::RankIdentity r;
    read_values(f, r);
    check(model::check_rank_identity(r));
    result_.telemetry.ranks.push_back(std::move(r));
  }

  void read_step(const Fields& f) {
    model::StepRecord s;
    read_values(f, s);
    const Node* events = f.find("events");
    if (events == nullptr) f.missing("events");
    if (events->kind != Kind::Object) {
      fail("'events' must be an object like {\"forward\":{\"cpu_ms\":3.0,\"gpu_ms\":3.1}}, got " +
           describe(json_, *events));
    }
    for (std::size_t i = events->first_child; i != kNone; i = json_.node(i).next_sibling) {
      const Node& value = json_.node(i);
      const std::string_view name = json_.key(value);
      const auto event = model::event_from_name(name);
      if (!event) {
        warn_unknown_event(name);
        continue;
      }
      if (value.kind == Kind::Null) continue;  // same as absent: not measured
      if (value.kind != Kind::Object) {
        fail("'events." + std::string(name) +
             "' must be an object like {\"cpu_ms\":3.0,\"gpu_ms\":3.1}, got " +
             describe(json_, value));
      }
      const Fields timing(json_, i, "step", Scope{"events", std::nullopt, name});
      s.events.set(*event, model::Timing{timing.amount("cpu_ms"), timing.amount("gpu_ms")});
    }
    read_nested(f, s, "step");
    check(model::check_step(s));
    result_.telemetry.steps.push_back(s);
  }

  void read_step_memory(const Fields& f) {
    model::StepMemoryRecord m;
    read_values(f, m);
    check(model::check_step_memory(m));
    result_.telemetry.step_memory.push_back(std::move(m));
  }

  void read_system(const Fields& f) {
    model::SystemSample s;
    read_values(f, s);
    read_nested(f, s, "system");
    check(model::check_system(s));
    result_.telemetry.system.push_back(std::move(s));
  }

  void read_process(const Fields& f) {
    model::ProcessSample p;
    read_values(f, p);
    read_nested(f, p, "process");
    check(model::check_process(p));
    result_.telemetry.process.push_back(std::move(p));
  }

  void warn_unknown_event(std::string_view name) {
    if (unknown_events_.first_named(name)) {
      result_.warnings.push_back(location() + "ignored unknown event '" + shown(name) +
                                 "' (known events: " + kKnownEvents + ")");
    }
  }

  [[nodiscard]] std::string location() const {
    return source_ + ":" + std::to_string(line_number_) + ": ";
  }

  std::string source_;
  JsonLine json_;
  ReadResult result_;
  std::int64_t line_number_ = 0;
  std::int64_t header_line_ = 0;  ///< 0 until the run header has been read
  Unknowns unknown_types_;
  Unknowns unknown_events_;
  std::int64_t texts_cut_ = 0;
};

/// Splits what `fill` delivers into lines. `fill(buffer, capacity)` returns the
/// number of bytes it wrote, 0 at the end of input.
template <class Fill>
ReadResult read_chunks(const std::string& source, Fill fill) {
  Importer importer(source);
  // Room for the longest line, its "\r\n", and no more: a line that fills the
  // buffer without a newline is too long, refused before it is all read.
  std::string buffer(kMaxLineBytes + 2, '\0');
  std::size_t used = 0;
  for (;;) {
    if (used == buffer.size()) importer.next_line_too_long();
    const std::size_t got = fill(buffer.data() + used, buffer.size() - used);
    if (got == 0) break;
    used += got;
    std::size_t start = 0;
    for (;;) {
      const void* newline = std::memchr(buffer.data() + start, '\n', used - start);
      if (newline == nullptr) break;
      const auto end = static_cast<std::size_t>(static_cast<const char*>(newline) - buffer.data());
      importer.add_line(std::string_view(buffer.data() + start, end - start));
      start = end + 1;
    }
    std::memmove(buffer.data(), buffer.data() + start, used - start);
    used -= start;
  }
  if (used > 0) importer.add_line(std::string_view(buffer.data(), used));
  return importer.finish();
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

TelemetryError::TelemetryError(std::string source, std::optional<std::int64_t> line,
                               std::string problem)
    : std::runtime_error(source + (line ? ":" + std::to_string(*line) : std::string()) + ": " +
                         problem),
      source_(std::move(source)),
      line_(line),
      problem_(std::move(problem)) {}

ReadResult read_telemetry_jsonl(const std::string& path) {
  errno = 0;
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    throw TelemetryError(path, std::nullopt,
                         std::string("cannot open file: ") + std::strerror(errno));
  }
  return read_chunks(path, [&](char* buffer, std::size_t capacity) {
    const std::size_t got = std::fread(buffer, 1, capacity, file.get());
    if (got == 0 && std::ferror(file.get())) {
      throw TelemetryError(path, std::nullopt,
                           std::string("cannot read file: ") + std::strerror(errno));
    }
    return got;
  });
}

ReadResult read_telemetry_jsonl(std::istream& in, const std::string& source_name) {
  return read_chunks(source_name, [&](char* buffer, std::size_t capacity) {
    in.read(buffer, static_cast<std::streamsize>(capacity));
    const auto got = in.gcount();
    if (got == 0 && in.bad()) {
      throw TelemetryError(source_name, std::nullopt, "cannot read stream");
    }
    return static_cast<std::size_t>(got);
  });
}

ReadResult parse_telemetry_jsonl(std::string_view text, const std::string& source_name) {
  Importer importer(source_name);
  while (!text.empty()) {
    const auto newline = text.find('\n');
    if (newline == std::string_view::npos) {
      importer.add_line(text);
      break;
    }
    importer.add_line(text.substr(0, newline));
    text.remove_prefix(newline + 1);
  }
  return importer.finish();
}

}  // namespace traceml::store
