// traceml/hooks.hpp stands on its own: a framework adapter includes it first,
// without traceml.hpp, and gets the whole hook interface.
#include <traceml/hooks.hpp>

#include <gtest/gtest.h>

#include <type_traits>

namespace {

bool read_nothing(traceml::detail::GpuMemoryReading* /*out*/, bool /*reset_peaks*/) noexcept {
  return false;
}
void* no_stream(int /*device*/) noexcept {
  return nullptr;
}

TEST(HooksHeader, DeclaresTheHookInterface) {
  static_assert(std::is_same_v<traceml::detail::GpuMemoryReader, decltype(&read_nothing)>);
  static_assert(std::is_same_v<traceml::detail::CurrentCudaStream, decltype(&no_stream)>);
  // Called through the hook types, as the runtime calls them.
  const traceml::detail::GpuMemoryReader reader = &read_nothing;
  const traceml::detail::CurrentCudaStream stream = &no_stream;
  EXPECT_FALSE(reader(nullptr, false));
  EXPECT_EQ(stream(0), nullptr);
  const traceml::detail::GpuMemoryReading reading;
  EXPECT_EQ(reading.total_bytes, 0.0);  // 0 is "unknown", as documented
  // Installing no hooks is allowed before init() and does nothing.
  traceml::detail::set_gpu_hooks(nullptr, nullptr);
}

}  // namespace
