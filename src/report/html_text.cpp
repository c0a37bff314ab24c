#include "report/html_text.hpp"

#include "model/text.hpp"

namespace traceml::report {

std::string escape_html(std::string_view raw) {
  const std::string s = model::escape_for_terminal(raw);
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
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace traceml::report
