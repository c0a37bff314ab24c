// The GPU clock's pipeline on the real CUDA runtime, where this machine has a
// GPU (skipped elsewhere, saying why): pooled events recorded on the default
// stream, resolved by non-blocking queries only.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "timing/cuda_api.hpp"
#include "timing/event_pool.hpp"
#include "timing/gpu_step.hpp"
#include "timing/gpu_step_builder.hpp"
#include "timing/gpu_step_resolver.hpp"

namespace traceml::timing {
namespace {

using model::Event;
using SteadyClock = std::chrono::steady_clock;

TEST(RealCuda, AnIdleGpuSeesTheHostWaitAsGpuTime) {
  const CudaApiLoad cuda = load_cuda_api();
  if (!cuda.api) GTEST_SKIP() << "no GPU here: " << cuda.reason;
  const CudaApi& api = *cuda.api;
  EventPool pool(api, 64);
  GpuStepBuilder builder(api, pool);
  GpuStepResolver resolver(api, pool);

  // A fetch that keeps the host busy while the stream is empty: the GPU idles
  // between the two events, which is what input wait on the GPU clock counts
  // (gpu_step.hpp). Then a step with an empty forward phase.
  builder.scope_begin(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  builder.scope_end(Event::InputWait, 1);
  builder.scope_begin(2);
  builder.scope_begin(3);
  builder.scope_end(Event::Forward, 3);
  builder.scope_end(Event::TracedStepTime, 2);
  EXPECT_EQ(builder.skipped_scopes(), 0);
  ASSERT_TRUE(resolver.submit(1, builder.finish_step(), SteadyClock::now()));

  std::vector<GpuStepTimes> out;
  const auto give_up = SteadyClock::now() + std::chrono::seconds(30);
  while (out.empty() && SteadyClock::now() < give_up) {
    resolver.poll(SteadyClock::now(), out);
    if (out.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(out.size(), 1u);
  const GpuStepTimes& t = out[0];
  EXPECT_EQ(t.outcome, GpuOutcome::Resolved);
  ASSERT_TRUE(t.gpu_ms[std::size_t(Event::InputWait)]);
  ASSERT_TRUE(t.gpu_ms[std::size_t(Event::Forward)]);
  ASSERT_TRUE(t.gpu_ms[std::size_t(Event::TracedStepTime)]);
  // Generous bounds: the events are stamped when the GPU reaches them, which
  // on an idle stream is within well under the 50 ms the host slept.
  EXPECT_GT(*t.gpu_ms[std::size_t(Event::InputWait)], 25.0);
  EXPECT_LT(*t.gpu_ms[std::size_t(Event::InputWait)], 10000.0);
  EXPECT_GE(*t.gpu_ms[std::size_t(Event::Forward)], 0.0);
  EXPECT_LT(*t.gpu_ms[std::size_t(Event::TracedStepTime)], 1000.0);
  EXPECT_EQ(t.gpu_ms[std::size_t(Event::H2D)], 0.0);
  EXPECT_EQ(pool.created(), 6u);
}

}  // namespace
}  // namespace traceml::timing
