#include "report/text/text_layout.hpp"

#include <algorithm>
#include <utility>

namespace traceml::report {

std::size_t display_width(const std::string& s) {
  std::size_t w = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0x1b && i + 1 < s.size() && s[i + 1] == '[') {
      i += 2;
      while (i < s.size() && !(s[i] >= '@' && s[i] <= '~'))
        ++i;
      continue;
    }
    if ((c & 0xC0) != 0x80) ++w;
  }
  return w;
}

std::string pad_right(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

std::string pad_left(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : std::string(width - w, ' ') + s;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

std::vector<std::string> wrap(const std::string& prefix, const std::string& body, std::size_t width,
                              std::size_t indent) {
  std::string flat = body;
  std::replace_if(
      flat.begin(), flat.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  std::vector<std::pair<std::size_t, std::string>> words;  // (spaces before, word)
  std::size_t i = 0;
  while (i < flat.size()) {
    std::size_t gap = 0;
    while (i < flat.size() && flat[i] == ' ')
      ++gap, ++i;
    const std::size_t start = i;
    while (i < flat.size() && flat[i] != ' ')
      ++i;
    if (i > start) words.emplace_back(gap, flat.substr(start, i - start));
  }
  // Greedy, then one fix: a last line of one short word ("N0.") takes the
  // word before it along, when that fits.
  std::vector<std::size_t> starts;  // index of each line's first word
  std::size_t line_width = display_width(prefix);
  for (std::size_t k = 0; k < words.size(); ++k) {
    const std::size_t w = display_width(words[k].second);
    if (k == 0) {
      starts.push_back(0);
      line_width += w;
    } else if (line_width + words[k].first + w <= width) {
      line_width += words[k].first + w;
    } else {
      starts.push_back(k);
      line_width = indent + w;
    }
  }
  constexpr std::size_t kWidowMax = 4;
  if (starts.size() >= 2 && starts.back() + 1 == words.size() &&
      display_width(words.back().second) <= kWidowMax &&
      starts.back() - 1 > starts[starts.size() - 2]) {
    const auto& [gap, moved] = words[words.size() - 2];
    (void)gap;
    if (indent + display_width(moved) + words.back().first + display_width(words.back().second) <=
        width)
      --starts.back();
  }
  std::vector<std::string> lines;
  for (std::size_t l = 0; l < starts.size(); ++l) {
    std::string line = l == 0 ? prefix : std::string(indent, ' ');
    const std::size_t end = l + 1 < starts.size() ? starts[l + 1] : words.size();
    for (std::size_t k = starts[l]; k < end; ++k)
      line += (k == starts[l] ? std::string() : std::string(words[k].first, ' ')) + words[k].second;
    lines.push_back(rstrip(line));
  }
  return lines;
}

void append(std::vector<std::string>& out, const std::vector<std::string>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

void append_side_by_side(std::vector<std::string>& out,
                         const std::optional<std::vector<std::string>>& left,
                         const std::optional<std::vector<std::string>>& right, std::size_t left_min,
                         const std::string& sep) {
  if (!left || !right) {
    for (const auto& l : left ? *left : right ? *right : std::vector<std::string>{})
      out.push_back(rstrip(l));
    return;
  }
  std::size_t width = left_min;
  for (const auto& l : *left)
    width = std::max(width, display_width(l));
  const std::size_t rows = std::max(left->size(), right->size());
  for (std::size_t r = 0; r < rows; ++r) {
    const std::string l = r < left->size() ? (*left)[r] : std::string();
    const std::string rt = r < right->size() ? (*right)[r] : std::string();
    out.push_back(rstrip(pad_right(l, width) + sep + rt));
  }
}

std::string Painter::paint(const std::string& s, const char* code) const {
  return on_ && !s.empty() ? code + s + ansi::kReset : s;
}

std::string Painter::by_severity(const std::string& s, Severity severity) const {
  switch (severity) {
    case Severity::Critical:
      return paint(s, ansi::kRed);
    case Severity::Warning:
      return paint(s, ansi::kYellow);
    case Severity::Info:
      break;
  }
  return paint(s, ansi::kGreen);
}

}  // namespace traceml::report
