// Where the end-to-end tests find the LibTorch examples they train with:
// this build's (TRACEML_EXAMPLES_DIR, <build>/bin/examples), or the same
// examples built against another LibTorch when TRACEML_TEST_EXAMPLES_DIR
// names their folder (scripts/torch2.sh: LibTorch 2.x). Its parent's parent
// must hold bin/traceml too, as a build tree does (the docs' recipes run
// build/bin/...).
#pragma once

#include <cstdlib>
#include <string>

namespace traceml::testing {

inline std::string examples_dir() {
  const char* dir = std::getenv("TRACEML_TEST_EXAMPLES_DIR");
  return dir != nullptr && *dir != '\0' ? std::string(dir) : std::string(TRACEML_EXAMPLES_DIR);
}

}  // namespace traceml::testing
