#include "model/env_values.hpp"

#include <algorithm>
#include <charconv>
#include <system_error>

#include "model/limits.hpp"
#include "model/text.hpp"

namespace traceml::model {

namespace {

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

std::string too_long(std::size_t size, std::size_t max) {
  return "is " + std::to_string(size) + " bytes; at most " + std::to_string(max) + " are allowed";
}

}  // namespace

std::optional<std::string> run_name_problem(std::string_view name) {
  const char* rule = "must be one path segment of letters, digits, '_', '.' or '-'";
  if (name.empty() || name == "." || name == "..") return std::string(rule);
  for (const char c : name)
    if (!word_char(c) && c != '.') return std::string(rule);
  if (name.size() > kMaxRunNameBytes) return too_long(name.size(), kMaxRunNameBytes);
  return std::nullopt;
}

std::optional<std::string> strategy_problem(std::string_view word) {
  const char* rule = "must be one word of letters, digits, '_' or '-' (ddp, fsdp, single_process)";
  if (word.empty()) return std::string(rule);
  for (const char c : word)
    if (!word_char(c)) return std::string(rule);
  if (word.size() > kMaxStrategyBytes) return too_long(word.size(), kMaxStrategyBytes);
  return std::nullopt;
}

std::optional<std::string> token_problem(std::string_view token) {
  if (token.empty()) return std::string("is empty");
  if (token.size() > kMaxTokenBytes) return too_long(token.size(), kMaxTokenBytes);
  if (!valid_utf8(token)) return std::string("is not valid UTF-8");
  for (const unsigned char c : token)
    if (c < 0x20 || c == 0x7f) return std::string("holds a control character");
  return std::nullopt;
}

std::optional<std::string> host_problem(std::string_view host) {
  if (host.empty()) return std::string("is empty");
  if (host.size() > kMaxHostBytes) return too_long(host.size(), kMaxHostBytes);
  for (const char c : host) {
    if (!word_char(c) && c != '.' && c != ':' && c != '%' && c != '[' && c != ']')
      return std::string("must be a host name or an IP address");
  }
  return std::nullopt;
}

std::string quote_value(std::string_view value) {
  constexpr std::size_t kShown = 64;
  const std::string shown = value.size() <= kShown
                                ? escape_for_terminal(value, true)
                                : escape_for_terminal(sanitize_utf8(value, kShown), true) + "...";
  // A tab would pass for spaces inside the quotes: shown like the other
  // control characters.
  std::string out;
  for (const char c : shown)
    out += c == '\t' ? std::string("\\x09") : std::string(1, c);
  return out;
}

std::optional<ProfileSteps> parse_profile_steps(std::string_view text, std::string& problem) {
  const auto number = [](std::string_view s, std::int64_t& v) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  const auto colon = text.find(':');
  ProfileSteps steps;
  if (colon == std::string_view::npos || !number(text.substr(0, colon), steps.first) ||
      !number(text.substr(colon + 1), steps.last) || steps.first < 1 || steps.last < steps.first) {
    problem =
        "must be A:B, the first and last step to profile with 1 <= A <= B (e.g. 100:109), "
        "got " +
        quote_value(text);
    return std::nullopt;
  }
  if (steps.last - steps.first >= kMaxProfileSteps) {
    problem = "covers at most " + std::to_string(kMaxProfileSteps) +
              " steps (a profile of every operator is meant for a few slow steps), got " +
              quote_value(text);
    return std::nullopt;
  }
  return steps;
}

std::optional<std::int64_t> parse_profile_auto(std::string_view text, std::string& problem) {
  if (text == "auto") return kDefaultAutoProfileSteps;
  std::int64_t n = 0;
  const std::string_view digits = text.substr(std::min<std::size_t>(5, text.size()));
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (text.substr(0, 5) != "auto:" || digits.empty() || r.ec != std::errc() ||
      r.ptr != digits.data() + digits.size() || n < 1 || n > kMaxProfileSteps) {
    problem = "must be auto or auto:N, N the steps each capture covers (1 to " +
              std::to_string(kMaxProfileSteps) + "), got " + quote_value(text);
    return std::nullopt;
  }
  return n;
}

std::optional<std::vector<int>> parse_profile_ranks(std::string_view text, std::string& problem) {
  constexpr std::size_t kMaxListed = 1024;
  std::vector<int> ranks;
  if (text == "all") return ranks;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    std::int64_t v = -1;
    const auto r = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || r.ec != std::errc() || r.ptr != item.data() + item.size() || v < 0 ||
        v >= kMaxWorldSize || ranks.size() >= kMaxListed) {
      problem = "must be 'all' or global ranks separated by commas (e.g. 0,3), at most " +
                std::to_string(kMaxListed) + ", got " + quote_value(text);
      return std::nullopt;
    }
    ranks.push_back(int(v));
    at = comma + 1;
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

}  // namespace traceml::model
