// The rules for the text values that reach traceml from outside as options
// or environment variables (a run's name, a strategy word, a run token, a
// host name), checked the same way by the CLI (`traceml run`, `traceml
// serve`) and by the runtime in each rank (runtime/config.cpp), which takes
// them from the environment that any launcher, or the user, sets. std only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace traceml::model {

/// The longest run name: a directory name with room for the suffixes
/// traceml adds (`_rank<N>`, `_<n>` when the name is taken).
inline constexpr std::size_t kMaxRunNameBytes = 128;
/// The longest strategy word.
inline constexpr std::size_t kMaxStrategyBytes = 64;
/// The longest run token; the wire carries strings of up to 1,024 bytes
/// (transport::kMaxStringBytes, which static-asserts this).
inline constexpr std::size_t kMaxTokenBytes = 1024;
/// The longest host name (DNS: 253 characters; an IPv6 literal is shorter).
inline constexpr std::size_t kMaxHostBytes = 253;

/// Why `name` cannot name a run's directory, as the end of a sentence that
/// starts with the option or variable ("must be ..."); std::nullopt if it
/// can: one path segment of letters, digits, '_', '.' and '-', not "." or
/// "..", at most kMaxRunNameBytes.
std::optional<std::string> run_name_problem(std::string_view name);

/// Why `word` cannot be a strategy word ("ddp", "fsdp", "single_process"):
/// letters, digits, '_' and '-', at most kMaxStrategyBytes.
std::optional<std::string> strategy_problem(std::string_view word);

/// Why `token` cannot be a run token: it must be non-empty valid UTF-8
/// without control characters, at most kMaxTokenBytes, so that a shell and
/// the wire carry it unchanged.
std::optional<std::string> token_problem(std::string_view token);

/// Why `host` cannot be a host to connect to: a host name or an IPv4/IPv6
/// address (letters, digits, '.', '-', '_', ':', '%', and '[' ']' around an
/// IPv6 address), at most kMaxHostBytes.
std::optional<std::string> host_problem(std::string_view host);

/// Steps A..B of --profile-steps (TRACEML_PROFILE_STEPS).
struct ProfileSteps {
  std::int64_t first = 1;
  std::int64_t last = 1;
};
/// Parses "A:B" (1 <= A <= B, at most kMaxProfileSteps steps); std::nullopt
/// and `problem` set (the end of a sentence that starts with the option:
/// "must be ...") when it is not one.
std::optional<ProfileSteps> parse_profile_steps(std::string_view text, std::string& problem);
/// Parses --profile-ranks (TRACEML_PROFILE_RANKS): "all", or global ranks
/// "0,3,8" (each in [0, kMaxWorldSize), at most 1,024 of them). "all" gives
/// an empty list.
std::optional<std::vector<int>> parse_profile_ranks(std::string_view text, std::string& problem);
/// Parses --profile: "auto" (kDefaultAutoProfileSteps steps a capture) or
/// "auto:N" (1 <= N <= kMaxProfileSteps); the steps, or std::nullopt and
/// `problem` set as parse_profile_steps does.
inline constexpr std::int64_t kDefaultAutoProfileSteps = 10;
std::optional<std::int64_t> parse_profile_auto(std::string_view text, std::string& problem);

/// `value` for a one-line message: control characters, tabs and newlines escaped,
/// ill-formed UTF-8 replaced, and cut after 64 bytes with "...", so that a
/// hostile or mistaken value can neither drive the terminal, nor break the
/// line, nor flood it.
std::string quote_value(std::string_view value);

}  // namespace traceml::model
