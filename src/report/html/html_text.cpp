#include "report/html/html_text.hpp"

#include "model/text.hpp"

namespace traceml::report {

std::string escape_markup(std::string_view s, std::string_view apostrophe) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += apostrophe;
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string escape_html(std::string_view raw) {
  return escape_markup(model::escape_for_terminal(raw), "&#39;");
}

}  // namespace traceml::report
