// The CUDA loader on the machine it runs on. CI and the development machines
// have the CUDA toolkit but no driver and no GPU: there the loader must find
// libcudart, learn that nothing can run, and say why in one line. On a GPU
// machine the same test checks that the entry points are all found.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <string>

#include "timing/cuda_api.hpp"

namespace traceml::timing {
namespace {

bool file_exists(const std::string& path) {
  return std::ifstream(path).good();
}

TEST(CudaApi, NamesThatDoNotExistAreNotFound) {
  const CudaApiLoad r =
      load_cuda_api({"libtraceml_no_such_cudart.so.1", "/nonexistent/libcudart.so"});
  EXPECT_FALSE(r.api);
  EXPECT_TRUE(r.library.empty());
  EXPECT_EQ(
      r.reason,
      "libcudart not found (tried libtraceml_no_such_cudart.so.1, /nonexistent/libcudart.so)");
}

TEST(CudaApi, ALibraryWithoutTheEntryPointsIsRefused) {
  // libm loads everywhere and has none of CUDA's symbols.
  const CudaApiLoad r = load_cuda_api({"libm.so.6"});
  EXPECT_FALSE(r.api);
  EXPECT_EQ(r.library, "libm.so.6");
  EXPECT_EQ(r.reason, "libm.so.6 has no cudaGetDeviceCount");
}

/// The default search: a usable api with every entry point, or one line why not.
void expect_usable_or_explained(const CudaApiLoad& r) {
  if (r.api) {
    EXPECT_TRUE(r.reason.empty());
    EXPECT_FALSE(r.library.empty());
    const CudaApi& a = *r.api;
    for (const void* fn : {(const void*)a.get_device_count, (const void*)a.get_device,
                           (const void*)a.event_create_with_flags, (const void*)a.event_record,
                           (const void*)a.event_query, (const void*)a.event_elapsed_time,
                           (const void*)a.event_destroy, (const void*)a.get_error_string}) {
      EXPECT_NE(fn, nullptr);
    }
    int count = 0;
    EXPECT_EQ(a.get_device_count(&count), kCudaSuccess);
    EXPECT_GT(count, 0);
  } else {
    EXPECT_FALSE(r.reason.empty());
    EXPECT_EQ(r.reason.find('\n'), std::string::npos) << r.reason;
  }
}

TEST(CudaApi, DefaultSearchGivesAnApiOrOneLineWhy) {
  const CudaApiLoad r = load_cuda_api();
  expect_usable_or_explained(r);
  std::cout << "load_cuda_api(): " << (r.api ? "usable (" + r.library + ")" : r.reason) << "\n";
}

TEST(CudaApi, ToolkitWithoutDriverSaysSo) {
  // The toolkit's libcudart, loaded by path, when it is installed: without a
  // driver (or without a device) the reason names which is missing, with the
  // error's text from the library itself.
  const std::string path = "/usr/local/cuda/lib64/libcudart.so.13";
  if (!file_exists(path)) GTEST_SKIP() << path << " is not installed";
  const CudaApiLoad r = load_cuda_api({path});
  EXPECT_EQ(r.library, path);
  expect_usable_or_explained(r);
  if (!r.api) {
    const bool names_cause = r.reason.find("no CUDA driver") == 0 ||
                             r.reason.find("no CUDA device") == 0 ||
                             r.reason.find("CUDA unavailable") == 0;
    EXPECT_TRUE(names_cause) << r.reason;
    if (r.reason != "no CUDA device") {  // a count of 0 without an error has no code to show
      EXPECT_NE(r.reason.find("cudaGetDeviceCount returned"), std::string::npos) << r.reason;
    }
  }
}

TEST(CudaApi, DescribesErrorsWithTheLibrarysText) {
  CudaApi api;
  EXPECT_EQ(describe_cuda_error(api, 35), "35");
  api.get_error_string = [](int e) -> const char* { return e == 35 ? "driver too old" : ""; };
  EXPECT_EQ(describe_cuda_error(api, 35), "35 (driver too old)");
  EXPECT_EQ(describe_cuda_error(api, 7), "7");
}

}  // namespace
}  // namespace traceml::timing
