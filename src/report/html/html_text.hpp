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

/// The five markup characters of `s` as entities, the apostrophe as
/// `apostrophe` ("&#39;" in HTML, "&apos;" in XML); every other byte as it
/// is. The one escaper of HTML pages and JUnit XML: callers clean what else
/// their format forbids first.
std::string escape_markup(std::string_view s, std::string_view apostrophe);

}  // namespace traceml::report
