#include "report/text/text_format.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "analysis/number_format.hpp"
#include "report/summary_view.hpp"
#include "report/text/text_layout.hpp"

namespace traceml::report {

namespace {

using analysis::fixed;

/// Bytes under 0.1 GB print in MB, or they would read "0.0 GB".
constexpr double kMegabyteCutoff = 1e8;

}  // namespace

std::string fmt_ms(double v) {
  return fixed(v, 1) + " ms";
}

std::string fmt_duration_ms(double v) {
  if (std::fabs(v) < 1000.0) return fmt_ms(v);
  if (std::fabs(v) < 120000.0) return fixed(v / 1000.0, 1) + " s";
  return fixed(v / 60000.0, 1) + " min";
}

std::string fmt_pct(double v) {
  return fixed(v, 0) + "%";
}

std::string fmt_bytes(double b) {
  if (std::fabs(b) < kMegabyteCutoff) return fixed(b / 1e6, 1) + " MB";
  return fixed(b / 1e9, 1) + " GB";
}

std::string fmt_duration(double s) {
  if (s < 60.0) return fixed(s, 1) + "s";
  // Beyond any real run (a corrupt value): whole hours, without an integer
  // conversion that would overflow.
  if (s >= 1e15) return fixed(s / 3600.0, 0) + "h";
  const long long total = analysis::round_half_even(s);
  if (total < 3600) return std::to_string(total / 60) + "m " + std::to_string(total % 60) + "s";
  return std::to_string(total / 3600) + "h " + std::to_string((total % 3600) / 60) + "m";
}

std::string percent_of_step(double pct) {
  if (!(pct > 0.0)) return "0%";
  if (pct >= 1.0) return fixed(pct, 1) + "%";
  if (pct < 1e-6) return "<0.000001%";
  const int digits = std::min(7, int(std::ceil(-std::log10(pct))) + 1);
  return fixed(pct, digits) + "%";
}

std::string signed_fixed(double x, int digits) {
  return fmt::format("{:+.{}f}", x, digits < 0 ? 6 : digits);  // printf's reading of "%+.-1f"
}

std::string status_label(const std::string& s) {
  std::string out;
  bool gap = false;
  for (const char c : upper(s)) {
    if (c == '_' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      gap = !out.empty();
      continue;
    }
    if (gap) out += ' ';
    gap = false;
    out += c;
  }
  return out;
}

std::string severity_word(const std::string& s) {
  switch (severity_of(s)) {
    case Severity::Critical:
      return "CRITICAL";
    case Severity::Warning:
      return "WARNING";
    case Severity::Info:
      break;
  }
  const std::string u = upper(json_read::trimmed(s));
  if (u == "INFO") return {};
  return u;
}

std::optional<std::string> rank_label(const json_read::Json* row,
                                      const std::optional<std::string>& key) {
  const auto r = row_rank(row, key);
  if (!r) return std::nullopt;
  std::string s = "R" + std::to_string(*r);
  if (const auto n = row_node(row)) s += "/N" + std::to_string(*n);
  return s;
}

std::optional<std::string> node_label(const json_read::Json* row,
                                      const std::optional<std::string>& key) {
  const auto n = row_node_or_key(row, key);
  if (!n) return std::nullopt;
  return "N" + std::to_string(*n);
}

std::string issue_summary(const json_read::Json* issue) {
  using namespace json_read;
  std::string s = text_or(child(issue, "summary"));
  // The scope the analysis wrote names the node (and GPU) the words end with.
  const Json* scope = path(issue, {"evidence", "scope"});
  const auto node = text(child(scope, "node"));
  const auto node_rank = integer(child(scope, "node_rank"));
  if (!node || !node_rank) return s;
  const std::string n = "N" + std::to_string(*node_rank);
  std::string theirs = " on " + *node;
  std::string ours = " on " + n;
  if (const auto gpu = integer(child(scope, "gpu_idx"))) {
    theirs += " gpu" + std::to_string(*gpu);
    ours = " on G" + std::to_string(*gpu) + "/" + n;
  }
  theirs += ".";
  ours += ".";
  if (s.size() >= theirs.size() && s.compare(s.size() - theirs.size(), theirs.size(), theirs) == 0)
    s.replace(s.size() - theirs.size(), theirs.size(), ours);
  return s;
}

}  // namespace traceml::report
