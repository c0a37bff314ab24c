// Text layout for the renderers that print to a terminal (the text report,
// the compare box): widths are display columns, never bytes, so that UTF-8
// text (`·`, `◀`, box glyphs, a non-ASCII host name) and ANSI colour codes
// keep every column in place.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "report/summary_view.hpp"

namespace traceml::report {

/// Prose is wrapped here. It is the report's width: the side-by-side blocks
/// stay under it with typical values (about 110 columns).
inline constexpr std::size_t kProseWidth = 120;
/// Text in a right-hand block (a section summary) wraps at this width.
inline constexpr std::size_t kRightWrap = 52;

/// Visible columns: ANSI escapes are skipped, each UTF-8 code point counts one
/// (the box-drawing glyphs, `·` and `◀` are single-width).
std::size_t display_width(const std::string& s);

/// `s` padded with spaces to `width` display columns (never cut).
std::string pad_right(const std::string& s, std::size_t width);
std::string pad_left(const std::string& s, std::size_t width);

/// `s` without trailing spaces.
std::string rstrip(std::string s);
/// ASCII case changes.
std::string upper(std::string s);
std::string lower(std::string s);
std::string join(const std::vector<std::string>& parts, const std::string& sep);

/// Greedy word wrap by display width. The first line starts with `prefix`,
/// later ones with `indent` spaces. Tabs and line breaks count as spaces;
/// runs of spaces inside the text are kept where no break happens (so
/// "summary  (WARNING)" keeps its two spaces); a word longer than the width
/// gets a line of its own rather than being split. Lines carry no trailing
/// spaces; an empty body gives no line.
std::vector<std::string> wrap(const std::string& prefix, const std::string& body, std::size_t width,
                              std::size_t indent);

void append(std::vector<std::string>& out, const std::vector<std::string>& more);

/// Rows of `left` and `right` joined with `sep` at one column for the whole
/// block: the left side is padded to `left_min`, or to its widest line. A
/// side that is absent (nullopt) leaves the other printed alone.
void append_side_by_side(std::vector<std::string>& out,
                         const std::optional<std::vector<std::string>>& left,
                         const std::optional<std::vector<std::string>>& right, std::size_t left_min,
                         const std::string& sep);

namespace ansi {
inline constexpr const char* kReset = "\x1b[0m";
inline constexpr const char* kBold = "\x1b[1m";
inline constexpr const char* kDim = "\x1b[2m";
inline constexpr const char* kRed = "\x1b[1;31m";
inline constexpr const char* kYellow = "\x1b[1;33m";
inline constexpr const char* kGreen = "\x1b[32m";
}  // namespace ansi

/// ANSI colours, opt-in. Codes wrap only unpadded tokens and display_width
/// skips them, so the visible text is the same either way.
class Painter {
 public:
  explicit Painter(bool on) : on_(on) {}
  [[nodiscard]] std::string paint(const std::string& s, const char* code) const;
  /// Red for critical, yellow for warning, green otherwise.
  [[nodiscard]] std::string by_severity(const std::string& s, Severity severity) const;

 private:
  bool on_;
};

}  // namespace traceml::report
