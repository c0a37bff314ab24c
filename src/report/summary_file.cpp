#include "report/summary_file.hpp"

#include <cstddef>
#include <string>
#include <utility>

namespace traceml::report {
namespace {

using Json = nlohmann::ordered_json;

/// Deepest nesting of objects and arrays a summary may have; ours are 6 deep.
/// nlohmann parses any depth without recursing, but copying, comparing and
/// dumping a value recurse, so a file of a million '[' would overflow the
/// stack of the report code that walks it.
constexpr std::size_t kMaxDepth = 64;

/// Whether `text` nests objects and arrays deeper than kMaxDepth. Exact for
/// valid JSON; invalid JSON is rejected by the parser whatever this says.
bool too_deep(std::string_view text) {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

/// The JSON object of `text`, or the problem: not JSON, or not an object.
SummaryParse parse_object(std::string_view text) {
  SummaryParse out;
  if (too_deep(text)) {
    out.problem = "JSON nested more than " + std::to_string(kMaxDepth) + " levels deep";
    return out;
  }
  try {
    out.json = Json::parse(text);
  } catch (const Json::exception& e) {
    // Not only parse_error: a number beyond double's range (1e999) is an
    // out_of_range error of the parser, and is bad input all the same.
    out.problem = std::string("not valid JSON (") + e.what() + ")";
    return out;
  }
  if (!out.json->is_object()) {
    out.json.reset();
    out.problem = "a summary must be a JSON object";
  }
  return out;
}

SummaryParse problem(std::string text) {
  return {std::nullopt, std::move(text)};
}

}  // namespace

SummaryParse parse_summary_to_view(std::string_view text) {
  SummaryParse out = parse_object(text);
  if (!out.json) return out;
  const Json& j = *out.json;
  if (!j.contains("schema_version") && !j.contains("primary_diagnosis") && !j.contains("text"))
    return problem("not a final_summary.json (no schema_version, primary_diagnosis or text)");
  return out;
}

SummaryParse parse_summary_to_compare(std::string_view text) {
  SummaryParse out = parse_object(text);
  if (!out.json) return out;
  const Json& j = *out.json;
  const auto version = j.find("schema_version");
  if (version == j.end() || version->is_null())
    return problem("not a run summary (no 'schema_version')");
  if (j.contains("verdict") && j.contains("lhs"))
    return problem("this is a compare result, not a run summary");
  if (version->is_number() && version->get<double>() >= 2.0) {
    return problem("unsupported schema_version " + version->dump() +
                   " (compare reads schema 1.x summaries)");
  }
  for (const char* name : {"system", "process", "step_time", "step_memory"}) {
    const auto it = j.find(name);
    if (it == j.end() || !it->is_object())
      return problem(std::string("summary is missing required section '") + name + "'");
  }
  return out;
}

}  // namespace traceml::report
