#include "report/summary_view.hpp"

#include <cctype>
#include <cstdlib>

#include "analysis/diagnosis_kind.hpp"

namespace traceml::report {

namespace {

using namespace json_read;

bool same_word(const std::string& s, const char* word) {
  std::size_t i = 0;
  for (; i < s.size() && word[i] != '\0'; ++i) {
    if (std::toupper(static_cast<unsigned char>(s[i])) != word[i]) return false;
  }
  return i == s.size() && word[i] == '\0';
}

std::optional<long long> parse_int(const std::optional<std::string>& s) {
  if (!s || s->empty()) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(s->c_str(), &end, 10);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return v;
}

/// A group-row key: "idx" is a string in schema 1.7; a number is accepted too.
std::optional<std::string> row_key(const Json* j) {
  if (auto s = text(j)) return s;
  if (const auto i = integer(j)) return std::to_string(*i);
  return std::nullopt;
}

}  // namespace

Severity severity_of(const std::string& raw) {
  const std::string s = json_read::trimmed(raw);
  if (same_word(s, "CRIT") || same_word(s, "CRITICAL")) return Severity::Critical;
  if (same_word(s, "WARN") || same_word(s, "WARNING")) return Severity::Warning;
  return Severity::Info;
}

Point point(const Json* section, const char* stat, const char* metric) {
  const Json* p = path(section, {"global", stat, metric});
  return {number(child(p, "value")), row_key(child(p, "idx"))};
}

std::optional<double> average(const Json* section, const char* metric) {
  return number(path(section, {"global", "average", metric}));
}

const Json* group_row(const Json* section, const std::optional<std::string>& key) {
  if (!key) return nullptr;
  return child(path(section, {"groups", "rows"}), key->c_str());
}

std::optional<long long> row_rank(const Json* row, const std::optional<std::string>& key) {
  if (const auto r = integer(path(row, {"identity", "global_rank"}))) return r;
  return parse_int(key);
}

std::optional<long long> row_node(const Json* row) {
  return integer(path(row, {"identity", "node_rank"}));
}

std::optional<long long> row_node_or_key(const Json* row, const std::optional<std::string>& key) {
  if (const auto n = row_node(row)) return n;
  return parse_int(key);
}

SummaryView view_summary(const Json& summary) {
  SummaryView run;
  run.root = &summary;
  run.meta = object_child(&summary, "meta");
  run.primary = object_child(&summary, "primary_diagnosis");
  run.evidence = object_child(run.primary, "evidence");
  run.system = object_child(&summary, "system");
  run.process = object_child(&summary, "process");
  run.step_time = object_child(&summary, "step_time");
  run.step_memory = object_child(&summary, "step_memory");
  run.kind = text_or(child(run.primary, "kind"));
  run.severity = text_or(child(run.primary, "severity"));
  const auto used = integer(path(run.step_time, {"metadata", "global_ranks_used"}));
  run.multi = used && *used > 1;
  run.gpus = integer(child(run.meta, "gpus_observed"));
  run.world = integer(child(run.meta, "world_size"));
  return run;
}

bool cpu_only(const SummaryView& run) {
  return run.gpus && *run.gpus == 0;
}

std::optional<long long> steps_analyzed(const SummaryView& run) {
  if (const auto s = integer(path(run.step_time, {"global", "window", "steps_analyzed"}))) return s;
  return integer(child(run.evidence, "steps_analyzed"));
}

std::optional<double> primary_util(const SummaryView& run) {
  return number(child(run.evidence, "gpu_util_avg_percent"));
}

std::string diagnosis_field(const Json* section, const char* field) {
  return text_or(path(section, {"diagnosis", field}));
}

std::optional<long long> issue_rank(const SummaryView& run, const std::string& kind) {
  const Json* issues = json_read::array_child(run.step_time, "issues");
  if (issues == nullptr) return std::nullopt;
  for (const Json& issue : *issues) {
    if (text_or(child(&issue, "kind")) != kind) continue;
    const Json* ranks = json_read::array_child(&issue, "ranks");
    if (ranks != nullptr && !ranks->empty()) return integer(&ranks->front());
  }
  return std::nullopt;
}

const Json* issue_evidence(const SummaryView& run, const std::string& kind) {
  const Json* issues = json_read::array_child(run.step_time, "issues");
  if (issues == nullptr) return nullptr;
  for (const Json& issue : *issues) {
    if (text_or(child(&issue, "kind")) == kind) return object_child(&issue, "evidence");
  }
  return nullptr;
}

const Json* straggler_comparison(const SummaryView& run) {
  const Json* cs = json_read::array_child(run.evidence, "comparisons");
  if (cs == nullptr || cs->empty() || !cs->front().is_object()) return run.evidence;
  const auto culprit = issue_rank(run, run.kind);
  const Json* best = nullptr;
  double best_delta = 0.0;
  for (const Json& c : *cs) {
    if (culprit && integer(path(&c, {"worst", "rank"})) != culprit) continue;
    const auto delta = number(child(&c, "delta_ms"));
    if (delta && (best == nullptr || *delta > best_delta)) {
      best = &c;
      best_delta = *delta;
    }
  }
  return best != nullptr ? best : &cs->front();
}

std::optional<SlowWindow> slow_window(const SummaryView& run) {
  const Json* sw = path(run.step_time, {"global", "slow_window"});
  const auto rank = integer(child(sw, "rank"));
  const auto first = integer(child(sw, "first_step"));
  const auto last = integer(child(sw, "last_step"));
  const auto steps = integer(child(sw, "steps"));
  const auto slower = number(child(sw, "slower_pct"));
  if (!rank || !first || !last || !steps || !slower || *rank < 0 || *first < 1 || *last < *first ||
      *steps < 1)
    return std::nullopt;
  return SlowWindow{*rank, *first, *last, *steps, *slower};
}

std::optional<long long> straggler_rank(const SummaryView& run) {
  if (!analysis::is_straggler(run.kind)) return std::nullopt;
  return integer(path(straggler_comparison(run), {"worst", "rank"}));
}

std::optional<std::string> representative_key(const SummaryView& run) {
  auto rep = point(run.step_time, "median", "step_time_ms").idx;
  if (analysis::is_straggler(run.kind)) {
    const Json* cmp = straggler_comparison(run);
    const auto culprit = integer(path(cmp, {"worst", "rank"}));
    const auto typical = integer(path(cmp, {"median", "rank"}));
    if (culprit && typical && *typical != *culprit && rep == std::to_string(*culprit))
      rep = std::to_string(*typical);
  }
  return rep;
}

}  // namespace traceml::report
