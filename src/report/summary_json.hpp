// final_summary.json (schema 1.7, spec §5): serialization of an analysed run.
// Key order, nulls and number forms are part of the schema; TraceML's tooling
// and ours read each other's files.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/summary.hpp"

namespace traceml::report {

using Json = nlohmann::ordered_json;

inline constexpr double kSchemaVersion = 1.7;

Json issue_json(const analysis::Issue& i);
Json section_json(const analysis::Section& s);
Json primary_json(const analysis::Primary& p);

/// The whole summary without its `text` (which is rendered from this JSON).
/// `generated_at` is an ISO-8601 UTC time; `tracer`, when given, is added as
/// the `tracer` block (DECISIONS 9).
Json summary_json(const analysis::Summary& s, const std::string& generated_at,
                  const std::optional<Json>& tracer = std::nullopt);

/// Unix seconds → "2026-08-05T12:46:00.123456+00:00" (microseconds, UTC).
std::string iso8601_utc(double unix_seconds);

/// The JSON text of a file: 2-space indent, insertion order, non-ASCII
/// escaped; ill-formed UTF-8 in a string is written as U+FFFD, never a throw.
std::string dump_json(const Json& j);

/// A copy of `j` whose every string (keys too) went through
/// model::escape_for_terminal: what a text renderer may print as is. The
/// renderers start from it, so a summary's strings (host names, labels, a
/// hand-edited file's anything) never put an ESC sequence on a terminal.
Json escape_strings_for_terminal(const Json& j);

/// What a renderer reads: `j` itself when none of its strings needs escaping
/// (the common case: no copy), else escape_strings_for_terminal(j). `j` must
/// outlive it.
class TerminalSafeJson {
 public:
  explicit TerminalSafeJson(const Json& j);
  TerminalSafeJson(const TerminalSafeJson&) = delete;
  TerminalSafeJson& operator=(const TerminalSafeJson&) = delete;
  [[nodiscard]] const Json& get() const { return *view_; }

 private:
  std::optional<Json> copy_;
  const Json* view_ = nullptr;
};

}  // namespace traceml::report
