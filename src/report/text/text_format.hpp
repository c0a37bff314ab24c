// The report's number formats and notation, shared by the text report and
// the compare text (and by any later renderer that prints the same words):
// one place decides how a duration, a byte count or a rank is written.
#pragma once

#include <optional>
#include <string>

#include "report/json_read.hpp"

namespace traceml::report {

/// "12.3 ms".
std::string fmt_ms(double v);
/// A duration in milliseconds as people read it: "2.6 ms", "6.0 s", "2.1 min".
std::string fmt_duration_ms(double v);
/// "42%" (whole percent).
std::string fmt_pct(double v);
/// Decimal units: "512.0 MB" under 0.1 GB (it would read "0.0 GB"), else "16.0 GB".
std::string fmt_bytes(double bytes);
/// §5.8 fmt_duration: under a minute with a decimal; else whole seconds
/// (half-even) as "1m 1s" or, from an hour, "1h 0m".
std::string fmt_duration(double seconds);
/// A small percentage with two significant digits: "0.0055%", "0.26%", "1.2%".
std::string percent_of_step(double pct);
/// Python's "{:+.{digits}f}": always signed ("+0.0", "-0.0", "+1.5").
std::string signed_fixed(double x, int digits = 1);

/// Status label as TraceML prints it: `_` -> space, upper case, one space between words.
std::string status_label(const std::string& s);
/// "CRITICAL" / "WARNING"; empty for info or no severity (nothing is printed);
/// an unknown severity in upper case.
std::string severity_word(const std::string& s);

/// "R2/N1" for a rank row (node omitted when unknown); nullopt when the rank is unknown.
std::optional<std::string> rank_label(const json_read::Json* row,
                                      const std::optional<std::string>& key);
/// "N1" for a System row (rows are keyed by node label).
std::optional<std::string> node_label(const json_read::Json* row,
                                      const std::optional<std::string>& key);

/// An issue's `summary` in the report's notation: a System finding scoped to
/// a node ends "on 0." or "on 0 gpu2." in TraceML's words, which reads as
/// "zero"; the text and page say "on N0." and "on G2/N0." (the Scope legend).
/// The JSON keeps TraceML's string. "" when the issue has no summary.
std::string issue_summary(const json_read::Json* issue);

}  // namespace traceml::report
