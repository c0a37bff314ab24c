// Reading a final_summary.json that a user names (traceml view, traceml
// compare): the checks that turn text which is not a run summary into one
// clear line before any report code sees it. Pure: the caller reads the file
// and adds the file name and its hint to the problem.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace traceml::report {

/// A summary, or the one-line reason the text is not one (without file name).
struct SummaryParse {
  std::optional<nlohmann::ordered_json> json;
  std::string problem;
};

/// What `traceml view` accepts: a JSON object that has a schema_version, a
/// primary_diagnosis or a text (TraceML's summaries and ours).
SummaryParse parse_summary_to_view(std::string_view text);

/// What `traceml compare` accepts (spec §6.1, strict): a JSON object with a
/// schema 1.x `schema_version`, the system, process, step_time and step_memory
/// sections as objects, and not a compare result.
SummaryParse parse_summary_to_compare(std::string_view text);

}  // namespace traceml::report
