// Telemetry JSONL writer: the exact lines it writes, and read(write(t)) == t.
#include "store/jsonl_writer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "../support/telemetry_compare.hpp"
#include "store/jsonl_reader.hpp"

namespace traceml::store {
namespace {

using model::Event;
using model::Strategy;
using model::Telemetry;
using testing::expect_same;

std::string write(const Telemetry& t) {
  std::ostringstream out;
  write_telemetry_jsonl(t, out);
  return out.str();
}

Telemetry read_back(const std::string& text) {
  const ReadResult r = parse_telemetry_jsonl(text, "written.jsonl");
  EXPECT_TRUE(r.warnings.empty());
  return r.telemetry;
}

// ---------------------------------------------------------------------------
// A run that uses every record type, every optional in both states, and
// doubles whose text is easy to get wrong.

Telemetry rich_telemetry() {
  Telemetry t;
  t.run.run_name = "rich \"run\" \\ r\xc3\xa9sum\xc3\xa9\n\t\x01";
  t.run.world_size = 3;
  t.run.strategy = Strategy::Fsdp;

  model::RankIdentity full;
  full.global_rank = 0;
  full.local_rank = 0;
  full.node_rank = 0;
  full.hostname = "node-0.cluster";
  full.local_world_size = 2;
  full.world_size = 3;
  model::RankIdentity bare;
  bare.global_rank = 2;
  t.ranks = {full, bare};

  const double tricky[] = {0.1,
                           1.0 / 3.0,
                           5e-324,
                           2.2250738585072014e-308,
                           1.7976931348623157e308,
                           9007199254740993.0,  // 2^53 + 1 rounds to 2^53
                           12345678901234567890.0,
                           1e21,
                           1e-7,
                           0.0};
  std::int64_t step = 1;
  for (const double v : tricky) {
    model::StepRecord s;
    s.global_rank = static_cast<int>(step % 3);
    s.step = step;
    s.ts = 1764662400.0 + static_cast<double>(step) * 0.123456789;
    s.events.set(Event::InputWait, {v, std::nullopt});
    s.events.set(Event::H2D, {std::nullopt, v});
    s.events.set(Event::Forward, {v, v * 0.5});
    s.events.set(Event::Backward, {std::nullopt, std::nullopt});  // present, nothing measured
    if (step % 2 == 0) s.events.set(Event::OptimizerStep, {1.5, 1.25});
    s.events.set(Event::TracedStepTime, {12.0, 12.5});
    if (step % 3 == 0) {  // GPU activity on some steps, with tricky values
      model::StepGpuActivity a;
      a.h2d_ms = v;
      a.h2d_bytes = 1.5 * v + 3.0;
      a.h2d_copies = step * 1000000007LL;
      a.h2d_pageable_copies = step;
      a.h2d_pageable_bytes = v;
      a.collective_ms = v * 0.25;
      a.busy_ms = 11.0 + v;
      s.gpu_activity = a;
    }
    t.steps.push_back(s);
    ++step;
  }
  model::StepRecord empty;  // a step with no event measured
  empty.global_rank = 1;
  empty.step = std::numeric_limits<std::int64_t>::max();
  empty.ts = 0.0;
  t.steps.push_back(empty);

  model::StepMemoryRecord m1;
  m1.global_rank = 0;
  m1.step = 1;
  m1.device = "cuda:0";
  m1.peak_allocated_bytes = 2.9e9;
  m1.peak_reserved_bytes = 3.2e9;
  model::StepMemoryRecord m2;
  m2.global_rank = 1;
  m2.step = 2;
  t.step_memory = {m1, m2};

  model::SystemSample with_gpus;
  with_gpus.node_rank = 0;
  with_gpus.ts = 1764662401.5;
  with_gpus.cpu_percent = 20.0;
  with_gpus.ram_used_bytes = 17179869184.0;
  with_gpus.ram_total_bytes = 549755813888.0;
  model::GpuSample g0;
  g0.index = 0;
  g0.util_percent = 80.0;
  g0.mem_used_bytes = 1.6e10;
  g0.mem_total_bytes = 85520809984.0;
  g0.temperature_c = 61.5;
  g0.power_w = 300.25;
  g0.power_limit_w = 700.0;
  model::GpuSample g1;
  g1.index = 1;
  with_gpus.gpus = {g0, g1};
  model::SystemSample no_gpu;
  no_gpu.node_rank = 1;
  no_gpu.ts = 1764662402.0;
  t.system = {with_gpus, no_gpu};

  model::ProcessSample p_gpu;
  p_gpu.global_rank = 0;
  p_gpu.ts = 1764662401.75;
  p_gpu.cpu_percent = 120.0;
  p_gpu.cpu_cores = 8;
  p_gpu.rss_bytes = 3.5e9;
  p_gpu.ram_total_bytes = 549755813888.0;
  p_gpu.gpu = model::ProcessGpu{0, 2e9, 2.5e9, 85520809984.0};
  model::ProcessSample p_partial_gpu;
  p_partial_gpu.global_rank = 1;
  p_partial_gpu.ts = 1764662401.0;
  p_partial_gpu.gpu = model::ProcessGpu{};
  model::ProcessSample p_none;
  p_none.global_rank = 2;
  p_none.ts = 1764662401.0;
  t.process = {p_gpu, p_partial_gpu, p_none};
  return t;
}

// ---------------------------------------------------------------------------
// Exact output.

TEST(JsonlWriterTest, ExactLinesOfEveryRecordType) {
  Telemetry t;
  t.run.run_name = "r1";
  t.run.world_size = 2;
  t.run.strategy = Strategy::Ddp;
  model::RankIdentity rank;
  rank.global_rank = 0;
  rank.local_rank = 0;
  rank.node_rank = 0;
  rank.hostname = "n0";
  rank.local_world_size = 2;
  rank.world_size = 2;
  t.ranks.push_back(rank);
  model::StepRecord s;
  s.global_rank = 0;
  s.step = 1;
  s.ts = 1764662400.5;
  s.events.set(Event::TracedStepTime, {8.5, 9.0});  // set out of order: written in enum order
  s.events.set(Event::InputWait, {1.2, std::nullopt});
  s.events.set(Event::H2D, {0.1, 0.4});
  s.events.set(Event::Forward, {3.0, 3.1});
  t.steps.push_back(s);
  model::StepMemoryRecord m;
  m.global_rank = 0;
  m.step = 1;
  m.device = "cuda:0";
  m.peak_allocated_bytes = 2.9e9;
  m.peak_reserved_bytes = 3221225472.0;
  t.step_memory.push_back(m);
  model::SystemSample sys;
  sys.node_rank = 0;
  sys.ts = 1764662401.0;
  sys.cpu_percent = 20.0;
  sys.ram_used_bytes = 8e9;
  sys.ram_total_bytes = 64e9;
  model::GpuSample g;
  g.index = 0;
  g.util_percent = 80.0;
  g.mem_used_bytes = 1e10;
  g.mem_total_bytes = 8e10;
  sys.gpus.push_back(g);
  t.system.push_back(sys);
  model::ProcessSample p;
  p.global_rank = 0;
  p.ts = 1764662401.0;
  p.cpu_percent = 120.0;
  p.cpu_cores = 8;
  p.rss_bytes = 3e9;
  p.ram_total_bytes = 64e9;
  p.gpu = model::ProcessGpu{0, 2e9, std::nullopt, 8e10};
  t.process.push_back(p);

  // Shortest round-trip text: 2.9e9 is shorter in exponent form, 3221225472 in digits.
  EXPECT_EQ(
      write(t),
      R"({"type":"run","format":"traceml-telemetry","version":2,"run_name":"r1","world_size":2,"strategy":"ddp"})"
      "\n"
      R"({"type":"rank","global_rank":0,"local_rank":0,"node_rank":0,"hostname":"n0","local_world_size":2,"world_size":2})"
      "\n"
      R"({"type":"step","global_rank":0,"step":1,"ts":1764662400.5,"events":{"input_wait":{"cpu_ms":1.2},"h2d":{"cpu_ms":0.1,"gpu_ms":0.4},"forward":{"cpu_ms":3,"gpu_ms":3.1},"traced_step_time":{"cpu_ms":8.5,"gpu_ms":9}}})"
      "\n"
      R"({"type":"step_memory","global_rank":0,"step":1,"device":"cuda:0","peak_allocated_bytes":2.9e+09,"peak_reserved_bytes":3221225472})"
      "\n"
      R"({"type":"system","node_rank":0,"ts":1764662401,"cpu_percent":20,"ram_used_bytes":8e+09,"ram_total_bytes":6.4e+10,"gpus":[{"index":0,"util_percent":80,"mem_used_bytes":1e+10,"mem_total_bytes":8e+10,"temperature_c":null,"power_w":null,"power_limit_w":null}]})"
      "\n"
      R"({"type":"process","global_rank":0,"ts":1764662401,"cpu_percent":120,"cpu_cores":8,"rss_bytes":3e+09,"ram_total_bytes":6.4e+10,"gpu":{"device":0,"allocated_bytes":2e+09,"reserved_bytes":null,"total_bytes":8e+10}})"
      "\n");
}

TEST(JsonlWriterTest, AbsentValuesAreLeftOut) {
  Telemetry t;  // no run name, no world size
  model::RankIdentity rank;
  rank.global_rank = 3;
  t.ranks.push_back(rank);
  model::StepRecord s;
  s.global_rank = 3;
  s.step = 2;
  s.ts = 0.0;
  s.events.set(Event::Backward, {std::nullopt, std::nullopt});
  s.events.set(Event::Forward, {std::nullopt, 4.0});
  t.steps.push_back(s);
  model::StepMemoryRecord m;
  m.global_rank = 3;
  m.step = 2;
  t.step_memory.push_back(m);
  model::SystemSample sys;
  sys.node_rank = 1;
  sys.ts = 2.0;
  t.system.push_back(sys);
  model::ProcessSample p;
  p.global_rank = 3;
  p.ts = 2.0;
  t.process.push_back(p);
  EXPECT_EQ(
      write(t),
      R"({"type":"run","format":"traceml-telemetry","version":2,"run_name":"","strategy":"ddp"})"
      "\n"
      R"({"type":"rank","global_rank":3})"
      "\n"
      R"({"type":"step","global_rank":3,"step":2,"ts":0,"events":{"forward":{"gpu_ms":4},"backward":{}}})"
      "\n"
      R"({"type":"step_memory","global_rank":3,"step":2,"device":""})"
      "\n"
      R"({"type":"system","node_rank":1,"ts":2,"gpus":[]})"
      "\n"
      R"({"type":"process","global_rank":3,"ts":2,"gpu":null})"
      "\n");
}

TEST(JsonlWriterTest, NegativeZeroIsWrittenAsZeroSoTheFileReadsBackTheSame) {
  // Found by fuzz_jsonl: -0.0 was written "-0", which reads back as 0, so a
  // second write differed from the first.
  Telemetry t;
  model::StepRecord s;
  s.global_rank = 0;
  s.step = 1;
  s.ts = 1.0;
  s.events.set(Event::TracedStepTime, {11.2, -0.0});
  t.steps.push_back(s);
  const std::string once = write(t);
  EXPECT_NE(once.find(R"("traced_step_time":{"cpu_ms":11.2,"gpu_ms":0})"), std::string::npos)
      << once;
  EXPECT_EQ(write(traceml::store::parse_telemetry_jsonl(once, "once.jsonl").telemetry), once);
}

TEST(JsonlWriterTest, BeginsBesideTheirClocksAndTheThreadAfterTheEvents) {
  model::Telemetry t;
  model::StepRecord s;
  s.step = 1;
  s.ts = 2.0;
  s.thread = 3;
  s.events.set(Event::InputWait, {1.5, std::nullopt});
  s.events.set_begin(Event::InputWait, -1.75);
  s.events.set(Event::Forward, {3.0, 3.5});
  s.events.set_begin(Event::Forward, 0.25);
  s.events.set(Event::TracedStepTime, {9.0, std::nullopt});
  t.steps.push_back(s);
  s.step = 2;
  s.thread = 0;  // thread 0 and steps without begins are written as in format 1
  s.events = {};
  s.events.set(Event::Forward, {3.0, std::nullopt});
  t.steps.push_back(s);
  EXPECT_EQ(
      write(t),
      R"({"type":"run","format":"traceml-telemetry","version":2,"run_name":"","strategy":"ddp"})"
      "\n"
      R"({"type":"step","global_rank":0,"step":1,"ts":2,"events":{"input_wait":{"cpu_ms":1.5,"begin_ms":-1.75},"forward":{"cpu_ms":3,"gpu_ms":3.5,"begin_ms":0.25},"traced_step_time":{"cpu_ms":9}},"thread":3})"
      "\n"
      R"({"type":"step","global_rank":0,"step":2,"ts":2,"events":{"forward":{"cpu_ms":3}}})"
      "\n");
  // And they read back.
  const auto back = parse_telemetry_jsonl(write(t), "t.jsonl");
  ASSERT_EQ(back.telemetry.steps.size(), 2u);
  EXPECT_EQ(back.telemetry.steps[0].thread, 3);
  EXPECT_EQ(back.telemetry.steps[0].events.begin_ms(Event::InputWait), -1.75);
  EXPECT_EQ(back.telemetry.steps[0].events.begin_ms(Event::Forward), 0.25);
}

TEST(JsonlWriterTest, GpuActivityObjectAfterTheEvents) {
  Telemetry t;
  model::StepRecord s;
  s.global_rank = 0;
  s.step = 1;
  s.ts = 2.0;
  s.events.set(Event::H2D, {std::nullopt, 1.5});  // GPU only: caught from CUPTI, no phase marked
  model::StepGpuActivity a;
  a.h2d_ms = 1.5;
  a.h2d_bytes = 1.28e8;
  a.h2d_copies = 4;
  a.h2d_pageable_copies = 3;
  a.h2d_pageable_bytes = 9.6e7;
  a.collective_ms = 7.25;
  a.busy_ms = 40.0;
  s.gpu_activity = a;
  t.steps.push_back(s);
  model::StepRecord idle = s;  // a step that launched nothing: all zeros, not absent
  idle.step = 2;
  idle.gpu_activity = model::StepGpuActivity{};
  t.steps.push_back(idle);
  const std::string text = write(t);
  EXPECT_EQ(
      text,
      R"({"type":"run","format":"traceml-telemetry","version":2,"run_name":"","strategy":"ddp"})"
      "\n"
      R"({"type":"step","global_rank":0,"step":1,"ts":2,"events":{"h2d":{"gpu_ms":1.5}},"gpu_activity":{"h2d_ms":1.5,"h2d_bytes":1.28e+08,"h2d_copies":4,"h2d_pageable_copies":3,"h2d_pageable_bytes":9.6e+07,"collective_ms":7.25,"busy_ms":40}})"
      "\n"
      R"({"type":"step","global_rank":0,"step":2,"ts":2,"events":{"h2d":{"gpu_ms":1.5}},"gpu_activity":{"h2d_ms":0,"h2d_bytes":0,"h2d_copies":0,"h2d_pageable_copies":0,"h2d_pageable_bytes":0,"collective_ms":0,"busy_ms":0}})"
      "\n");
  const Telemetry back = read_back(text);
  expect_same(t, back);
  EXPECT_FALSE(back.steps[0].events.cpu_ms(Event::H2D).has_value());
  EXPECT_EQ(back.steps[0].events.gpu_ms(Event::H2D), 1.5);
}

TEST(JsonlWriterTest, StringsAreEscaped) {
  Telemetry t;
  t.run.run_name = "a\"b\\c\nd\re\tf\x01g\x1fh\xc3\xa9";
  EXPECT_EQ(write(t),
            "{\"type\":\"run\",\"format\":\"traceml-telemetry\",\"version\":2,\"run_name\":"
            "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001g\\u001fh\xc3\xa9\",\"strategy\":\"ddp\"}\n");
}

TEST(JsonlWriterTest, EveryStrategyWord) {
  const std::pair<Strategy, const char*> cases[] = {
      {Strategy::Ddp, "ddp"},
      {Strategy::Fsdp, "fsdp"},
      {Strategy::SingleProcess, "single_process"},
      {Strategy::DistributedUnknown, "distributed_unknown"},
      {Strategy::Unknown, "unknown"},
  };
  for (const auto& [strategy, word] : cases) {
    Telemetry t;
    t.run.strategy = strategy;
    const std::string text = write(t);
    EXPECT_NE(text.find(std::string("\"strategy\":\"") + word + "\""), std::string::npos) << text;
    EXPECT_EQ(read_back(text).run.strategy, strategy) << word;
  }
}

// ---------------------------------------------------------------------------
// Round trips.

TEST(JsonlWriterTest, RoundTripOfARichTelemetry) {
  const Telemetry t = rich_telemetry();
  const std::string text = write(t);
  const Telemetry back = read_back(text);
  expect_same(t, back);
  // And the text is stable: writing what was read gives the same bytes.
  EXPECT_EQ(write(back), text);
}

TEST(JsonlWriterTest, RoundTripOfAnEmptyRun) {
  const Telemetry t;
  const std::string text = write(t);
  EXPECT_EQ(
      text,
      R"({"type":"run","format":"traceml-telemetry","version":2,"run_name":"","strategy":"ddp"})"
      "\n");
  expect_same(t, read_back(text));
}

TEST(JsonlWriterTest, RoundTripOfTheSampleFiles) {
  for (const char* name :
       {"single_input_bound.jsonl", "ddp_input_straggler.jsonl", "ddp4_balanced.jsonl"}) {
    SCOPED_TRACE(name);
    const Telemetry t =
        read_telemetry_jsonl(std::string(TRACEML_TEST_DATA_DIR) + "/golden/data/" + name).telemetry;
    ASSERT_FALSE(t.steps.empty());
    expect_same(t, read_back(write(t)));
  }
}

TEST(JsonlWriterTest, NegativeZeroReadsBackAsZero) {
  Telemetry t;
  model::StepRecord s;
  s.step = 1;
  s.ts = -0.0;  // not negative: accepted, written "0" (see below), read back as 0
  t.steps.push_back(s);
  const std::string text = write(t);
  EXPECT_NE(text.find("\"ts\":0,"), std::string::npos) << text;
  EXPECT_EQ(read_back(text).steps[0].ts, 0.0);
}

// ---------------------------------------------------------------------------
// What the reader would reject is refused before anything is written.

/// The what() of the std::invalid_argument that writing `t` throws; the stream
/// must stay empty.
std::string rejection_of(const Telemetry& t) {
  std::ostringstream out;
  try {
    write_telemetry_jsonl(t, out);
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(out.str(), "");
    return e.what();
  }
  return "";
}

// The writer refuses what the readers refuse, in the readers' words
// (model/record_checks): a file it writes always reads back.
TEST(JsonlWriterTest, RejectsValuesTheReaderWouldRefuse) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const auto rejected = [](auto change) {
    Telemetry t = rich_telemetry();
    change(t);
    return rejection_of(t);
  };
  const std::string w = "write_telemetry_jsonl: ";
  // steps[3] is step 4 of rank 4 % 3 = 1.
  EXPECT_EQ(
      rejected([](Telemetry& t) {
        t.steps.edit(3, [](model::StepRecord& r) { r.events.set(Event::Forward, {-1.5, {}}); });
      }),
      w + "step 4 of rank 1: 'events.forward.cpu_ms' must be a finite number >= 0, got -1.5");
  EXPECT_EQ(rejected([&](Telemetry& t) {
              t.steps.edit(0, [&](model::StepRecord& r) { r.events.set(Event::H2D, {{}, nan}); });
            }),
            w + "step 1 of rank 1: 'events.h2d.gpu_ms' must be a finite number >= 0, got nan");
  EXPECT_EQ(
      rejected([&](Telemetry& t) { t.steps.edit(0, [&](model::StepRecord& r) { r.ts = inf; }); }),
      w + "step 1 of rank 1: 'ts' must be a finite number >= 0, got inf");
  EXPECT_EQ(
      rejected([](Telemetry& t) { t.steps.edit(0, [](model::StepRecord& r) { r.step = 0; }); }),
      w + "step 0 of rank 1: 'step' must be an integer >= 1, got 0");
  // steps[2] is step 3 of rank 0.
  EXPECT_EQ(rejected([](Telemetry& t) {
              t.steps.edit(2, [](model::StepRecord& r) { r.gpu_activity->busy_ms = -2.0; });
            }),
            w + "step 3 of rank 0: 'gpu_activity.busy_ms' must be a finite number >= 0, got -2");
  EXPECT_EQ(rejected([](Telemetry& t) {
              t.steps.edit(2, [](model::StepRecord& r) { r.gpu_activity->h2d_copies = -1; });
            }),
            w + "step 3 of rank 0: 'gpu_activity.h2d_copies' must be an integer >= 0, got -1");
  EXPECT_EQ(rejected([](Telemetry& t) {
              t.steps.edit(2, [](model::StepRecord& r) {
                r.gpu_activity->h2d_pageable_copies = 3000000022;
              });
            }),
            w + "step 3 of rank 0: 'gpu_activity.h2d_pageable_copies' (3000000022) must not exceed "
                "'gpu_activity.h2d_copies' (3000000021)");
  EXPECT_NE(rejected([](Telemetry& t) {
              t.steps.edit(2,
                           [](model::StepRecord& r) { r.gpu_activity->h2d_pageable_bytes = 1e9; });
            }).find("'gpu_activity.h2d_pageable_bytes' (1e+09) must not exceed"),
            std::string::npos);
  EXPECT_EQ(rejected([](Telemetry& t) { t.ranks[1].global_rank = -1; }),
            w + "rank line of global_rank -1: 'global_rank' must be an integer >= 0, got -1");
  EXPECT_EQ(rejected([](Telemetry& t) { t.run.world_size = 0; }),
            w + "run: 'world_size' must be an integer >= 1, got 0");
  EXPECT_EQ(rejected([](Telemetry& t) { t.step_memory[0].peak_reserved_bytes = -1.0; }),
            w + "step_memory of step 1 of rank 0: 'peak_reserved_bytes' must be a finite number "
                ">= 0, got -1");
  EXPECT_EQ(rejected([&](Telemetry& t) { t.system[0].gpus[1].util_percent = -inf; }),
            w + "system sample of node 0: 'gpus[1].util_percent' must be a finite number >= 0, "
                "got -inf");
  EXPECT_EQ(rejected([](Telemetry& t) { t.process[0].cpu_cores = 0; }),
            w + "process sample of rank 0: 'cpu_cores' must be an integer >= 1, got 0");
  EXPECT_EQ(rejected([&](Telemetry& t) { t.process[0].gpu->reserved_bytes = nan; }),
            w + "process sample of rank 0: 'gpu.reserved_bytes' must be a finite number >= 0, "
                "got nan");
}

// A GPU below 0 °C is possible: the collector stores it, so export must write
// it and the reader read it back (the writer used to refuse it, and `traceml
// export` failed on a run the collector had stored).
TEST(JsonlWriterTest, BelowZeroTemperatureRoundTrips) {
  Telemetry t = rich_telemetry();
  t.system[0].gpus[1].temperature_c = -4.5;
  std::ostringstream out;
  write_telemetry_jsonl(t, out);
  EXPECT_NE(out.str().find("\"temperature_c\":-4.5"), std::string::npos);
  std::istringstream in(out.str());
  const ReadResult back = read_telemetry_jsonl(in, "t.jsonl");
  EXPECT_EQ(back.telemetry.system[0].gpus[1].temperature_c, -4.5);
}

TEST(JsonlWriterTest, StreamFailureIsReported) {
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  EXPECT_THROW(write_telemetry_jsonl(rich_telemetry(), out), std::ios_base::failure);
}

}  // namespace
}  // namespace traceml::store
