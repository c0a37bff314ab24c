// Assertions on what the CLI shows a user when input is bad.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "subprocess.hpp"

namespace traceml::testing {

/// The last line of a program's output, trailing newlines ignored.
inline std::string last_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n')
    t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

/// Exit code 2, nothing on stdout, and exactly one stderr line that starts
/// with "traceml: error: " and mentions `contains`.
inline void expect_one_error_line(const ProcessResult& r, const std::string& contains) {
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("traceml: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(contains), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace traceml::testing
