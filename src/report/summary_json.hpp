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

/// The JSON text of a file: 2-space indent, insertion order, non-ASCII escaped.
std::string dump_json(const Json& j);

}  // namespace traceml::report
