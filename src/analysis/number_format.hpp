// Number formatting that matches Python's, which TraceML's texts use: "%.Nf"
// is correctly rounded from the exact binary value (as glibc printf and fmt
// are), and round(x, 3) is "format with %.3f, parse back". Made with fmt:
// locale-independent, whatever LC_NUMERIC the process that links us set.
#pragma once

#include <optional>
#include <string>

namespace traceml::analysis {

/// printf("%.{digits}f", x), that is fmt "{:.{digits}f}"; "nan", "-inf" as printf.
std::string fixed(double x, int digits);
/// Python round(x, digits) for digits >= 0.
double py_round(double x, int digits);
/// Python round(x) -> int semantics: half to even.
long long round_half_even(double x);
/// A fraction as a percent text: 0.25 -> "25.0%". Negative or non-finite -> "0.0%".
std::string percent_text(double fraction);
/// Bytes in binary units as TraceML prints memory: divide by 1024 through
/// B, KB, MB, GB, TB; "%.0f" at >= 100 or in B, "%.1f" at >= 10, else "%.2f".
/// A negative value is scaled by its magnitude (TraceML prints it in raw
/// bytes, quirk 12): -2147483648 -> "-2.00 GB".
std::string format_bytes_binary(double bytes);

}  // namespace traceml::analysis
