// Renders a page in a real browser: headless Chromium (Debian's `chromium`,
// installed by scripts/install-deps.sh), for tests that check what a user's
// browser makes of the HTML report: the DOM after loading, and every console
// message (a script error, a refused resource) from Chromium's log.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "subprocess.hpp"

namespace traceml::testing {

/// The browser to use: $TRACEML_CHROMIUM, else /usr/bin/chromium; "" when
/// that file does not exist.
inline std::string chromium_path() {
  const char* env = std::getenv("TRACEML_CHROMIUM");
  const std::string path = env != nullptr && *env != '\0' ? env : "/usr/bin/chromium";
  return std::filesystem::exists(path) ? path : "";
}

/// Skips the test when there is no browser, unless TRACEML_REQUIRE_BROWSER
/// is set (scripts/test.sh sets it: its dependencies include chromium), when
/// it fails instead.
#define TRACEML_NEED_CHROMIUM()                                                                   \
  do {                                                                                            \
    if (::traceml::testing::chromium_path().empty()) {                                            \
      if (std::getenv("TRACEML_REQUIRE_BROWSER") != nullptr)                                      \
        FAIL() << "no chromium, and TRACEML_REQUIRE_BROWSER is set "                              \
                  "(install it: scripts/install-deps.sh)";                                        \
      GTEST_SKIP() << "no chromium: the page is not checked in a browser (install it "            \
                      "with scripts/install-deps.sh; TRACEML_REQUIRE_BROWSER=1 makes this fail)"; \
    }                                                                                             \
  } while (0)

struct Rendered {
  int exit_code = -1;
  std::string dom;                   ///< the DOM after loading, serialized
  std::vector<std::string> console;  ///< console messages: errors, refusals, logs
  std::string log;                   ///< Chromium's whole stderr, for failure messages
};

/// Loads `page` (a file) in headless Chromium with a fresh profile, at most
/// 120 s, and returns its DOM and console. With `screenshot`, saves the
/// page as PNG there instead of dumping the DOM.
inline Rendered render_in_chromium(const std::filesystem::path& page,
                                   const std::filesystem::path& screenshot = {}) {
  TempDir profile;
  // Root needs --no-sandbox; --enable-logging=stderr puts every console
  // message on stderr as "...:CONSOLE:..." (older builds: "CONSOLE(").
  std::vector<std::string> argv = {
      "/usr/bin/timeout",        "120",
      chromium_path(),           "--headless",
      "--disable-gpu",           "--no-sandbox",
      "--no-first-run",          "--user-data-dir=" + profile.path().string(),
      "--enable-logging=stderr", "--v=0"};
  if (screenshot.empty()) {
    argv.emplace_back("--dump-dom");
  } else {
    argv.push_back("--screenshot=" + screenshot.string());
    argv.emplace_back("--window-size=1200,2400");
  }
  argv.push_back("file://" + std::filesystem::absolute(page).string());
  const ProcessResult r = run_process(argv);
  Rendered out;
  out.exit_code = r.exit_code;
  out.dom = r.out;
  out.log = r.err;
  std::size_t start = 0;
  while (start < r.err.size()) {
    std::size_t end = r.err.find('\n', start);
    if (end == std::string::npos) end = r.err.size();
    const std::string line = r.err.substr(start, end - start);
    if (line.find("CONSOLE") != std::string::npos) out.console.push_back(line);
    start = end + 1;
  }
  return out;
}

}  // namespace traceml::testing
