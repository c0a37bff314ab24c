// Field-by-field gtest equality of the model types (absent stays distinct from
// 0), with a message naming the record and field that differ. Shared by the
// run database and collector tests, which both check "read back == written".
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "model/telemetry.hpp"

namespace traceml::testing {

#define TRACEML_EXPECT_FIELD(a, b, field) EXPECT_EQ((a).field, (b).field) << where << " ." #field

inline void expect_same(const model::StepEvents& a, const model::StepEvents& b,
                        const std::string& where) {
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    const auto e = static_cast<model::Event>(i);
    EXPECT_EQ(a.has(e), b.has(e)) << where << " " << model::event_name(e);
    EXPECT_EQ(a.cpu_ms(e), b.cpu_ms(e)) << where << " " << model::event_name(e);
    EXPECT_EQ(a.gpu_ms(e), b.gpu_ms(e)) << where << " " << model::event_name(e);
  }
}

inline void expect_same(const std::optional<model::StepGpuActivity>& a,
                        const std::optional<model::StepGpuActivity>& b, const std::string& where) {
  ASSERT_EQ(a.has_value(), b.has_value()) << where << " .gpu_activity";
  if (!a) return;
  TRACEML_EXPECT_FIELD(*a, *b, h2d_ms);
  TRACEML_EXPECT_FIELD(*a, *b, h2d_bytes);
  TRACEML_EXPECT_FIELD(*a, *b, h2d_copies);
  TRACEML_EXPECT_FIELD(*a, *b, h2d_pageable_copies);
  TRACEML_EXPECT_FIELD(*a, *b, h2d_pageable_bytes);
  TRACEML_EXPECT_FIELD(*a, *b, collective_ms);
  TRACEML_EXPECT_FIELD(*a, *b, busy_ms);
}

inline void expect_same(const model::StepRecord& a, const model::StepRecord& b,
                        const std::string& where) {
  TRACEML_EXPECT_FIELD(a, b, global_rank);
  TRACEML_EXPECT_FIELD(a, b, step);
  TRACEML_EXPECT_FIELD(a, b, ts);
  expect_same(a.events, b.events, where);
  expect_same(a.gpu_activity, b.gpu_activity, where);
}

inline void expect_same(const model::RankIdentity& a, const model::RankIdentity& b,
                        const std::string& where) {
  TRACEML_EXPECT_FIELD(a, b, global_rank);
  TRACEML_EXPECT_FIELD(a, b, local_rank);
  TRACEML_EXPECT_FIELD(a, b, node_rank);
  TRACEML_EXPECT_FIELD(a, b, hostname);
  TRACEML_EXPECT_FIELD(a, b, local_world_size);
  TRACEML_EXPECT_FIELD(a, b, world_size);
}

inline void expect_same(const model::StepMemoryRecord& a, const model::StepMemoryRecord& b,
                        const std::string& where) {
  TRACEML_EXPECT_FIELD(a, b, global_rank);
  TRACEML_EXPECT_FIELD(a, b, step);
  TRACEML_EXPECT_FIELD(a, b, device);
  TRACEML_EXPECT_FIELD(a, b, peak_allocated_bytes);
  TRACEML_EXPECT_FIELD(a, b, peak_reserved_bytes);
}

inline void expect_same(const model::SystemSample& a, const model::SystemSample& b,
                        const std::string& where) {
  TRACEML_EXPECT_FIELD(a, b, node_rank);
  TRACEML_EXPECT_FIELD(a, b, ts);
  TRACEML_EXPECT_FIELD(a, b, cpu_percent);
  TRACEML_EXPECT_FIELD(a, b, ram_used_bytes);
  TRACEML_EXPECT_FIELD(a, b, ram_total_bytes);
  ASSERT_EQ(a.gpus.size(), b.gpus.size()) << where;
  for (std::size_t g = 0; g < a.gpus.size(); ++g) {
    const auto& x = a.gpus[g];
    const auto& y = b.gpus[g];
    TRACEML_EXPECT_FIELD(x, y, index);
    TRACEML_EXPECT_FIELD(x, y, util_percent);
    TRACEML_EXPECT_FIELD(x, y, mem_used_bytes);
    TRACEML_EXPECT_FIELD(x, y, mem_total_bytes);
    TRACEML_EXPECT_FIELD(x, y, temperature_c);
    TRACEML_EXPECT_FIELD(x, y, power_w);
    TRACEML_EXPECT_FIELD(x, y, power_limit_w);
  }
}

inline void expect_same(const model::ProcessSample& a, const model::ProcessSample& b,
                        const std::string& where) {
  TRACEML_EXPECT_FIELD(a, b, global_rank);
  TRACEML_EXPECT_FIELD(a, b, ts);
  TRACEML_EXPECT_FIELD(a, b, cpu_percent);
  TRACEML_EXPECT_FIELD(a, b, cpu_cores);
  TRACEML_EXPECT_FIELD(a, b, rss_bytes);
  TRACEML_EXPECT_FIELD(a, b, ram_total_bytes);
  ASSERT_EQ(a.gpu.has_value(), b.gpu.has_value()) << where;
  if (a.gpu) {
    TRACEML_EXPECT_FIELD(*a.gpu, *b.gpu, device);
    TRACEML_EXPECT_FIELD(*a.gpu, *b.gpu, allocated_bytes);
    TRACEML_EXPECT_FIELD(*a.gpu, *b.gpu, reserved_bytes);
    TRACEML_EXPECT_FIELD(*a.gpu, *b.gpu, total_bytes);
  }
}

inline void expect_same(const model::TracerStats& a, const model::TracerStats& b,
                        const std::string& where) {
  TRACEML_EXPECT_FIELD(a, b, global_rank);
  TRACEML_EXPECT_FIELD(a, b, pid);
  TRACEML_EXPECT_FIELD(a, b, strategy);
  TRACEML_EXPECT_FIELD(a, b, steps_recorded);
  TRACEML_EXPECT_FIELD(a, b, records_sent);
  TRACEML_EXPECT_FIELD(a, b, records_dropped);
  TRACEML_EXPECT_FIELD(a, b, overhead_ns_per_step);
  ASSERT_EQ(a.gpu.has_value(), b.gpu.has_value()) << where;
  if (a.gpu) {
    EXPECT_EQ(a.gpu->device, b.gpu->device) << where;
    EXPECT_EQ(a.gpu->steps_resolved, b.gpu->steps_resolved) << where;
    EXPECT_EQ(a.gpu->steps_unresolved, b.gpu->steps_unresolved) << where;
    EXPECT_EQ(a.gpu->scopes_skipped, b.gpu->scopes_skipped) << where;
  }
  TRACEML_EXPECT_FIELD(a, b, activity_lost);
}

/// Every element of two record lists, in order.
template <typename T>
void expect_same_list(const std::vector<T>& a, const std::vector<T>& b, const std::string& name) {
  ASSERT_EQ(a.size(), b.size()) << name;
  for (std::size_t i = 0; i < a.size(); ++i)
    expect_same(a[i], b[i], name + "[" + std::to_string(i) + "]");
}

/// Two whole telemetries: run info, then every record list in order.
inline void expect_same(const model::Telemetry& a, const model::Telemetry& b) {
  {
    const std::string where = "run";
    TRACEML_EXPECT_FIELD(a.run, b.run, run_name);
    TRACEML_EXPECT_FIELD(a.run, b.run, world_size);
    TRACEML_EXPECT_FIELD(a.run, b.run, strategy);
  }
  expect_same_list(a.ranks, b.ranks, "ranks");
  expect_same_list(a.steps, b.steps, "steps");
  expect_same_list(a.step_memory, b.step_memory, "step_memory");
  expect_same_list(a.system, b.system, "system");
  expect_same_list(a.process, b.process, "process");
}

#undef TRACEML_EXPECT_FIELD

}  // namespace traceml::testing
