// Strings that arrive from outside (the wire, JSONL, the run database, a
// summary file) are data, never control: these checks keep one bad byte from
// blocking a summary (JSON needs valid UTF-8) or driving a terminal (an ESC
// sequence in a host name). std only.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace traceml::model {

/// True when `s` is well-formed UTF-8 (no overlong forms, no surrogates, no
/// code point above U+10FFFF).
bool valid_utf8(std::string_view s);

/// `s` with each ill-formed byte sequence replaced by U+FFFD and cut to at
/// most `max_bytes` bytes on a character boundary. Well-formed input within
/// the limit comes back unchanged.
std::string sanitize_utf8(std::string_view s, std::size_t max_bytes = std::string::npos);

/// `s` made safe to print on a terminal: control characters (C0 except tab
/// and newline, DEL, and the C1 range U+0080..U+009F) become visible escapes
/// such as `\x1b` and `\u009b`, and ill-formed UTF-8 is replaced as by
/// sanitize_utf8. Printable text, including non-ASCII, is unchanged. With
/// `one_line`, newlines are escaped too (`\x0a`): for a message that must
/// stay a single line.
std::string escape_for_terminal(std::string_view s, bool one_line = false);

}  // namespace traceml::model
