#include "model/record_checks.hpp"

#include <charconv>
#include <cmath>
#include <string_view>

namespace traceml::model {

namespace {

/// Shortest text that reads back to `v` ("-1.5", "-3.2e+09", "inf", "nan").
std::string number_text(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// Collects the first problem of one record. Every test is cheap and builds
/// no string unless it fails: the collector runs these on every record.
class Checker {
 public:
  /// Fields are named `outer[index].inner.key`, each part when present.
  explicit Checker(std::string_view outer = {}, std::optional<std::size_t> index = {},
                   std::string_view inner = {})
      : outer_(outer), index_(index), inner_(inner) {}

  /// A duration, byte count, percent or timestamp: finite and >= 0 (-0 passes).
  void amount(std::string_view key, double v) {
    if (!problem_ && !(std::isfinite(v) && v >= 0.0))
      fail(key, "a finite number >= 0", number_text(v));
  }
  void amount(std::string_view key, const std::optional<double>& v) {
    if (v) amount(key, *v);
  }
  /// A reading that may be below zero (a temperature) but must be a number.
  void finite(std::string_view key, const std::optional<double>& v) {
    if (!problem_ && v && !std::isfinite(*v)) fail(key, "a finite number", number_text(*v));
  }
  void at_least(std::string_view key, std::int64_t v, std::int64_t min) {
    if (!problem_ && v < min) fail(key, "an integer >= " + std::to_string(min), std::to_string(v));
  }
  void at_least(std::string_view key, const std::optional<int>& v, std::int64_t min) {
    if (v) at_least(key, *v, min);
  }
  void at_least(std::string_view key, const std::optional<std::int64_t>& v, std::int64_t min) {
    if (v) at_least(key, *v, min);
  }
  void set(std::string message) {
    if (!problem_) problem_ = std::move(message);
  }
  [[nodiscard]] const std::optional<std::string>& problem() const { return problem_; }

 private:
  void fail(std::string_view key, const std::string& rule, const std::string& got) {
    problem_ = "'" + label(key) + "' must be " + rule + ", got " + got;
  }
  [[nodiscard]] std::string label(std::string_view key) const {
    std::string out(outer_);
    if (index_) out += "[" + std::to_string(*index_) + "]";
    if (!inner_.empty()) {
      out += '.';
      out += inner_;
    }
    if (!out.empty()) out += '.';
    out += key;
    return out;
  }

  std::string_view outer_;
  std::optional<std::size_t> index_;
  std::string_view inner_;
  std::optional<std::string> problem_;
};

std::optional<std::string> check_gpu_activity(const StepGpuActivity& a) {
  Checker c("gpu_activity");
  c.amount("h2d_ms", a.h2d_ms);
  c.amount("h2d_bytes", a.h2d_bytes);
  c.at_least("h2d_copies", a.h2d_copies, 0);
  c.at_least("h2d_pageable_copies", a.h2d_pageable_copies, 0);
  c.amount("h2d_pageable_bytes", a.h2d_pageable_bytes);
  c.amount("collective_ms", a.collective_ms);
  c.amount("busy_ms", a.busy_ms);
  // Pageable copies are some of the copies; more would make every share
  // computed from them exceed 1.
  if (a.h2d_pageable_copies > a.h2d_copies)
    c.set("'gpu_activity.h2d_pageable_copies' (" + std::to_string(a.h2d_pageable_copies) +
          ") must not exceed 'gpu_activity.h2d_copies' (" + std::to_string(a.h2d_copies) + ")");
  if (a.h2d_pageable_bytes > a.h2d_bytes)
    c.set("'gpu_activity.h2d_pageable_bytes' must not exceed 'gpu_activity.h2d_bytes'");
  return c.problem();
}

std::optional<std::string> check_gpu(const GpuSample& g, Checker c) {
  c.at_least("index", g.index, 0);
  c.amount("util_percent", g.util_percent);
  c.amount("mem_used_bytes", g.mem_used_bytes);
  c.amount("mem_total_bytes", g.mem_total_bytes);
  // A temperature may be below zero in principle; it only has to be a number.
  c.finite("temperature_c", g.temperature_c);
  c.amount("power_w", g.power_w);
  c.amount("power_limit_w", g.power_limit_w);
  return c.problem();
}

}  // namespace

std::optional<std::string> check_run_info(const RunInfo& r) {
  Checker c;
  c.at_least("world_size", r.world_size, 1);
  return c.problem();
}

std::optional<std::string> check_rank_identity(const RankIdentity& r) {
  Checker c;
  c.at_least("global_rank", r.global_rank, 0);
  c.at_least("local_rank", r.local_rank, 0);
  c.at_least("node_rank", r.node_rank, 0);
  c.at_least("local_world_size", r.local_world_size, 1);
  c.at_least("world_size", r.world_size, 1);
  return c.problem();
}

std::optional<std::string> check_step(const StepRecord& r) {
  Checker c;
  c.at_least("global_rank", r.global_rank, 0);
  c.at_least("step", r.step, 1);
  c.amount("ts", r.ts);
  if (c.problem()) return c.problem();
  // The bulk accessors: no optional per value on the collector's hottest path.
  const unsigned cpu = r.events.cpu_mask();
  const unsigned gpu = r.events.gpu_mask();
  for (std::size_t e = 0; e < kEventCount; ++e) {
    const bool bad_cpu = ((cpu >> e) & 1u) != 0 && !(std::isfinite(r.events.cpu_values()[e]) &&
                                                     r.events.cpu_values()[e] >= 0.0);
    const bool bad_gpu = ((gpu >> e) & 1u) != 0 && !(std::isfinite(r.events.gpu_values()[e]) &&
                                                     r.events.gpu_values()[e] >= 0.0);
    if (bad_cpu || bad_gpu) {
      Checker event("events", std::nullopt, event_name(static_cast<Event>(e)));
      event.amount("cpu_ms", r.events.cpu_ms(static_cast<Event>(e)));
      event.amount("gpu_ms", r.events.gpu_ms(static_cast<Event>(e)));
      return event.problem();
    }
  }
  if (r.gpu_activity) return check_gpu_activity(*r.gpu_activity);
  return std::nullopt;
}

std::optional<std::string> check_step_memory(const StepMemoryRecord& r) {
  Checker c;
  c.at_least("global_rank", r.global_rank, 0);
  c.at_least("step", r.step, 1);
  c.amount("peak_allocated_bytes", r.peak_allocated_bytes);
  c.amount("peak_reserved_bytes", r.peak_reserved_bytes);
  return c.problem();
}

std::optional<std::string> check_system(const SystemSample& s) {
  Checker c;
  c.at_least("node_rank", s.node_rank, 0);
  c.amount("ts", s.ts);
  c.amount("cpu_percent", s.cpu_percent);
  c.amount("ram_used_bytes", s.ram_used_bytes);
  c.amount("ram_total_bytes", s.ram_total_bytes);
  if (c.problem()) return c.problem();
  for (std::size_t i = 0; i < s.gpus.size(); ++i) {
    if (auto problem = check_gpu(s.gpus[i], Checker("gpus", i))) return problem;
  }
  return std::nullopt;
}

std::optional<std::string> check_gpu_sample(const GpuSample& g) {
  return check_gpu(g, Checker());
}

std::optional<std::string> check_process(const ProcessSample& s) {
  Checker c;
  c.at_least("global_rank", s.global_rank, 0);
  c.amount("ts", s.ts);
  c.amount("cpu_percent", s.cpu_percent);
  c.at_least("cpu_cores", s.cpu_cores, 1);
  c.amount("rss_bytes", s.rss_bytes);
  c.amount("ram_total_bytes", s.ram_total_bytes);
  if (c.problem() || !s.gpu) return c.problem();
  Checker g("gpu");
  g.at_least("device", s.gpu->device, 0);
  g.amount("allocated_bytes", s.gpu->allocated_bytes);
  g.amount("reserved_bytes", s.gpu->reserved_bytes);
  g.amount("total_bytes", s.gpu->total_bytes);
  return g.problem();
}

std::optional<std::string> check_tracer_stats(const TracerStats& s) {
  Checker c;
  c.at_least("global_rank", s.global_rank, 0);
  c.at_least("pid", s.pid, 0);
  c.at_least("steps_recorded", s.steps_recorded, 0);
  c.at_least("records_sent", s.records_sent, 0);
  c.at_least("records_dropped", s.records_dropped, 0);
  c.amount("overhead_ns_per_step", s.overhead_ns_per_step);
  c.at_least("activity_lost", s.activity_lost, 0);
  if (c.problem() || !s.gpu) return c.problem();
  Checker g("gpu");
  g.at_least("device", s.gpu->device, 0);
  g.at_least("steps_resolved", s.gpu->steps_resolved, 0);
  g.at_least("steps_unresolved", s.gpu->steps_unresolved, 0);
  g.at_least("scopes_skipped", s.gpu->scopes_skipped, 0);
  return g.problem();
}

}  // namespace traceml::model
