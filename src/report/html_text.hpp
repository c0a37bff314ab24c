// Text from a summary or a run (host names, run names, program output) is
// data, never markup: every string the HTML report writes goes through here.
#pragma once

#include <string>
#include <string_view>

namespace traceml::report {

/// `s` as HTML text or attribute value: `&`, `<`, `>`, `"` and `'` become
/// entities; control characters become visible escapes (`\x1b`) and
/// ill-formed UTF-8 becomes U+FFFD, as on a terminal (model/text.hpp).
/// Newlines and tabs are kept.
std::string escape_html(std::string_view s);

}  // namespace traceml::report
