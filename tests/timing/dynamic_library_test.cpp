#include "timing/dynamic_library.hpp"

#include <gtest/gtest.h>

namespace traceml::timing {
namespace {

TEST(DynamicLibrary, NoNameOpensAndTheReasonListsThem) {
  const auto lib = DynamicLibrary::open_first("libnothing", {"libnothing.so.9", "libnothing.so"});
  EXPECT_FALSE(lib.is_open());
  EXPECT_FALSE(lib.complete());
  EXPECT_TRUE(lib.name().empty());
  EXPECT_EQ(lib.reason(), "libnothing not found (tried libnothing.so.9, libnothing.so)");
}

TEST(DynamicLibrary, OpensTheFirstNameThatLoads) {
  const auto lib = DynamicLibrary::open_first("libm", {"libnothing.so", "libm.so.6", "libc.so.6"});
  EXPECT_TRUE(lib.is_open());
  EXPECT_EQ(lib.name(), "libm.so.6");
  EXPECT_TRUE(lib.complete());
  EXPECT_EQ(lib.reason(), "");
}

TEST(DynamicLibrary, RequireNamesTheFirstMissingEntryPoint) {
  auto lib = DynamicLibrary::open_first("libm", {"libm.so.6"});
  double (*cosine)(double) = nullptr;
  void (*absent)() = nullptr;
  double (*sine)(double) = nullptr;
  lib.require("cos", cosine);
  lib.require("cudaGetDeviceCount", absent);
  lib.require("cudaEventRecord", absent);
  lib.require("sin", sine);
  ASSERT_NE(cosine, nullptr);
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  EXPECT_EQ(absent, nullptr);
  EXPECT_FALSE(lib.complete());
  EXPECT_EQ(lib.reason(), "libm.so.6 has no cudaGetDeviceCount");
}

TEST(DynamicLibrary, AnOptionalEntryPointMayBeAbsent) {
  const auto lib = DynamicLibrary::open_first("libm", {"libm.so.6"});
  void (*absent)() = nullptr;
  double (*sine)(double) = nullptr;
  EXPECT_FALSE(lib.resolve("cuptiFinalize", absent));
  EXPECT_TRUE(lib.resolve("sin", sine));
  EXPECT_TRUE(lib.complete());  // an optional miss does not make it unusable
}

TEST(DynamicLibrary, AClosedOrMovedFromLibraryResolvesNothing) {
  auto lib = DynamicLibrary::open_first("libm", {"libm.so.6"});
  DynamicLibrary moved = std::move(lib);
  double (*sine)(double) = nullptr;
  EXPECT_TRUE(moved.resolve("sin", sine));
  sine = nullptr;
  EXPECT_FALSE(lib.resolve("sin", sine));  // NOLINT(bugprone-use-after-move): the point
  EXPECT_EQ(sine, nullptr);
}

}  // namespace
}  // namespace traceml::timing
