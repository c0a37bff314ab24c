#include "store/jsonl_writer.hpp"

#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "store/jsonl_reader.hpp"

namespace traceml::store {

namespace {

using model::Event;

// Output is built in a string and handed to the stream in blocks this large:
// one ostream call per line would cost more than formatting the line.
constexpr std::size_t kFlushBytes = std::size_t{1} << 16;

// ---------------------------------------------------------------------------
// Validation: everything is checked before the first byte is written, so a bad
// value never leaves a half-written file behind.

[[noreturn]] void reject(const std::string& where, std::string_view field, const std::string& value,
                         std::string_view rule) {
  throw std::invalid_argument("write_telemetry_jsonl: " + where + ": " + std::string(field) +
                              " is " + value + " (" + std::string(rule) + ")");
}

std::string text_of(double v) {
  char buffer[32];
  const auto r = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, r.ptr);
}

// The checks take `where` as a callable: a run holds millions of step records, so
// the record's description is composed only when it is about to be reported.

template <class Where>
void check_amount(const Where& where, std::string_view field, double v) {
  // -0.0 passes: the reader accepts it (it compares equal to 0).
  if (!std::isfinite(v) || v < 0.0) reject(where(), field, text_of(v), "must be finite and >= 0");
}

template <class Where>
void check_amount(const Where& where, std::string_view field, const std::optional<double>& v) {
  if (v) check_amount(where, field, *v);
}

template <class Where>
void check_at_least(const Where& where, std::string_view field, std::int64_t v, std::int64_t min) {
  if (v < min) reject(where(), field, std::to_string(v), "must be >= " + std::to_string(min));
}

template <class Where>
void check_at_least(const Where& where, std::string_view field, const std::optional<int>& v,
                    std::int64_t min) {
  if (v) check_at_least(where, field, *v, min);
}

void validate(const model::Telemetry& t) {
  check_at_least([] { return std::string("run"); }, "world_size", t.run.world_size, 1);
  for (const auto& r : t.ranks) {
    const auto where = [&r] { return "rank line of global_rank " + std::to_string(r.global_rank); };
    check_at_least(where, "global_rank", r.global_rank, 0);
    check_at_least(where, "local_rank", r.local_rank, 0);
    check_at_least(where, "node_rank", r.node_rank, 0);
    check_at_least(where, "local_world_size", r.local_world_size, 1);
    check_at_least(where, "world_size", r.world_size, 1);
  }
  for (const auto& s : t.steps) {
    const auto where = [&s] {
      return "step " + std::to_string(s.step) + " of rank " + std::to_string(s.global_rank);
    };
    check_at_least(where, "global_rank", s.global_rank, 0);
    check_at_least(where, "step", s.step, 1);
    check_amount(where, "ts", s.ts);
    for (std::size_t i = 0; i < model::kEventCount; ++i) {
      const auto e = static_cast<Event>(i);
      const std::string_view name = model::event_name(e);
      if (const auto cpu = s.events.cpu_ms(e); cpu && (!std::isfinite(*cpu) || *cpu < 0.0)) {
        check_amount(where, "events." + std::string(name) + ".cpu_ms", cpu);
      }
      if (const auto gpu = s.events.gpu_ms(e); gpu && (!std::isfinite(*gpu) || *gpu < 0.0)) {
        check_amount(where, "events." + std::string(name) + ".gpu_ms", gpu);
      }
    }
    if (const auto& a = s.gpu_activity) {
      check_amount(where, "gpu_activity.h2d_ms", a->h2d_ms);
      check_amount(where, "gpu_activity.h2d_bytes", a->h2d_bytes);
      check_at_least(where, "gpu_activity.h2d_copies", a->h2d_copies, 0);
      check_at_least(where, "gpu_activity.h2d_pageable_copies", a->h2d_pageable_copies, 0);
      check_amount(where, "gpu_activity.h2d_pageable_bytes", a->h2d_pageable_bytes);
      check_amount(where, "gpu_activity.collective_ms", a->collective_ms);
      check_amount(where, "gpu_activity.busy_ms", a->busy_ms);
      // The pageable copies are some of the copies (the reader checks the same).
      if (a->h2d_pageable_copies > a->h2d_copies) {
        reject(where(), "gpu_activity.h2d_pageable_copies", std::to_string(a->h2d_pageable_copies),
               "must be <= h2d_copies, " + std::to_string(a->h2d_copies));
      }
      if (a->h2d_pageable_bytes > a->h2d_bytes) {
        reject(where(), "gpu_activity.h2d_pageable_bytes", text_of(a->h2d_pageable_bytes),
               "must be <= h2d_bytes, " + text_of(a->h2d_bytes));
      }
    }
  }
  for (const auto& m : t.step_memory) {
    const auto where = [&m] {
      return "step_memory of step " + std::to_string(m.step) + " of rank " +
             std::to_string(m.global_rank);
    };
    check_at_least(where, "global_rank", m.global_rank, 0);
    check_at_least(where, "step", m.step, 1);
    check_amount(where, "peak_allocated_bytes", m.peak_allocated_bytes);
    check_amount(where, "peak_reserved_bytes", m.peak_reserved_bytes);
  }
  for (const auto& s : t.system) {
    const auto where = [&s] { return "system sample of node " + std::to_string(s.node_rank); };
    check_at_least(where, "node_rank", s.node_rank, 0);
    check_amount(where, "ts", s.ts);
    check_amount(where, "cpu_percent", s.cpu_percent);
    check_amount(where, "ram_used_bytes", s.ram_used_bytes);
    check_amount(where, "ram_total_bytes", s.ram_total_bytes);
    for (std::size_t i = 0; i < s.gpus.size(); ++i) {
      const auto& g = s.gpus[i];
      const std::string gpu = "gpus[" + std::to_string(i) + "].";
      check_at_least(where, gpu + "index", g.index, 0);
      check_amount(where, gpu + "util_percent", g.util_percent);
      check_amount(where, gpu + "mem_used_bytes", g.mem_used_bytes);
      check_amount(where, gpu + "mem_total_bytes", g.mem_total_bytes);
      check_amount(where, gpu + "temperature_c", g.temperature_c);
      check_amount(where, gpu + "power_w", g.power_w);
      check_amount(where, gpu + "power_limit_w", g.power_limit_w);
    }
  }
  for (const auto& p : t.process) {
    const auto where = [&p] { return "process sample of rank " + std::to_string(p.global_rank); };
    check_at_least(where, "global_rank", p.global_rank, 0);
    check_amount(where, "ts", p.ts);
    check_amount(where, "cpu_percent", p.cpu_percent);
    check_at_least(where, "cpu_cores", p.cpu_cores, 1);
    check_amount(where, "rss_bytes", p.rss_bytes);
    check_amount(where, "ram_total_bytes", p.ram_total_bytes);
    if (p.gpu) {
      check_at_least(where, "gpu.device", p.gpu->device, 0);
      check_amount(where, "gpu.allocated_bytes", p.gpu->allocated_bytes);
      check_amount(where, "gpu.reserved_bytes", p.gpu->reserved_bytes);
      check_amount(where, "gpu.total_bytes", p.gpu->total_bytes);
    }
  }
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
  void number_or_null(const std::optional<double>& v) { v ? number(*v) : null(); }
  void integer_or_null(const std::optional<int>& v) { v ? integer(*v) : null(); }

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

  // Optional members: left out when absent.
  void optional_number(std::string_view name, const std::optional<double>& v) {
    if (!v) return;
    key(name);
    number(*v);
  }
  void optional_integer(std::string_view name, const std::optional<int>& v) {
    if (!v) return;
    key(name);
    integer(*v);
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

void write_run(JsonlBuffer& w, const model::RunInfo& run) {
  w.begin("run");
  w.key("format");
  w.string(kTelemetryFormatName);
  w.key("version");
  w.integer(kTelemetryFormatVersion);
  w.key("run_name");
  w.string(run.run_name);
  w.optional_integer("world_size", run.world_size);
  w.key("strategy");
  w.string(model::strategy_name(run.strategy));
  w.end();
}

void write_rank(JsonlBuffer& w, const model::RankIdentity& r) {
  w.begin("rank");
  w.key("global_rank");
  w.integer(r.global_rank);
  w.optional_integer("local_rank", r.local_rank);
  w.optional_integer("node_rank", r.node_rank);
  if (r.hostname) {
    w.key("hostname");
    w.string(*r.hostname);
  }
  w.optional_integer("local_world_size", r.local_world_size);
  w.optional_integer("world_size", r.world_size);
  w.end();
}

void write_step(JsonlBuffer& w, const model::StepRecord& s) {
  w.begin("step");
  w.key("global_rank");
  w.integer(s.global_rank);
  w.key("step");
  w.integer(s.step);
  w.key("ts");
  w.number(s.ts);
  w.key("events");
  w.raw("{");
  bool first = true;
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    const auto e = static_cast<Event>(i);
    if (!s.events.has(e)) continue;  // absent: not measured on this step
    if (!first) w.raw(",");
    first = false;
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
    w.raw("}");
  }
  w.raw("}");
  if (const auto& a = s.gpu_activity) {
    w.key("gpu_activity");
    w.raw("{");
    w.first_key("h2d_ms");
    w.number(a->h2d_ms);
    w.key("h2d_bytes");
    w.number(a->h2d_bytes);
    w.key("h2d_copies");
    w.integer(a->h2d_copies);
    w.key("h2d_pageable_copies");
    w.integer(a->h2d_pageable_copies);
    w.key("h2d_pageable_bytes");
    w.number(a->h2d_pageable_bytes);
    w.key("collective_ms");
    w.number(a->collective_ms);
    w.key("busy_ms");
    w.number(a->busy_ms);
    w.raw("}");
  }
  w.end();
}

void write_step_memory(JsonlBuffer& w, const model::StepMemoryRecord& m) {
  w.begin("step_memory");
  w.key("global_rank");
  w.integer(m.global_rank);
  w.key("step");
  w.integer(m.step);
  w.key("device");
  w.string(m.device);
  w.optional_number("peak_allocated_bytes", m.peak_allocated_bytes);
  w.optional_number("peak_reserved_bytes", m.peak_reserved_bytes);
  w.end();
}

void write_system(JsonlBuffer& w, const model::SystemSample& s) {
  w.begin("system");
  w.key("node_rank");
  w.integer(s.node_rank);
  w.key("ts");
  w.number(s.ts);
  w.optional_number("cpu_percent", s.cpu_percent);
  w.optional_number("ram_used_bytes", s.ram_used_bytes);
  w.optional_number("ram_total_bytes", s.ram_total_bytes);
  w.key("gpus");
  w.raw("[");
  bool first = true;
  for (const auto& g : s.gpus) {
    if (!first) w.raw(",");
    first = false;
    w.raw("{");
    w.first_key("index");
    w.integer(g.index);
    w.key("util_percent");
    w.number_or_null(g.util_percent);
    w.key("mem_used_bytes");
    w.number_or_null(g.mem_used_bytes);
    w.key("mem_total_bytes");
    w.number_or_null(g.mem_total_bytes);
    w.key("temperature_c");
    w.number_or_null(g.temperature_c);
    w.key("power_w");
    w.number_or_null(g.power_w);
    w.key("power_limit_w");
    w.number_or_null(g.power_limit_w);
    w.raw("}");
  }
  w.raw("]");
  w.end();
}

void write_process(JsonlBuffer& w, const model::ProcessSample& p) {
  w.begin("process");
  w.key("global_rank");
  w.integer(p.global_rank);
  w.key("ts");
  w.number(p.ts);
  w.optional_number("cpu_percent", p.cpu_percent);
  w.optional_integer("cpu_cores", p.cpu_cores);
  w.optional_number("rss_bytes", p.rss_bytes);
  w.optional_number("ram_total_bytes", p.ram_total_bytes);
  w.key("gpu");
  if (!p.gpu) {
    w.null();  // the process has no GPU
  } else {
    w.raw("{");
    w.first_key("device");
    w.integer_or_null(p.gpu->device);
    w.key("allocated_bytes");
    w.number_or_null(p.gpu->allocated_bytes);
    w.key("reserved_bytes");
    w.number_or_null(p.gpu->reserved_bytes);
    w.key("total_bytes");
    w.number_or_null(p.gpu->total_bytes);
    w.raw("}");
  }
  w.end();
}

}  // namespace

void write_telemetry_jsonl(const model::Telemetry& telemetry, std::ostream& out) {
  validate(telemetry);
  JsonlBuffer w(out);
  write_run(w, telemetry.run);
  for (const auto& r : telemetry.ranks)
    write_rank(w, r);
  for (const auto& s : telemetry.steps)
    write_step(w, s);
  for (const auto& m : telemetry.step_memory)
    write_step_memory(w, m);
  for (const auto& s : telemetry.system)
    write_system(w, s);
  for (const auto& p : telemetry.process)
    write_process(w, p);
  w.flush();
}

}  // namespace traceml::store
