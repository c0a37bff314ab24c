#include "model/record_checks.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>

#include "model/limits.hpp"
#include "model/position.hpp"

namespace traceml::model {

namespace {

/// Shortest text that reads back to `v` ("-1.5", "-3.2e+09", "inf", "nan").
std::string number_text(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

template <class T>
std::string text_of(T v) {
  if constexpr (std::is_integral_v<T>)
    return std::to_string(v);
  else
    return number_text(v);
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
  /// `key` exceeds `other_key` of the same record, which bounds it.
  template <class T>
  void not_above(std::string_view key, T v, std::string_view other_key, T other) {
    if (!problem_)
      problem_ = "'" + label(key) + "' (" + text_of(v) + ") must not exceed '" + label(other_key) +
                 "' (" + text_of(other) + ")";
  }
  /// Takes the problem of a checker of a nested record, if this one has none.
  void adopt(const Checker& inner) {
    if (!problem_) problem_ = inner.problem_;
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

template <class R>
void check_values(const R& r, Checker& c);
template <class R>
void check_nested(const R& r, Checker& c);

/// One field by its rule; text is repaired by the readers, never refused.
template <class R, class M>
void check_value(const schema::Field<R, M>& f, const R& r, Checker& c) {
  using V = schema::value_type_t<M>;
  const M& v = r.*(f.member);
  if constexpr (std::is_floating_point_v<V>) {
    if (f.rule == schema::Rule::Reading)
      c.finite(f.name, v);
    else
      c.amount(f.name, v);
  } else if constexpr (std::is_integral_v<V>) {
    c.at_least(f.name, v, f.rule == schema::Rule::Positive ? 1 : 0);
  }
  if constexpr (std::is_arithmetic_v<M>) {
    if (f.at_most != nullptr && v > r.*(f.at_most))
      c.not_above(f.name, v, f.at_most_name, r.*(f.at_most));
  }
}

/// A nested record or list, its fields named `name.key` / `name[i].key`.
template <class R, class M>
void check_record_field(const schema::Field<R, M>& f, const R& r, Checker& c) {
  const M& v = r.*(f.member);
  if constexpr (schema::is_vector_v<M>) {
    for (std::size_t i = 0; i < v.size() && !c.problem(); ++i) {
      Checker element(f.name, i);
      check_values(v[i], element);
      check_nested(v[i], element);
      c.adopt(element);
    }
  } else {
    if (!v) return;
    Checker inner(f.name);
    check_values(*v, inner);
    check_nested(*v, inner);
    c.adopt(inner);
  }
}

template <class R>
void check_values(const R& r, Checker& c) {
  schema::for_each_value_field<R>([&](const auto& f) { check_value(f, r, c); });
}
template <class R>
void check_nested(const R& r, Checker& c) {
  schema::for_each_nested_field<R>([&](const auto& f) { check_record_field(f, r, c); });
}

/// Every field of a record, values first, then nested records.
template <class R>
std::optional<std::string> check_record(const R& r) {
  Checker c;
  check_values(r, c);
  check_nested(r, c);
  return c.problem();
}

}  // namespace

std::optional<std::string> check_run_info(const RunInfo& r) {
  return check_record(r);
}

std::optional<std::string> check_rank_identity(const RankIdentity& r) {
  return check_record(r);
}

std::optional<std::string> check_step(const StepRecord& r) {
  Checker c;
  check_values(r, c);
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
  if (r.thread < 0 || r.thread > kMaxThread)
    return "'thread' must be an integer between 0 and " + std::to_string(kMaxThread) + ", got " +
           std::to_string(r.thread);
  if (const unsigned begins = r.events.begin_mask(); begins != 0) {
    for (std::size_t e = 0; e < kEventCount; ++e) {
      if (((begins >> e) & 1u) == 0) continue;
      const std::string key =
          std::string("'events.") + event_name(static_cast<Event>(e)) + ".begin_ms'";
      if (static_cast<Event>(e) == Event::TracedStepTime)
        return key + " must be absent: the traced step begins at 0 by definition";
      if (((cpu >> e) & 1u) == 0) return key + " needs a 'cpu_ms' beside it (a CPU-clock begin)";
      const double v = r.events.begin_values()[e];
      if (!(std::isfinite(v) && std::fabs(v) <= kMaxBeginMs))
        return key + " must be a finite number of ms between -" + number_text(kMaxBeginMs) +
               " and " + number_text(kMaxBeginMs) + ", got " + number_text(v);
    }
  }
  check_nested(r, c);
  return c.problem();
}

std::optional<std::string> check_step_memory(const StepMemoryRecord& r) {
  return check_record(r);
}

std::optional<std::string> check_system(const SystemSample& s) {
  return check_record(s);
}

std::optional<std::string> check_gpu_sample(const GpuSample& g) {
  return check_record(g);
}

std::optional<std::string> check_process(const ProcessSample& s) {
  return check_record(s);
}

std::optional<std::string> check_tracer_stats(const TracerStats& s) {
  return check_record(s);
}

std::optional<std::string> check_rank_goodbye(const RankGoodbye& g) {
  if (auto problem = check_record(g)) return problem;
  if (g.exit_status && *g.exit_status > 255)
    return "'exit_status' must be an integer between 0 and 255, got " +
           std::to_string(*g.exit_status);
  return std::nullopt;
}

std::optional<std::string> check_rank_end(const RankEnd& e) {
  if (auto problem = check_record(e)) return problem;
  if (e.exit_code > 255)
    return "'exit_code' must be an integer between 0 and 255, got " + std::to_string(e.exit_code);
  if (e.signal && *e.signal > 64)
    return "'signal' must be a signal number between 1 and 64, got " + std::to_string(*e.signal);
  if (e.stopped_by_launcher > 1)
    return "'stopped_by_launcher' must be 0 or 1, got " + std::to_string(e.stopped_by_launcher);
  if (e.phase && *e.phase > kMaxLoopPhase)
    return "'phase' must be a loop phase between 0 and " + std::to_string(kMaxLoopPhase) +
           ", got " + std::to_string(*e.phase);
  if (e.phase && !e.steps_completed) return "'phase' without 'steps_completed'";
  if (!e.stream.empty() && !stream_from_hex(e.stream))
    return "'stream' must be 16 hex digits, not 0, got '" + e.stream + "'";
  return std::nullopt;
}

namespace {

/// first..last: in order, at most kMaxProfileSteps steps.
std::optional<std::string> check_profile_range(std::int64_t first, std::int64_t last) {
  if (last < first)
    return "'last_step' " + std::to_string(last) + " is before 'first_step' " +
           std::to_string(first);
  if (last - first >= kMaxProfileSteps)
    return "a profile covers at most " + std::to_string(kMaxProfileSteps) + " steps, got " +
           std::to_string(first) + " to " + std::to_string(last);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_profiled_steps(const ProfiledSteps& p) {
  if (auto problem = check_record(p)) return problem;
  return check_profile_range(p.first_step, p.last_step);
}

std::optional<std::string> check_profile_request(const ProfileRequest& r) {
  if (auto problem = check_record(r)) return problem;
  if (r.steps > kMaxProfileSteps)
    return "a profile covers at most " + std::to_string(kMaxProfileSteps) + " steps, got " +
           std::to_string(r.steps);
  if (r.first_step > std::numeric_limits<std::int64_t>::max() - r.steps)
    return "'first_step' " + std::to_string(r.first_step) + " leaves no room for " +
           std::to_string(r.steps) + " steps";
  return std::nullopt;
}

std::optional<std::string> check_profile_chunk(const ProfileChunk& p) {
  if (auto problem = check_record(p)) return problem;
  if (auto problem = check_profile_range(p.first_step, p.last_step)) return problem;
  if (p.last > 1) return "'last' must be 0 or 1, got " + std::to_string(p.last);
  if (p.last == 0 && (p.ops_cut || !p.error.empty()))
    return "only a profile's last chunk says how it ended";
  if (std::int64_t(p.ops.size()) > kMaxProfileChunkOps)
    return "a chunk carries at most " + std::to_string(kMaxProfileChunkOps) + " ops, got " +
           std::to_string(p.ops.size());
  for (const ProfileOp& op : p.ops)
    if (op.gpu > 1) return "'ops[].gpu' must be 0 or 1, got " + std::to_string(op.gpu);
  return std::nullopt;
}

std::string stream_hex(std::uint64_t stream) {
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, stream >>= 4)
    out[std::size_t(i)] = digits[stream & 0xf];
  return out;
}

std::optional<std::uint64_t> stream_from_hex(const std::string& hex) {
  if (hex.size() != 16) return std::nullopt;
  std::uint64_t v = 0;
  for (const char c : hex) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) return std::nullopt;
    v = (v << 4) | std::uint64_t(d);
  }
  if (v == 0) return std::nullopt;
  return v;
}

}  // namespace traceml::model
