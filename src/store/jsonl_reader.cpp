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

#include "model/record_checks.hpp"
#include "model/record_kinds.hpp"
#include "model/text.hpp"
#include "store/json_line.hpp"

namespace traceml::store {

namespace {

using model::Event;

using jsonl::describe;
using jsonl::integer_of;
using jsonl::JsonLine;
using jsonl::Kind;
using jsonl::kNone;
using jsonl::Node;
using jsonl::number_of;
using jsonl::shown;
// Unknown record types (and unknown event names) named in warnings; the rest
// are counted in one line.
constexpr std::size_t kNamedUnknowns = 5;

const char* const kHeaderProblem =
    "first line must be a {\"type\":\"run\",...} header (format \"traceml-telemetry\", version 2)";
const char* const kKnownEvents =
    "input_wait, h2d, forward, backward, optimizer_step, traced_step_time";

/// A problem found on the line being read; the importer adds "FILE:LINE: ".
struct Problem {
  std::string message;
};

[[noreturn]] void fail(std::string message) {
  throw Problem{std::move(message)};
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

  /// The record lines' types, as the message of a line without one lists
  /// them: "\"rank\", \"step\", ...".
  static const std::string& line_types() {
    static const std::string types = [] {
      std::string out;
      model::for_each_kind([&out](const auto& row) {
        using R = typename std::decay_t<decltype(row)>::Type;
        if (row.jsonl_type == nullptr || std::is_same_v<R, model::RunInfo>) return;
        out += out.empty() ? "\"" : ", \"";
        out += row.jsonl_type;
        out += '"';
      });
      return out;
    }();
    return types;
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
      if (type == nullptr || type->kind != Kind::String ||
          json_.text(*type) != model::row_of<model::RunInfo>().jsonl_type) {
        fail(kHeaderProblem);
      }
      read_run(Fields(json_, json_.root(), model::row_of<model::RunInfo>().jsonl_type));
      header_line_ = line_number_;
      return;
    }
    if (type == nullptr) fail("missing required key 'type' (one of " + line_types() + ")");
    if (type->kind != Kind::String) fail("'type' must be a string, got " + describe(json_, *type));
    const std::string_view name = json_.text(*type);
    if (name == model::row_of<model::RunInfo>().jsonl_type) {
      fail("a second {\"type\":\"run\"} line; a file holds one run, whose header is line " +
           std::to_string(header_line_) + " (write each run to its own file)");
    }
    // Every other type of line is a kind's (model/record_kinds.hpp).
    bool known = false;
    model::for_each_kind([&](const auto& row) {
      if (known || row.jsonl_type == nullptr || name != row.jsonl_type) return;
      known = true;
      using R = typename std::decay_t<decltype(row)>::Type;
      if constexpr (std::is_same_v<R, model::StepRecord>)
        read_step(Fields(json_, json_.root(), row.jsonl_type));
      else if constexpr (model::row_of<R>().rows != nullptr)
        read_line(Fields(json_, json_.root(), row.jsonl_type), name, row.check,
                  result_.telemetry.*(row.rows));
    });
    if (!known && unknown_types_.first_named(name)) {
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
      read_values(g, v.emplace(E{}));
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
    if (!v || *v < 1 || *v > kTelemetryFormatVersion) {
      fail("'version' must be 1 to " + std::to_string(kTelemetryFormatVersion) + ", got " +
           describe(json_, *version) + " (this traceml reads telemetry format versions 1 to " +
           std::to_string(kTelemetryFormatVersion) + ")");
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

  /// A record line read by its field list, then checked as every reader checks it.
  template <class R>
  void read_line(const Fields& f, std::string_view record,
                 std::optional<std::string> (*check_record)(const R&), std::vector<R>& out) {
    R r;
    read_values(f, r);
    read_nested(f, r, record);
    check(check_record(r));
    out.push_back(std::move(r));
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
      s.events.set_begin(*event, timing.number("begin_ms"));  // format 2; check_step bounds it
    }
    s.thread = f.small_integer("thread", 0).value_or(0);  // format 2; absent: thread 0
    read_nested(f, s, "step");
    check(model::check_step(s));
    result_.telemetry.steps.push_back(s);
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
