#include "report/summary_json.hpp"

#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "model/text.hpp"
#include "traceml/version.hpp"

namespace traceml::report {

using analysis::Identity;
using analysis::Issue;
using analysis::Section;

namespace {

template <typename T>
Json opt(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json metrics_object(const Section& s, const std::vector<std::optional<double>>& values) {
  Json o = Json::object();
  for (std::size_t i = 0; i < s.metric_names.size(); ++i) {
    o[s.metric_names[i]] = i < values.size() ? opt(values[i]) : Json(nullptr);
  }
  return o;
}

Json points_object(const Section& s, const std::vector<analysis::Point>& points) {
  Json o = Json::object();
  for (std::size_t i = 0; i < s.metric_names.size(); ++i) {
    const analysis::Point p = i < points.size() ? points[i] : analysis::Point{};
    o[s.metric_names[i]] = Json{{"value", opt(p.value)}, {"idx", opt(p.idx)}};
  }
  return o;
}

Json identity_json(const Identity& id) {
  return Json{{"global_rank", opt(id.global_rank)},
              {"local_rank", opt(id.local_rank)},
              {"node_rank", opt(id.node_rank)},
              {"hostname", opt(id.hostname)},
              {"local_world_size", opt(id.local_world_size)},
              {"world_size", opt(id.world_size)}};
}

}  // namespace

Json issue_json(const Issue& i) {
  return Json{{"kind", i.kind},
              {"status", i.status},
              {"severity", analysis::severity_name(i.severity)},
              {"summary", i.summary},
              {"action", i.action},
              {"metric", opt(i.metric)},
              {"phase", opt(i.phase)},
              {"score", opt(i.score)},
              {"share_pct", opt(i.share_pct)},
              {"skew_pct", opt(i.skew_pct)},
              {"ranks", i.ranks},
              {"evidence", i.evidence.is_object() ? i.evidence : Json::object()}};
}

Json section_json(const Section& s) {
  const auto& m = s.metadata;
  Json j = Json::object();
  j["metadata"] = Json{{"mode", m.mode},
                       {"duration_s", opt(m.duration_s)},
                       {"samples", opt(m.samples)},
                       {"nodes_expected", opt(m.nodes_expected)},
                       {"nodes_observed", opt(m.nodes_observed)},
                       {"nodes_coverage", opt(m.nodes_coverage)},
                       {"nodes_partial", opt(m.nodes_partial)},
                       {"gpus_observed", opt(m.gpus_observed)},
                       {"global_ranks_seen", opt(m.global_ranks_seen)},
                       {"global_ranks_used", opt(m.global_ranks_used)},
                       {"training_total_steps", opt(m.training_total_steps)},
                       {"training_latest_step", opt(m.training_latest_step)},
                       {"section_metric_names", s.metric_names}};
  Json issues = Json::array();
  for (const auto& i : s.issues)
    issues.push_back(issue_json(i));
  j["diagnosis"] = issues.empty() ? Json::object() : issues.front();
  j["issues"] = issues;

  const auto& w = s.window;
  Json window = Json{{"kind", w.kind},
                     {"alignment", w.alignment},
                     {"samples", opt(w.samples)},
                     {"steps_analyzed", opt(w.steps_analyzed)},
                     {"start_step", opt(w.start_step)},
                     {"end_step", opt(w.end_step)},
                     {"completed_step", opt(w.completed_step)},
                     {"window_size", opt(w.window_size)}};
  if (s.name == "step_time") window["diagnosis_clock"] = w.diagnosis_clock.value_or("cpu");
  if (w.profiled_steps_left_out) window["profiled_steps_left_out"] = *w.profiled_steps_left_out;
  j["global"] = Json{{"index_by", s.index_by},
                     {"window", window},
                     {"average", metrics_object(s, s.average)},
                     {"median", points_object(s, s.median)},
                     {"worst", points_object(s, s.worst)}};
  for (const auto& [k, v] : s.global_extra.items())
    j["global"][k] = v;
  Json rows = Json::object();
  for (const auto& r : s.rows) {
    rows[r.key] =
        Json{{"identity", identity_json(r.identity)}, {"metrics", metrics_object(s, r.metrics)}};
  }
  j["groups"] = Json{{"by", s.index_by}, {"rows", rows}};
  Json units = Json::object();
  for (const auto& [k, v] : s.units)
    units[k] = v;
  j["units"] = units;
  j["card"] = s.card;
  return j;
}

Json primary_json(const analysis::Primary& p) {
  return Json{{"kind", p.kind},
              {"status", p.status},
              {"severity", analysis::severity_name(p.severity)},
              {"section", p.section},
              {"scope", "performance"},
              {"summary", p.summary},
              {"action", p.action},
              {"evidence", p.evidence}};
}

Json summary_json(const analysis::Summary& s, const std::string& generated_at,
                  const std::optional<Json>& tracer) {
  Json j = Json::object();
  j["schema_version"] = kSchemaVersion;
  j["generated_at"] = generated_at;
  j["duration_s"] = opt(s.duration_s);
  // Added (DECISIONS 16): `duration_s` stays TraceML's span of samples.
  j["run_duration_s"] = opt(s.run_duration_s);
  j["producer"] = Json{{"name", "traceml-cpp"}, {"version", traceml::version()}};
  j["meta"] = Json{{"run_name", opt(s.meta.run_name)},
                   {"mode", s.meta.mode},
                   {"world_size", opt(s.meta.world_size)},
                   {"nodes_observed", opt(s.meta.nodes_observed)},
                   {"gpus_observed", opt(s.meta.gpus_observed)}};
  j["primary_diagnosis"] = primary_json(s.primary);
  j["system"] = section_json(s.system);
  j["process"] = section_json(s.process);
  j["step_time"] = section_json(s.step_time);
  j["step_memory"] = section_json(s.step_memory);
  if (tracer) j["tracer"] = *tracer;
  return j;
}

std::string iso8601_utc(double unix_seconds) {
  if (!std::isfinite(unix_seconds) || unix_seconds < 0) unix_seconds = 0;
  // A timestamp from a file or a peer may be any finite double; converting
  // one beyond time_t's range is undefined behaviour, and a year past 9999
  // does not fit the format. The last second of 9999 is the ceiling.
  constexpr double kLastRepresentable = 253402300799.0;  // 9999-12-31T23:59:59Z
  if (unix_seconds > kLastRepresentable) unix_seconds = kLastRepresentable;
  const auto whole = static_cast<std::time_t>(std::floor(unix_seconds));
  auto micros = static_cast<long>(std::llround((unix_seconds - double(whole)) * 1e6));
  std::time_t secs = whole;
  if (micros >= 1000000) {
    micros -= 1000000;
    secs += 1;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros);
}

namespace {

/// A summary is a handful of levels deep; a hostile file may nest far deeper
/// than the stack allows. Below this depth nothing is rendered anyway.
constexpr int kMaxRenderedDepth = 64;

Json escaped(const Json& j, int depth) {
  if (j.is_string()) return model::escape_for_terminal(j.get_ref<const std::string&>());
  if (!j.is_structured()) return j;
  if (depth >= kMaxRenderedDepth) return nullptr;
  Json out = j.is_array() ? Json::array() : Json::object();
  if (j.is_array()) {
    for (const auto& v : j)
      out.push_back(escaped(v, depth + 1));
  } else {
    for (auto it = j.begin(); it != j.end(); ++it)
      out[model::escape_for_terminal(it.key())] = escaped(it.value(), depth + 1);
  }
  return out;
}

bool needs_escape(const Json& j, int depth) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    return model::escape_for_terminal(s) != s;
  }
  if (!j.is_structured()) return false;
  if (depth >= kMaxRenderedDepth) return true;  // the bounded copy cuts it off
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (j.is_object() && model::escape_for_terminal(it.key()) != it.key()) return true;
    if (needs_escape(it.value(), depth + 1)) return true;
  }
  return false;
}

}  // namespace

Json escape_strings_for_terminal(const Json& j) {
  return escaped(j, 0);
}

TerminalSafeJson::TerminalSafeJson(const Json& j) {
  if (needs_escape(j, 0)) copy_ = escaped(j, 0);
  view_ = copy_ ? &*copy_ : &j;
}

std::string dump_json(const Json& j) {
  // A string that reached us with ill-formed UTF-8 (a peer's host name, say)
  // is written with U+FFFD in place of its bad bytes: it must never stop a
  // summary from being written. The stores repair strings on the way in; this
  // is the last line of defence.
  return j.dump(2, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace);
}

}  // namespace traceml::report
