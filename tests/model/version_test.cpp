#include "traceml/version.hpp"

#include <gtest/gtest.h>

// The version macro is a definition of model/version.cpp alone: a version bump
// rebuilds one file, and programs that link traceml do not inherit the macro.
#ifdef TRACEML_VERSION
#error "TRACEML_VERSION leaks out of model/version.cpp"
#endif

namespace {

TEST(Version, IsTheProjectVersion) {
  EXPECT_STREQ(traceml::version(), TRACEML_TEST_PROJECT_VERSION);
}

}  // namespace
