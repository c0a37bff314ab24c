#include "store/jsonl_writer.hpp"

#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "model/record_checks.hpp"
#include "model/record_kinds.hpp"
#include "store/jsonl_reader.hpp"

namespace traceml::store {

namespace {

using model::Event;

// Output is built in a string and handed to the stream in blocks this large:
// one ostream call per line would cost more than formatting the line.
constexpr std::size_t kFlushBytes = std::size_t{1} << 16;

// ---------------------------------------------------------------------------
// Validation: every record is checked by the rule every reader applies
// (model/record_checks) before the first byte is written, so a bad value
// never leaves a half-written file behind, and a file this writes always
// reads back.

/// Throws for the first record a reader would refuse. `where` is a callable:
/// a run holds millions of step records, so the record's description is
/// composed only when it is about to be reported.
template <class Where>
void require(const std::optional<std::string>& problem, const Where& where) {
  if (problem) throw std::invalid_argument("write_telemetry_jsonl: " + where() + ": " + *problem);
}

// Each record as a message names it: a kind's line, or by its owner.
template <class R>
std::string describe(const R&) {
  return std::string(model::row_of<R>().jsonl_type) + " line";
}
std::string describe(const model::RankIdentity& r) {
  return "rank line of global_rank " + std::to_string(r.global_rank);
}
std::string describe(const model::StepRecord& s) {
  return "step " + std::to_string(s.step) + " of rank " + std::to_string(s.global_rank);
}
std::string describe(const model::StepMemoryRecord& m) {
  return "step_memory of step " + std::to_string(m.step) + " of rank " +
         std::to_string(m.global_rank);
}
std::string describe(const model::SystemSample& s) {
  return "system sample of node " + std::to_string(s.node_rank);
}
std::string describe(const model::ProcessSample& p) {
  return "process sample of rank " + std::to_string(p.global_rank);
}

/// Checks the run, then each kind of the file in table order.
void validate(const model::Telemetry& t) {
  require(model::check(t.run), [] { return std::string("run"); });
  const auto each = [](const auto& rows) {
    for (const auto& r : rows)
      require(model::check(r), [&r] { return describe(r); });
  };
  model::for_each_kind([&](const auto& row) {
    using R = typename std::decay_t<decltype(row)>::Type;
    if constexpr (std::is_same_v<R, model::StepRecord>)
      each(t.steps);
    else if constexpr (model::row_of<R>().rows != nullptr &&
                       model::row_of<R>().jsonl_type != nullptr)
      each(t.*(row.rows));
  });
}

// ---------------------------------------------------------------------------
// Formatting.

/// Appends JSON text to a buffer that it hands to the stream in large blocks.
class JsonlBuffer {
 public:
  explicit JsonlBuffer(std::ostream& out) : out_(out) { buffer_.reserve(kFlushBytes * 2); }

  /// Starts a line: `{"type":"<type>"`.
  void begin(std::string_view type) {
    buffer_ += "{\"type\":\"";
    buffer_ += type;
    buffer_ += '"';
  }
  /// Ends a line and flushes a full block.
  void end() {
    buffer_ += "}\n";
    if (buffer_.size() >= kFlushBytes) flush();
  }

  /// `,"name":` — every member but an object's first.
  void key(std::string_view name) {
    buffer_ += ",\"";
    buffer_ += name;
    buffer_ += "\":";
  }
  /// `"name":` — an object's first member.
  void first_key(std::string_view name) {
    buffer_ += '"';
    buffer_ += name;
    buffer_ += "\":";
  }
  void raw(std::string_view text) { buffer_ += text; }

  void number(double v) {
    // -0.0 is written as 0: "-0" reads back as the integer 0, and a file
    // must read back to what wrote it (found by fuzz_jsonl).
    if (v == 0.0) v = 0.0;
    // Shortest text that reads back to the same double.
    char digits[32];
    const auto r = std::to_chars(digits, digits + sizeof digits, v);
    buffer_.append(digits, r.ptr);
  }
  void integer(std::int64_t v) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, v);
    buffer_.append(digits, r.ptr);
  }
  void null() { buffer_ += "null"; }

  void string(std::string_view s) {
    buffer_ += '"';
    for (const char c : s) {
      switch (c) {
        case '"':
          buffer_ += "\\\"";
          break;
        case '\\':
          buffer_ += "\\\\";
          break;
        case '\n':
          buffer_ += "\\n";
          break;
        case '\r':
          buffer_ += "\\r";
          break;
        case '\t':
          buffer_ += "\\t";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            static const char* const kHex = "0123456789abcdef";
            buffer_ += "\\u00";
            buffer_ += kHex[(static_cast<unsigned char>(c) >> 4) & 0xF];
            buffer_ += kHex[static_cast<unsigned char>(c) & 0xF];
          } else {
            buffer_ += c;  // UTF-8 passes through unchanged
          }
      }
    }
    buffer_ += '"';
  }

  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
    if (!out_) throw std::ios_base::failure("write_telemetry_jsonl: cannot write to the stream");
  }

 private:
  std::ostream& out_;
  std::string buffer_;
};

// Records are written from their field lists (model/telemetry.hpp): the
// values in list order (an absent one left out, or null where the list says
// so), then the nested records and lists.

template <class R>
void write_object(JsonlBuffer& w, const R& r);

template <class V>
void write_value(JsonlBuffer& w, const V& v) {
  if constexpr (std::is_same_v<V, double>) {
    w.number(v);
  } else if constexpr (std::is_integral_v<V>) {
    w.integer(v);
  } else if constexpr (std::is_same_v<V, std::string>) {
    w.string(v);
  } else if constexpr (model::schema::is_vector_v<V>) {
    w.raw("[");
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i > 0) w.raw(",");
      write_object(w, v[i]);
    }
    w.raw("]");
  } else {
    write_object(w, v);
  }
}

/// One member; `first` is true until an object's first member is written.
template <class R, class M>
void write_member(JsonlBuffer& w, const model::schema::Field<R, M>& f, const R& r, bool& first) {
  const M& v = r.*(f.member);
  if constexpr (model::schema::is_optional_v<M>) {
    if (!v && f.absent == model::schema::Absent::Omitted) return;
  }
  first ? w.first_key(f.name) : w.key(f.name);
  first = false;
  if constexpr (model::schema::is_optional_v<M>) {
    if (!v) {
      w.null();
      return;
    }
    write_value(w, *v);
  } else {
    write_value(w, v);
  }
}

template <class R>
void write_values(JsonlBuffer& w, const R& r, bool& first) {
  model::schema::for_each_value_field<R>([&](const auto& f) { write_member(w, f, r, first); });
}
template <class R>
void write_nested(JsonlBuffer& w, const R& r, bool& first) {
  model::schema::for_each_nested_field<R>([&](const auto& f) { write_member(w, f, r, first); });
}

template <class R>
void write_object(JsonlBuffer& w, const R& r) {
  w.raw("{");
  bool first = true;
  write_values(w, r, first);
  write_nested(w, r, first);
  w.raw("}");
}

/// A record line: `{"type":"<type>"` and the record's members.
template <class R>
void write_line(JsonlBuffer& w, std::string_view type, const R& r) {
  w.begin(type);
  bool first = false;
  write_values(w, r, first);
  write_nested(w, r, first);
  w.end();
}

void write_run(JsonlBuffer& w, const model::RunInfo& run) {
  w.begin(model::row_of<model::RunInfo>().jsonl_type);
  w.key("format");
  w.string(kTelemetryFormatName);
  w.key("version");
  w.integer(kTelemetryFormatVersion);
  bool first = false;
  write_values(w, run, first);
  w.key("strategy");
  w.string(model::strategy_name(run.strategy));
  w.end();
}

void write_step(JsonlBuffer& w, const model::StepRecord& s) {
  w.begin(model::row_of<model::StepRecord>().jsonl_type);
  bool first = false;
  write_values(w, s, first);
  w.key("events");
  w.raw("{");
  bool first_event = true;
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    const auto e = static_cast<Event>(i);
    if (!s.events.has(e)) continue;  // absent: not measured on this step
    if (!first_event) w.raw(",");
    first_event = false;
    w.first_key(model::event_name(e));
    w.raw("{");
    const auto cpu = s.events.cpu_ms(e);
    const auto gpu = s.events.gpu_ms(e);
    if (cpu) {
      w.first_key("cpu_ms");
      w.number(*cpu);
    }
    if (gpu) {
      if (cpu) {
        w.key("gpu_ms");
      } else {
        w.first_key("gpu_ms");
      }
      w.number(*gpu);
    }
    if (const auto begin = s.events.begin_ms(e)) {  // only beside a cpu_ms (check_step)
      w.key("begin_ms");
      w.number(*begin);
    }
    w.raw("}");
  }
  w.raw("}");
  if (s.thread != 0) {
    w.key("thread");
    w.integer(s.thread);
  }
  write_nested(w, s, first);
  w.end();
}

}  // namespace

void write_telemetry_jsonl(const model::Telemetry& telemetry, std::ostream& out) {
  validate(telemetry);
  JsonlBuffer w(out);
  write_run(w, telemetry.run);
  // Then each kind of the file in table order (model/record_kinds.hpp).
  model::for_each_kind([&](const auto& row) {
    using R = typename std::decay_t<decltype(row)>::Type;
    if constexpr (std::is_same_v<R, model::StepRecord>) {
      for (const auto& s : telemetry.steps)
        write_step(w, s);
    } else if constexpr (model::row_of<R>().rows != nullptr &&
                         model::row_of<R>().jsonl_type != nullptr) {
      for (const auto& r : telemetry.*(row.rows))
        write_line(w, row.jsonl_type, r);
    }
  });
  w.flush();
}

}  // namespace traceml::store
