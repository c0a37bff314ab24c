// Command-line flags of the examples: `--name value` or `--name=value`.
// Kept tiny and dependency-free so that each example stays one readable file.
// A bad command line prints one line and exits with 2; --help prints the flags.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace examples {

class Flags {
 public:
  Flags(std::string program, std::string about)
      : program_(std::move(program)), about_(std::move(about)) {}

  /// Registers a flag that writes into *value; the value's current content is
  /// its default.
  void add(std::string name, std::int64_t* value, std::string help) {
    flags_.push_back({std::move(name), value, std::move(help)});
  }
  void add(std::string name, std::optional<std::int64_t>* value, std::string help) {
    flags_.push_back({std::move(name), value, std::move(help)});
  }
  void add(std::string name, double* value, std::string help) {
    flags_.push_back({std::move(name), value, std::move(help)});
  }
  void add(std::string name, std::string* value, std::string help) {
    flags_.push_back({std::move(name), value, std::move(help)});
  }
  /// A switch: present means true; it takes no value.
  void add(std::string name, bool* value, std::string help) {
    flags_.push_back({std::move(name), value, std::move(help)});
  }

  /// Parses argv; exits 0 after --help, 2 on an unknown flag or a bad value.
  void parse(int argc, char** argv) const {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        print_help();
        std::exit(0);
      }
      std::optional<std::string> inline_value;
      if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
      const Flag* flag = find(arg);
      if (flag == nullptr) fail("unknown flag '" + arg + "' (see --help)");
      if (auto* on = std::get_if<bool*>(&flag->target)) {
        if (inline_value) fail(arg + " takes no value");
        **on = true;
        continue;
      }
      std::string value;
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        fail(arg + " needs a value");
      }
      if (!assign(flag->target, value)) fail("bad value '" + value + "' for " + arg);
    }
  }

  [[noreturn]] void fail(const std::string& message) const {
    std::cerr << program_ << ": error: " << message << "\n";
    std::exit(2);
  }

 private:
  using Target =
      std::variant<std::int64_t*, std::optional<std::int64_t>*, double*, std::string*, bool*>;
  struct Flag {
    std::string name;
    Target target;
    std::string help;
  };

  const Flag* find(const std::string& arg) const {
    for (const Flag& flag : flags_) {
      if (arg == "--" + flag.name) return &flag;
    }
    return nullptr;
  }

  static bool parse_int(const std::string& text, std::int64_t* out) {
    char* end = nullptr;
    const long long parsed = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') return false;
    *out = static_cast<std::int64_t>(parsed);
    return true;
  }

  static bool assign(const Target& target, const std::string& text) {
    if (auto* integer = std::get_if<std::int64_t*>(&target)) return parse_int(text, *integer);
    if (auto* maybe = std::get_if<std::optional<std::int64_t>*>(&target)) {
      std::int64_t parsed = 0;
      if (!parse_int(text, &parsed)) return false;
      **maybe = parsed;
      return true;
    }
    if (auto* real = std::get_if<double*>(&target)) {
      char* end = nullptr;
      const double parsed = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0') return false;
      **real = parsed;
      return true;
    }
    **std::get_if<std::string*>(&target) = text;
    return true;
  }

  void print_help() const {
    std::cout << "usage: " << program_ << " [flags]\n" << about_ << "\n\nflags:\n";
    for (const Flag& flag : flags_) {
      std::string shown = "--" + flag.name;
      if (!std::holds_alternative<bool*>(flag.target)) shown += " V";
      shown.resize(std::max<std::size_t>(shown.size() + 2, 24), ' ');
      std::cout << "  " << shown << flag.help << default_of(flag.target) << "\n";
    }
  }

  static std::string default_of(const Target& target) {
    if (auto* integer = std::get_if<std::int64_t*>(&target)) {
      return " (default " + std::to_string(**integer) + ")";
    }
    if (auto* real = std::get_if<double*>(&target)) {
      std::string text = std::to_string(**real);
      text.erase(text.find_last_not_of('0') + 1);
      if (!text.empty() && text.back() == '.') text.pop_back();
      return " (default " + text + ")";
    }
    if (auto* text = std::get_if<std::string*>(&target)) return " (default " + **text + ")";
    return "";
  }

  std::string program_;
  std::string about_;
  std::vector<Flag> flags_;
};

}  // namespace examples
