// A JSON file as a test reads it: null when the file is missing or empty,
// discarded (is_discarded()) when it is not JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "subprocess.hpp"

namespace traceml::testing {

inline nlohmann::json load_json(const std::filesystem::path& p) {
  const std::string text = read_file(p);
  if (text.empty()) return nlohmann::json();
  return nlohmann::json::parse(text, nullptr, false);
}

}  // namespace traceml::testing
