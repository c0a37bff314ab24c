// Telemetry JSONL reader: every record type into exact values, every error with
// its exact "FILE:LINE: ..." message, warnings, and the sample files.
#include "store/jsonl_reader.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace traceml::store {
namespace {

using model::Event;
using model::Strategy;

const std::string kRun =
    R"({"type":"run","format":"traceml-telemetry","version":1,"run_name":"r1","world_size":2,"strategy":"ddp"})";

ReadResult parse(const std::string& text, const std::string& name = "t.jsonl") {
  return parse_telemetry_jsonl(text, name);
}

/// The what() of the TelemetryError that parsing `text` throws ("" if none).
std::string error_of(const std::string& text, const std::string& name = "t.jsonl") {
  try {
    parse(text, name);
  } catch (const TelemetryError& e) {
    return e.what();
  }
  return "";
}

/// The header, then `line` as line 2.
std::string with_run(const std::string& line) {
  return kRun + "\n" + line + "\n";
}

const std::string kStep =
    R"({"type":"step","global_rank":0,"step":1,"ts":1764662400.5,"events":{"forward":{"cpu_ms":3.0,"gpu_ms":3.1}}})";

// ---------------------------------------------------------------------------
// Records into exact values.

TEST(JsonlReaderTest, RunHeaderFields) {
  const ReadResult r = parse(kRun + "\n");
  EXPECT_EQ(r.telemetry.run.run_name, "r1");
  EXPECT_EQ(r.telemetry.run.world_size, 2);
  EXPECT_EQ(r.telemetry.run.strategy, Strategy::Ddp);
  EXPECT_TRUE(r.telemetry.ranks.empty());
  EXPECT_TRUE(r.telemetry.steps.empty());
  EXPECT_TRUE(r.warnings.empty());
}

TEST(JsonlReaderTest, RunHeaderOptionalFieldsAbsentOrNull) {
  const ReadResult absent = parse(R"({"type":"run","format":"traceml-telemetry","version":1})");
  EXPECT_EQ(absent.telemetry.run.run_name, "");
  EXPECT_EQ(absent.telemetry.run.world_size, std::nullopt);
  EXPECT_EQ(absent.telemetry.run.strategy, Strategy::Ddp);  // no strategy: ddp (spec §4.1.1)
  const ReadResult nulls = parse(
      R"({"type":"run","format":"traceml-telemetry","version":1,"run_name":null,"world_size":null,"strategy":null})");
  EXPECT_EQ(nulls.telemetry.run.run_name, "");
  EXPECT_EQ(nulls.telemetry.run.world_size, std::nullopt);
  EXPECT_EQ(nulls.telemetry.run.strategy, Strategy::Ddp);
}

TEST(JsonlReaderTest, StrategyUsesTraceMLWords) {
  const std::pair<const char*, Strategy> cases[] = {
      {"ddp", Strategy::Ddp},
      {"fsdp", Strategy::Fsdp},
      {"single_process", Strategy::SingleProcess},
      {"distributed_unknown", Strategy::DistributedUnknown},
      {"unknown", Strategy::Unknown},
      {" FSDP ", Strategy::Fsdp},  // trimmed and lower-cased
      {"horovod", Strategy::Ddp},  // anything else counts as ddp (spec §4.1.1)
      {"", Strategy::Ddp},
  };
  for (const auto& [word, expected] : cases) {
    const ReadResult r = parse(
        std::string(R"({"type":"run","format":"traceml-telemetry","version":1,"strategy":")") +
        word + "\"}\n");
    EXPECT_EQ(r.telemetry.run.strategy, expected) << word;
  }
}

TEST(JsonlReaderTest, RankLineAllFields) {
  const ReadResult r = parse(with_run(
      R"({"type":"rank","global_rank":3,"local_rank":1,"node_rank":1,"hostname":"n1","local_world_size":2,"world_size":4})"));
  ASSERT_EQ(r.telemetry.ranks.size(), 1u);
  const auto& k = r.telemetry.ranks[0];
  EXPECT_EQ(k.global_rank, 3);
  EXPECT_EQ(k.local_rank, 1);
  EXPECT_EQ(k.node_rank, 1);
  EXPECT_EQ(k.hostname, "n1");
  EXPECT_EQ(k.local_world_size, 2);
  EXPECT_EQ(k.world_size, 4);
}

TEST(JsonlReaderTest, RankLineOptionalFieldsAbsentOrNull) {
  const ReadResult r = parse(
      with_run(R"({"type":"rank","global_rank":0})") +
      R"({"type":"rank","global_rank":1,"local_rank":null,"node_rank":null,"hostname":null,"local_world_size":null,"world_size":null})");
  ASSERT_EQ(r.telemetry.ranks.size(), 2u);
  for (const auto& k : r.telemetry.ranks) {
    EXPECT_EQ(k.local_rank, std::nullopt);
    EXPECT_EQ(k.node_rank, std::nullopt);
    EXPECT_EQ(k.hostname, std::nullopt);
    EXPECT_EQ(k.local_world_size, std::nullopt);
    EXPECT_EQ(k.world_size, std::nullopt);
  }
  EXPECT_EQ(r.telemetry.ranks[1].global_rank, 1);
}

TEST(JsonlReaderTest, StepLineEveryEvent) {
  const ReadResult r = parse(with_run(
      R"({"type":"step","global_rank":1,"step":7,"ts":1764662400.5,"events":{"input_wait":{"cpu_ms":1.2},"h2d":{"cpu_ms":0.1,"gpu_ms":0.4},"forward":{"cpu_ms":3.0,"gpu_ms":3.1},"backward":{"cpu_ms":6,"gpu_ms":6.5},"optimizer_step":{"cpu_ms":1.5,"gpu_ms":1.25},"traced_step_time":{"cpu_ms":12.0,"gpu_ms":12.5}}})"));
  ASSERT_EQ(r.telemetry.steps.size(), 1u);
  const auto& s = r.telemetry.steps[0];
  EXPECT_EQ(s.global_rank, 1);
  EXPECT_EQ(s.step, 7);
  EXPECT_EQ(s.ts, 1764662400.5);
  EXPECT_EQ(s.events.cpu_ms(Event::InputWait), 1.2);
  EXPECT_EQ(s.events.gpu_ms(Event::InputWait), std::nullopt);  // gpu_ms absent: no GPU timing
  EXPECT_EQ(s.events.cpu_ms(Event::H2D), 0.1);
  EXPECT_EQ(s.events.gpu_ms(Event::H2D), 0.4);
  EXPECT_EQ(s.events.cpu_ms(Event::Forward), 3.0);
  EXPECT_EQ(s.events.gpu_ms(Event::Forward), 3.1);
  EXPECT_EQ(s.events.cpu_ms(Event::Backward), 6.0);  // a JSON integer reads as a double
  EXPECT_EQ(s.events.gpu_ms(Event::Backward), 6.5);
  EXPECT_EQ(s.events.cpu_ms(Event::OptimizerStep), 1.5);
  EXPECT_EQ(s.events.gpu_ms(Event::OptimizerStep), 1.25);
  EXPECT_EQ(s.events.cpu_ms(Event::TracedStepTime), 12.0);
  EXPECT_EQ(s.events.gpu_ms(Event::TracedStepTime), 12.5);
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    EXPECT_TRUE(s.events.has(static_cast<Event>(i))) << i;
  }
}

TEST(JsonlReaderTest, StepBeginsAndThreadOfFormatTwo) {
  const std::string run2 =
      R"({"type":"run","format":"traceml-telemetry","version":2,"run_name":"r1"})";
  const ReadResult r = parse(
      run2 + "\n" +
      R"({"type":"step","global_rank":0,"step":3,"ts":1764662400.5,"thread":2,"events":{"input_wait":{"cpu_ms":1.5,"begin_ms":-1.75},"forward":{"cpu_ms":3.0,"gpu_ms":3.1,"begin_ms":0.5},"backward":{"cpu_ms":4,"begin_ms":null},"traced_step_time":{"cpu_ms":9}}})"
      "\n");
  ASSERT_EQ(r.telemetry.steps.size(), 1u);
  const auto s = r.telemetry.steps[0];
  EXPECT_EQ(s.thread, 2);
  EXPECT_EQ(s.events.begin_ms(Event::InputWait), -1.75);  // fetched before the step began
  EXPECT_EQ(s.events.begin_ms(Event::Forward), 0.5);
  EXPECT_EQ(s.events.begin_ms(Event::Backward), std::nullopt);  // null: not recorded
  EXPECT_EQ(s.events.begin_mask(), (1u << 0) | (1u << 2));
  // A format 1 file (no begins, no thread) reads as before.
  const ReadResult old = parse(with_run(kStep));
  EXPECT_EQ(old.telemetry.steps[0].events.begin_mask(), 0u);
  EXPECT_EQ(old.telemetry.steps[0].thread, 0);
}

TEST(JsonlReaderErrorTest, BeginsAndThreadOutOfRange) {
  const auto step = [](const std::string& rest) {
    return error_of(
        with_run(R"({"type":"step","global_rank":0,"step":1,"ts":1764662400.5,)" + rest + "}"));
  };
  EXPECT_EQ(step(R"("events":{"forward":{"gpu_ms":3.0,"begin_ms":0.5}})"),
            "t.jsonl:2: 'events.forward.begin_ms' needs a 'cpu_ms' beside it (a CPU-clock begin)");
  EXPECT_EQ(step(R"("events":{"traced_step_time":{"cpu_ms":3.0,"begin_ms":0}})"),
            "t.jsonl:2: 'events.traced_step_time.begin_ms' must be absent: the traced step begins "
            "at 0 by definition");
  EXPECT_EQ(step(R"("events":{"forward":{"cpu_ms":3.0,"begin_ms":-2e9}})"),
            "t.jsonl:2: 'events.forward.begin_ms' must be a finite number of ms between -1e+09 "
            "and 1e+09, got -2e+09");
  EXPECT_EQ(step(R"("events":{"forward":{"cpu_ms":3.0,"begin_ms":"0.5"}})"),
            "t.jsonl:2: 'events.forward.begin_ms' must be a finite number, got \"0.5\"");
  EXPECT_EQ(step(R"("thread":65536,"events":{})"),
            "t.jsonl:2: 'thread' must be an integer between 0 and 65535, got 65536");
  EXPECT_EQ(step(R"("thread":-1,"events":{})"),
            "t.jsonl:2: 'thread' must be an integer between 0 and 65535, got -1");
}

TEST(JsonlReaderTest, StepAbsentEventsNullClocksAndEmptyTimings) {
  const ReadResult r = parse(with_run(
      R"({"type":"step","global_rank":0,"step":2,"ts":0,"events":{"h2d":{"cpu_ms":0.5,"gpu_ms":null},"forward":null,"backward":{},"optimizer_step":{"gpu_ms":2.0,"cpu_ms":null}}})"));
  ASSERT_EQ(r.telemetry.steps.size(), 1u);
  const auto& e = r.telemetry.steps[0].events;
  EXPECT_FALSE(e.has(Event::InputWait));  // absent: not measured
  EXPECT_FALSE(e.has(Event::Forward));    // null: same as absent
  EXPECT_FALSE(e.has(Event::TracedStepTime));
  EXPECT_TRUE(e.has(Event::H2D));
  EXPECT_EQ(e.cpu_ms(Event::H2D), 0.5);
  EXPECT_EQ(e.gpu_ms(Event::H2D), std::nullopt);  // explicit null: no GPU timing
  EXPECT_TRUE(e.has(Event::Backward));            // present, but neither clock measured
  EXPECT_EQ(e.cpu_ms(Event::Backward), std::nullopt);
  EXPECT_EQ(e.gpu_ms(Event::Backward), std::nullopt);
  EXPECT_EQ(e.cpu_ms(Event::OptimizerStep), std::nullopt);
  EXPECT_EQ(e.gpu_ms(Event::OptimizerStep), 2.0);
  EXPECT_EQ(r.telemetry.steps[0].ts, 0.0);
}

TEST(JsonlReaderTest, StepWithEmptyEventsAndIntegralFloatStep) {
  // 2.0 and 3e0 are integers written as floats: accepted as step ids 2 and 3.
  const ReadResult r =
      parse(with_run(R"({"type":"step","global_rank":0,"step":2.0,"ts":1,"events":{}})") +
            R"({"type":"step","global_rank":1.0,"step":3e0,"ts":1,"events":{}})");
  ASSERT_EQ(r.telemetry.steps.size(), 2u);
  EXPECT_EQ(r.telemetry.steps[0].step, 2);
  EXPECT_EQ(r.telemetry.steps[1].step, 3);
  EXPECT_EQ(r.telemetry.steps[1].global_rank, 1);
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    EXPECT_FALSE(r.telemetry.steps[0].events.has(static_cast<Event>(i)));
  }
}

TEST(JsonlReaderTest, StepGpuActivityObject) {
  const std::string activity =
      R"("gpu_activity":{"h2d_ms":1.5,"h2d_bytes":1.28e8,"h2d_copies":4,"h2d_pageable_copies":3.0,)"
      R"("h2d_pageable_bytes":9.6e7,"collective_ms":7.25,"busy_ms":40})";
  const ReadResult r = parse(
      with_run(
          R"({"type":"step","global_rank":0,"step":1,"ts":1,"events":{"h2d":{"gpu_ms":1.5}},)" +
          activity + "}") +
      R"({"type":"step","global_rank":0,"step":2,"ts":1,"events":{},"gpu_activity":null})"
      "\n" +
      R"({"type":"step","global_rank":0,"step":3,"ts":1,"events":{}})"
      "\n");
  ASSERT_EQ(r.telemetry.steps.size(), 3u);
  const auto& s = r.telemetry.steps[0];
  ASSERT_TRUE(s.gpu_activity.has_value());
  EXPECT_EQ(s.gpu_activity->h2d_ms, 1.5);
  EXPECT_EQ(s.gpu_activity->h2d_bytes, 1.28e8);
  EXPECT_EQ(s.gpu_activity->h2d_copies, 4);
  EXPECT_EQ(s.gpu_activity->h2d_pageable_copies, 3);  // an integral float counts
  EXPECT_EQ(s.gpu_activity->h2d_pageable_bytes, 9.6e7);
  EXPECT_EQ(s.gpu_activity->collective_ms, 7.25);
  EXPECT_EQ(s.gpu_activity->busy_ms, 40.0);
  // An H2D with only a GPU value (captured, no phase marked) has no CPU value.
  EXPECT_TRUE(s.events.has(Event::H2D));
  EXPECT_EQ(s.events.cpu_ms(Event::H2D), std::nullopt);
  EXPECT_EQ(s.events.gpu_ms(Event::H2D), 1.5);
  EXPECT_FALSE(r.telemetry.steps[1].gpu_activity.has_value());  // null: no activity records
  EXPECT_FALSE(r.telemetry.steps[2].gpu_activity.has_value());  // absent: the same
}

TEST(JsonlReaderTest, StepMemoryLine) {
  const ReadResult r = parse(
      with_run(
          R"({"type":"step_memory","global_rank":1,"step":4,"device":"cuda:1","peak_allocated_bytes":2.9e9,"peak_reserved_bytes":3200000000})") +
      R"({"type":"step_memory","global_rank":0,"step":5,"peak_allocated_bytes":null})");
  ASSERT_EQ(r.telemetry.step_memory.size(), 2u);
  const auto& m = r.telemetry.step_memory[0];
  EXPECT_EQ(m.global_rank, 1);
  EXPECT_EQ(m.step, 4);
  EXPECT_EQ(m.device, "cuda:1");
  EXPECT_EQ(m.peak_allocated_bytes, 2.9e9);
  EXPECT_EQ(m.peak_reserved_bytes, 3.2e9);
  const auto& bare = r.telemetry.step_memory[1];
  EXPECT_EQ(bare.device, "");  // device absent: empty name
  EXPECT_EQ(bare.peak_allocated_bytes, std::nullopt);
  EXPECT_EQ(bare.peak_reserved_bytes, std::nullopt);
}

TEST(JsonlReaderTest, SystemLineWithGpus) {
  const ReadResult r = parse(with_run(
      R"({"type":"system","node_rank":1,"ts":1764662401.25,"cpu_percent":20.0,"ram_used_bytes":8e9,"ram_total_bytes":64e9,"gpus":[{"index":0,"util_percent":80.0,"mem_used_bytes":1e10,"mem_total_bytes":8e10,"temperature_c":null,"power_w":null,"power_limit_w":null},{"index":3,"util_percent":0,"mem_used_bytes":0,"mem_total_bytes":8e10,"temperature_c":61.5,"power_w":250.5,"power_limit_w":700}]})"));
  ASSERT_EQ(r.telemetry.system.size(), 1u);
  const auto& s = r.telemetry.system[0];
  EXPECT_EQ(s.node_rank, 1);
  EXPECT_EQ(s.ts, 1764662401.25);
  EXPECT_EQ(s.cpu_percent, 20.0);
  EXPECT_EQ(s.ram_used_bytes, 8e9);
  EXPECT_EQ(s.ram_total_bytes, 64e9);
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].index, 0);
  EXPECT_EQ(s.gpus[0].util_percent, 80.0);
  EXPECT_EQ(s.gpus[0].mem_used_bytes, 1e10);
  EXPECT_EQ(s.gpus[0].mem_total_bytes, 8e10);
  EXPECT_EQ(s.gpus[0].temperature_c, std::nullopt);
  EXPECT_EQ(s.gpus[0].power_w, std::nullopt);
  EXPECT_EQ(s.gpus[0].power_limit_w, std::nullopt);
  EXPECT_EQ(s.gpus[1].index, 3);
  EXPECT_EQ(s.gpus[1].util_percent, 0.0);  // zero is a measurement, not absence
  EXPECT_EQ(s.gpus[1].mem_used_bytes, 0.0);
  EXPECT_EQ(s.gpus[1].temperature_c, 61.5);
  EXPECT_EQ(s.gpus[1].power_w, 250.5);
  EXPECT_EQ(s.gpus[1].power_limit_w, 700.0);
}

TEST(JsonlReaderTest, SystemLineWithoutGpus) {
  const ReadResult r = parse(with_run(R"({"type":"system","node_rank":0,"ts":5,"gpus":[]})") +
                             R"({"type":"system","node_rank":0,"ts":6})" + "\n" +
                             R"({"type":"system","node_rank":0,"ts":7,"gpus":null})");
  ASSERT_EQ(r.telemetry.system.size(), 3u);
  for (const auto& s : r.telemetry.system) {
    EXPECT_TRUE(s.gpus.empty());
    EXPECT_EQ(s.cpu_percent, std::nullopt);
    EXPECT_EQ(s.ram_used_bytes, std::nullopt);
    EXPECT_EQ(s.ram_total_bytes, std::nullopt);
  }
  EXPECT_EQ(r.telemetry.system[2].ts, 7.0);
}

TEST(JsonlReaderTest, GpuIndexDefaultsToListPosition) {
  const ReadResult r =
      parse(with_run(R"({"type":"system","node_rank":0,"ts":5,"gpus":[{},{"util_percent":5}]})"));
  ASSERT_EQ(r.telemetry.system[0].gpus.size(), 2u);
  EXPECT_EQ(r.telemetry.system[0].gpus[0].index, 0);
  EXPECT_EQ(r.telemetry.system[0].gpus[1].index, 1);
  EXPECT_EQ(r.telemetry.system[0].gpus[1].util_percent, 5.0);
}

TEST(JsonlReaderTest, ProcessLineWithGpu) {
  const ReadResult r = parse(with_run(
      R"({"type":"process","global_rank":2,"ts":10.5,"cpu_percent":120.0,"cpu_cores":8,"rss_bytes":3e9,"ram_total_bytes":64e9,"gpu":{"device":1,"allocated_bytes":2e9,"reserved_bytes":2.5e9,"total_bytes":8e10}})"));
  ASSERT_EQ(r.telemetry.process.size(), 1u);
  const auto& p = r.telemetry.process[0];
  EXPECT_EQ(p.global_rank, 2);
  EXPECT_EQ(p.ts, 10.5);
  EXPECT_EQ(p.cpu_percent, 120.0);  // over 100: several cores
  EXPECT_EQ(p.cpu_cores, 8);
  EXPECT_EQ(p.rss_bytes, 3e9);
  EXPECT_EQ(p.ram_total_bytes, 64e9);
  ASSERT_TRUE(p.gpu.has_value());
  EXPECT_EQ(p.gpu->device, 1);
  EXPECT_EQ(p.gpu->allocated_bytes, 2e9);
  EXPECT_EQ(p.gpu->reserved_bytes, 2.5e9);
  EXPECT_EQ(p.gpu->total_bytes, 8e10);
}

TEST(JsonlReaderTest, ProcessLineWithoutGpu) {
  const ReadResult r = parse(with_run(R"({"type":"process","global_rank":0,"ts":1,"gpu":null})") +
                             R"({"type":"process","global_rank":0,"ts":2})" + "\n" +
                             R"({"type":"process","global_rank":0,"ts":3,"gpu":{}})");
  ASSERT_EQ(r.telemetry.process.size(), 3u);
  EXPECT_FALSE(r.telemetry.process[0].gpu.has_value());
  EXPECT_FALSE(r.telemetry.process[1].gpu.has_value());
  EXPECT_EQ(r.telemetry.process[1].cpu_cores, std::nullopt);
  ASSERT_TRUE(r.telemetry.process[2].gpu.has_value());  // a GPU with nothing known about it
  EXPECT_EQ(r.telemetry.process[2].gpu->device, std::nullopt);
  EXPECT_EQ(r.telemetry.process[2].gpu->allocated_bytes, std::nullopt);
}

TEST(JsonlReaderTest, RecordsKeepArrivalOrderAndDuplicates) {
  // The reader keeps both records of (rank 0, step 1); "later wins" is the analysis' rule.
  const ReadResult r = parse(
      with_run(
          R"({"type":"step","global_rank":0,"step":1,"ts":1,"events":{"forward":{"cpu_ms":1}}})") +
      R"({"type":"step","global_rank":1,"step":1,"ts":1,"events":{}})" + "\n" +
      R"({"type":"step","global_rank":0,"step":1,"ts":2,"events":{"forward":{"cpu_ms":2}}})");
  ASSERT_EQ(r.telemetry.steps.size(), 3u);
  EXPECT_EQ(r.telemetry.steps[0].events.cpu_ms(Event::Forward), 1.0);
  EXPECT_EQ(r.telemetry.steps[1].global_rank, 1);
  EXPECT_EQ(r.telemetry.steps[2].events.cpu_ms(Event::Forward), 2.0);
}

TEST(JsonlReaderTest, DuplicateKeyInALineLastWins) {
  const ReadResult r =
      parse(with_run(R"({"type":"step","global_rank":0,"step":1,"step":2,"ts":1,"events":{}})"));
  EXPECT_EQ(r.telemetry.steps[0].step, 2);
}

TEST(JsonlReaderTest, UnknownKeysAreIgnoredEverywhere) {
  const ReadResult r = parse(
      R"({"type":"run","format":"traceml-telemetry","version":1,"comment":"x","nested":{"a":[1,{"b":null}]}})"
      "\n"
      R"({"type":"rank","global_rank":0,"pid":1234,"extra":[true,false]})"
      "\n"
      R"({"type":"step","global_rank":0,"step":1,"ts":1,"seq":9,"events":{"forward":{"cpu_ms":3,"n_calls":2,"is_gpu":true,"duration_ms":3}}})"
      "\n"
      R"({"type":"system","node_rank":0,"ts":1,"gpu_count":1,"gpus":[{"index":0,"util_percent":9,"fan":30}]})"
      "\n"
      R"({"type":"process","global_rank":0,"ts":1,"pid":1,"gpu":{"device":0,"mem_used":5,"allocated_bytes":7}})"
      "\n"
      R"({"type":"step_memory","global_rank":0,"step":1,"model_id":"m","peak_allocated_bytes":4})");
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.telemetry.ranks.size(), 1u);
  EXPECT_EQ(r.telemetry.steps[0].events.cpu_ms(Event::Forward), 3.0);
  EXPECT_EQ(r.telemetry.system[0].gpus[0].util_percent, 9.0);
  EXPECT_EQ(r.telemetry.process[0].gpu->allocated_bytes, 7.0);
  EXPECT_EQ(r.telemetry.step_memory[0].peak_allocated_bytes, 4.0);
}

TEST(JsonlReaderTest, EscapedAndNonAsciiStrings) {
  // Strings with escapes or UTF-8 take nlohmann's path; the values must be the same.
  const ReadResult r = parse(
      R"({"type":"run","format":"traceml-telemetry","version":1,"run_name":"r\u00e9sum\u00e9 \"1\"\\n"})"
      "\n"
      "{\"type\":\"rank\",\"global_rank\":0,\"hostname\":\"n\xc5\x93ud-\\t1\"}\n");
  EXPECT_EQ(r.telemetry.run.run_name, "r\xc3\xa9sum\xc3\xa9 \"1\"\\n");
  EXPECT_EQ(r.telemetry.ranks[0].hostname, "n\xc5\x93ud-\t1");
}

TEST(JsonlReaderTest, NumbersReadTheSameOnBothParsers) {
  // Each value once in a plain line and once in a line with an escaped unknown key,
  // which sends it through nlohmann; both must give exactly the expected double.
  const std::pair<const char*, double> cases[] = {
      {"0", 0.0},
      {"-0", 0.0},
      {"0.1", 0.1},
      {"2.5E+3", 2500.0},
      {"1.5e-3", 0.0015},
      {"1e-300", 1e-300},
      {"5e-324", 5e-324},  // the smallest subnormal
      {"1.7976931348623157e308", 1.7976931348623157e308},
      {"123456789012345678", 123456789012345678.0},
      {"9223372036854775807", 9223372036854775807.0},
      {"18446744073709551615", 18446744073709551615.0},  // 20 digits: nlohmann's path
      {"100000000000000000000", 1e20},                   // beyond 64 bits: read as a float
      {"1764662400.123456", 1764662400.123456},
  };
  for (const auto& [text, expected] : cases) {
    for (const char* extra : {"", R"("\u0041":1,)"}) {
      const ReadResult r = parse(with_run(
          std::string(R"({"type":"step",)") + extra +
          R"("global_rank":0,"step":1,"ts":1,"events":{"forward":{"cpu_ms":)" + text + "}}}"));
      EXPECT_EQ(r.telemetry.steps[0].events.cpu_ms(Event::Forward), expected)
          << text << " " << extra;
    }
  }
}

TEST(JsonlReaderTest, WhitespaceInsideLines) {
  const ReadResult r = parse(
      "  { \"type\" : \"run\" , \"format\" :\t\"traceml-telemetry\", \"version\" : 1 }  \n"
      "{ \"type\":\"step\", \"global_rank\" : 0 , \"step\": 1, \"ts\": 2 , \"events\" : { "
      "\"forward\" : { \"cpu_ms\" : 3 } } , \"x\" : [ 1 , [ ] , { } ] }\n");
  ASSERT_EQ(r.telemetry.steps.size(), 1u);
  EXPECT_EQ(r.telemetry.steps[0].events.cpu_ms(Event::Forward), 3.0);
}

TEST(JsonlReaderTest, DeeplyNestedUnknownValueIsIgnored) {
  // Deeper than the fast parser goes (32): nlohmann's path reads it. The line's
  // object and 63 arrays are 64 levels, the most a line may nest.
  const std::string deep = std::string(63, '[') + std::string(63, ']');
  const ReadResult r = parse(with_run(R"({"type":"step","global_rank":0,"step":1,"ts":1,"junk":)" +
                                      deep + R"(,"events":{}})"));
  EXPECT_EQ(r.telemetry.steps.size(), 1u);
}

/// A line of an unknown type holding `values` values in all: its object, its
/// "type" string, an array and the array's elements, each `element`.
std::string line_of_values(std::size_t values, const std::string& element) {
  std::string line = R"({"type":"x","a":[)";
  for (std::size_t i = 0; i + 3 < values; ++i)
    line += (i == 0 ? "" : ",") + element;
  return line + "]}";
}

TEST(JsonlReaderErrorTest, MoreValuesThanTheLimitAreRefused) {
  const std::string too_many =
      "t.jsonl:2: more than 65536 values on one line (a record holds a few dozen)";
  // Numbers go through the fast parser first, escaped strings only through nlohmann's.
  for (const std::string element : {"0", R"("A")"}) {
    EXPECT_EQ(error_of(with_run(line_of_values(kMaxLineValues, element))), "") << element;
    EXPECT_EQ(error_of(with_run(line_of_values(kMaxLineValues + 1, element))), too_many) << element;
  }
}

TEST(JsonlReaderErrorTest, NestingDeeperThanTheLimitIsRefused) {
  const std::string too_deep =
      "t.jsonl:2: nesting deeper than 64 levels (records of this format "
      "nest 3 levels)";
  EXPECT_EQ(error_of(with_run(R"({"type":"x","junk":)" + std::string(64, '[') +
                              std::string(64, ']') + "}")),
            too_deep);
  std::string objects;
  for (int i = 0; i < 64; ++i)
    objects += R"({"a":)";
  objects += "1" + std::string(64, '}');
  EXPECT_EQ(error_of(with_run(R"({"type":"x","junk":)" + objects + "}")), too_deep);
  // One level less is read (the unknown type is skipped with a warning).
  EXPECT_EQ(
      error_of(with_run(R"({"type":"x","junk":)" + objects.substr(5, objects.size() - 6) + "}")),
      "");
  // Unterminated: refused at the 65th level, before the parser reads further.
  EXPECT_EQ(error_of(with_run(std::string(100000, '['))), too_deep);
  EXPECT_EQ(error_of(with_run(std::string(kMaxLineBytes, '['))), too_deep);
}

// ---------------------------------------------------------------------------
// Line structure: blank lines, CRLF, last line without newline.

TEST(JsonlReaderTest, BlankLinesAreIgnoredButCounted) {
  const std::string text = "\n" + kRun + "\n\n   \t\n" + kStep + "\n\n" +
                           R"({"type":"step","global_rank":0,"step":-3,"ts":1,"events":{}})" + "\n";
  // Lines: 1 blank, 2 run, 3 blank, 4 spaces/tab, 5 step, 6 blank, 7 the bad step.
  EXPECT_EQ(error_of(text, "logs/x.jsonl"),
            "logs/x.jsonl:7: 'step' must be an integer >= 1, got -3");
  const ReadResult ok = parse("\n" + kRun + "\n\n   \t\n" + kStep + "\n\n");
  EXPECT_EQ(ok.telemetry.steps.size(), 1u);
}

TEST(JsonlReaderTest, CrlfLineEndings) {
  const ReadResult r = parse(kRun + "\r\n\r\n" + kStep + "\r\n");
  EXPECT_EQ(r.telemetry.steps.size(), 1u);
  EXPECT_EQ(r.telemetry.run.run_name, "r1");
  EXPECT_EQ(error_of(kRun + "\r\n\r\n{\"type\":\"step\"}\r\n"),
            "t.jsonl:3: missing required key 'global_rank' in a step line");
}

TEST(JsonlReaderTest, LastLineWithoutNewline) {
  const ReadResult r = parse(kRun + "\n" + kStep);
  EXPECT_EQ(r.telemetry.steps.size(), 1u);
}

// ---------------------------------------------------------------------------
// Warnings.

TEST(JsonlReaderTest, UnknownTypeIsSkippedWithAWarning) {
  const ReadResult r =
      parse(with_run(R"({"type":"foo","x":1})") + kStep + "\n" + R"({"type":"foo"})" + "\n" +
            R"({"type":"bar"})" + "\n" + R"({"type":"foo"})");
  EXPECT_EQ(r.telemetry.steps.size(), 1u);
  // The first line of each unknown type is named; the rest are counted, so that a
  // file of millions of such lines gives two warnings, not millions.
  ASSERT_EQ(r.warnings.size(), 3u);
  EXPECT_EQ(r.warnings[0], "t.jsonl:2: skipped line of unknown type 'foo'");
  EXPECT_EQ(r.warnings[1], "t.jsonl:5: skipped line of unknown type 'bar'");
  EXPECT_EQ(r.warnings[2], "t.jsonl: skipped 2 more line(s) of unknown type 'foo'");
}

TEST(JsonlReaderTest, WarningsNameAFewUnknownTypesAndCountTheRest) {
  // 100,000 distinct unknown types: five warnings name the first five types,
  // one more counts the other lines.
  std::string text = kRun + "\n";
  for (int i = 0; i < 100000; ++i)
    text += R"({"type":"t)" + std::to_string(i) + "\"}\n";
  text += R"({"type":"t0"})"
          "\n" +
          kStep + "\n";
  const ReadResult r = parse(text);
  EXPECT_EQ(r.telemetry.steps.size(), 1u);
  ASSERT_EQ(r.warnings.size(), 7u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.warnings[static_cast<std::size_t>(i)], "t.jsonl:" + std::to_string(i + 2) +
                                                           ": skipped line of unknown type 't" +
                                                           std::to_string(i) + "'");
  }
  EXPECT_EQ(r.warnings[5], "t.jsonl: skipped 1 more line(s) of unknown type 't0'");
  EXPECT_EQ(r.warnings[6],
            "t.jsonl: skipped 99995 more line(s) of other unknown types (only the first 5 types "
            "are named)");
}

TEST(JsonlReaderTest, WarningsNameAFewUnknownEventsAndCountTheRest) {
  std::string events;
  for (int i = 0; i < 8; ++i)
    events += R"("e)" + std::to_string(i) + R"(":{},)";
  const std::string line = R"({"type":"step","global_rank":0,"step":1,"ts":1,"events":{)" + events +
                           R"("forward":{"cpu_ms":1}}})";
  const ReadResult r = parse(with_run(line) + line + "\n");
  ASSERT_EQ(r.telemetry.steps.size(), 2u);
  ASSERT_EQ(r.warnings.size(), 11u);
  EXPECT_EQ(r.warnings[4].rfind("t.jsonl:2: ignored unknown event 'e4' (known events: ", 0), 0u);
  EXPECT_EQ(r.warnings[5], "t.jsonl: ignored unknown event 'e0' on 1 more line(s)");
  EXPECT_EQ(r.warnings[10],
            "t.jsonl: ignored 6 more unknown event(s) of other names (only the first 5 names are "
            "named)");
}

TEST(JsonlReaderTest, LongUnknownNamesAreCutInWarnings) {
  const ReadResult r = parse(with_run(R"({"type":")" + std::string(5000, 'x') + "\"}"));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "t.jsonl:2: skipped line of unknown type '" + std::string(60, 'x') + "...'");
}

TEST(JsonlReaderTest, TextLongerThanTheWireAllowsIsCutWithAWarning) {
  // Over 1024 bytes: cut on a character boundary (the 2-byte e-acute would
  // straddle it), never refused: a string must not block a summary.
  const std::string host = std::string(1023, 'h') + "\u00e9" + std::string(500, 'x');
  const ReadResult r =
      parse(with_run(R"({"type":"rank","global_rank":0,"hostname":")" + host + "\"}") +
            R"({"type":"step_memory","global_rank":0,"step":1,"device":")" +
            std::string(2000, 'd') + "\"}\n");
  ASSERT_EQ(r.telemetry.ranks.size(), 1u);
  EXPECT_EQ(r.telemetry.ranks[0].hostname, std::string(1023, 'h'));
  EXPECT_EQ(r.telemetry.step_memory[0].device, std::string(1024, 'd'));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "t.jsonl: cut 2 string(s) to 1024 bytes, the longest text a record keeps");
  // At the limit: kept whole, no warning.
  const ReadResult exact = parse(
      with_run(R"({"type":"rank","global_rank":0,"hostname":")" + std::string(1024, 'h') + "\"}"));
  EXPECT_EQ(exact.telemetry.ranks[0].hostname->size(), 1024u);
  EXPECT_TRUE(exact.warnings.empty());
}

TEST(JsonlReaderErrorTest, InvalidUtf8IsAOneLineErrorWithoutTheRawBytes) {
  // nlohmann refuses ill-formed UTF-8; its message quotes the bytes it read,
  // which are shown escaped so that they cannot drive a terminal.
  EXPECT_EQ(error_of(with_run("{\"type\":\"rank\",\"global_rank\":0,\"hostname\":\"a\xff\"}")),
            "t.jsonl:2: invalid JSON at column 45: syntax error while parsing value - invalid "
            "string: ill-formed UTF-8 byte; last read: '\"a\xef\xbf\xbd'");
  // A C1 control (U+009B, a terminal's CSI) before a raw ESC, both in a string.
  EXPECT_EQ(
      error_of(with_run("{\"hostname\":\"\xc2\x9b\x1b[31m\"}")),
      "t.jsonl:2: invalid JSON at column 16: syntax error while parsing value - invalid string: "
      "control character U+001B (ESC) must be escaped to \\u001B; last read: '\"\\u009b<U+001B>'");
}

TEST(JsonlReaderTest, ControlCharactersInNamesStayOnOneLine) {
  // An escaped newline in a type name must not break the one-line warning.
  const ReadResult r = parse(with_run(R"({"type":"a\nb"})"));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0], "t.jsonl:2: skipped line of unknown type 'a\\u000ab'");
  EXPECT_EQ(error_of(with_run(R"({"type":"rank","global_rank":"x\ty"})")),
            "t.jsonl:2: 'global_rank' must be an integer >= 0, got \"x\\u0009y\"");
}

TEST(JsonlReaderTest, UnknownEventIsIgnoredWithAWarning) {
  const ReadResult r = parse(
      with_run(
          R"({"type":"step","global_rank":0,"step":1,"ts":1,"events":{"zero_grad":{"cpu_ms":1},"forward":{"cpu_ms":2}}})") +
      R"({"type":"step","global_rank":0,"step":2,"ts":1,"events":{"zero_grad":{"cpu_ms":-1}}})");
  ASSERT_EQ(r.telemetry.steps.size(), 2u);
  EXPECT_EQ(r.telemetry.steps[0].events.cpu_ms(Event::Forward), 2.0);
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_EQ(r.warnings[0],
            "t.jsonl:2: ignored unknown event 'zero_grad' (known events: input_wait, h2d, forward, "
            "backward, optimizer_step, traced_step_time)");
  // An unknown event's value is not validated: it is not read at all.
  EXPECT_EQ(r.warnings[1], "t.jsonl: ignored unknown event 'zero_grad' on 1 more line(s)");
}

// ---------------------------------------------------------------------------
// Errors: exact messages.

TEST(JsonlReaderErrorTest, MalformedJson) {
  EXPECT_EQ(error_of(with_run(R"({"type":"step",)")),
            "t.jsonl:2: invalid JSON at column 16: syntax error while parsing object key - "
            "unexpected end of input; expected string literal");
  EXPECT_EQ(error_of(with_run(R"({"type":"step"} x)")),
            "t.jsonl:2: invalid JSON at column 17: syntax error while parsing value - invalid "
            "literal; last read: '\"step\"} x'; expected end of input");
  EXPECT_EQ(error_of(with_run(R"({"a":1.})")),
            "t.jsonl:2: invalid JSON at column 8: syntax error while parsing value - invalid "
            "number; expected digit after '.'; last read: '1.}'");
  EXPECT_EQ(error_of(with_run(R"({"a":NaN})")),
            "t.jsonl:2: invalid JSON at column 6: syntax error while parsing value - invalid "
            "literal; last read: '\"a\":N'");
  EXPECT_EQ(
      error_of(with_run("{\"a\":\"\x01\"}")),
      "t.jsonl:2: invalid JSON at column 7: syntax error while parsing value - invalid "
      "string: control character U+0001 (SOH) must be escaped to \\u0001; last read: '\"<U+0001>'");
  EXPECT_EQ(error_of("{\"type\":\"run\"\n"),
            "t.jsonl:1: invalid JSON at column 14: syntax error while parsing object - unexpected "
            "end of input; expected '}'");
}

TEST(JsonlReaderErrorTest, NumbersOutsideJsonGrammarAreMalformed) {
  // The fast parser gives these up; nlohmann's message names the fault.
  for (const char* bad : {"01", "+1", ".5", "1e", "-", "0x10", "1_000", "Infinity"}) {
    const std::string e = error_of(with_run(std::string(R"({"a":)") + bad + "}"));
    EXPECT_EQ(e.rfind("t.jsonl:2: invalid JSON at column ", 0), 0u) << bad << ": " << e;
  }
}

TEST(JsonlReaderErrorTest, NotAnObject) {
  EXPECT_EQ(error_of(with_run("[1,2]")),
            "t.jsonl:2: expected one JSON object per line, got an array");
  EXPECT_EQ(error_of(with_run("42")), "t.jsonl:2: expected one JSON object per line, got 42");
  EXPECT_EQ(error_of(with_run("\"step\"")),
            "t.jsonl:2: expected one JSON object per line, got \"step\"");
  EXPECT_EQ(error_of(with_run("null")), "t.jsonl:2: expected one JSON object per line, got null");
  EXPECT_EQ(error_of("[]\n"), "t.jsonl:1: expected one JSON object per line, got an array");
}

TEST(JsonlReaderErrorTest, MissingFile) {
  try {
    read_telemetry_jsonl("missing.jsonl");
    FAIL() << "no error";
  } catch (const TelemetryError& e) {
    EXPECT_STREQ(e.what(), "missing.jsonl: cannot open file: No such file or directory");
    EXPECT_EQ(e.source(), "missing.jsonl");
    EXPECT_EQ(e.line(), std::nullopt);
    EXPECT_EQ(e.problem(), "cannot open file: No such file or directory");
  }
}

TEST(JsonlReaderErrorTest, DirectoryIsNotAFile) {
  try {
    read_telemetry_jsonl(TRACEML_TEST_DATA_DIR);
    FAIL() << "no error";
  } catch (const TelemetryError& e) {
    EXPECT_EQ(std::string(e.what()),
              std::string(TRACEML_TEST_DATA_DIR) + ": cannot read file: Is a directory");
  }
}

TEST(JsonlReaderErrorTest, FirstLineMustBeTheRunHeader) {
  const std::string expected =
      ": first line must be a {\"type\":\"run\",...} header (format \"traceml-telemetry\", "
      "version 2)";
  EXPECT_EQ(error_of(kStep + "\n", "run.jsonl"), "run.jsonl:1" + expected);
  EXPECT_EQ(error_of(R"({"format":"traceml-telemetry","version":1})"), "t.jsonl:1" + expected);
  EXPECT_EQ(error_of(R"({"type":5})"), "t.jsonl:1" + expected);
  // Blank lines before the header are fine; the header's own line is reported.
  EXPECT_EQ(error_of("\n\n" + kStep + "\n"), "t.jsonl:3" + expected);
  EXPECT_EQ(error_of(""), "t.jsonl:1" + expected + ", but the file is empty");
  EXPECT_EQ(error_of("\n \n\n"), "t.jsonl:1" + expected + ", but the file is empty");
}

TEST(JsonlReaderErrorTest, WrongFormatOrVersion) {
  EXPECT_EQ(error_of(R"({"type":"run","format":"traceml","version":1})"),
            "t.jsonl:1: 'format' must be \"traceml-telemetry\", got \"traceml\"");
  EXPECT_EQ(error_of(R"({"type":"run","format":1,"version":1})"),
            "t.jsonl:1: 'format' must be \"traceml-telemetry\", got 1");
  EXPECT_EQ(error_of(R"({"type":"run","version":1})"),
            "t.jsonl:1: missing required key 'format' in a run line");
  const std::string versions = " (this traceml reads telemetry format versions 1 to 2)";
  EXPECT_EQ(error_of(R"({"type":"run","format":"traceml-telemetry","version":3})"),
            "t.jsonl:1: 'version' must be 1 to 2, got 3" + versions);
  EXPECT_EQ(error_of(R"({"type":"run","format":"traceml-telemetry","version":0})"),
            "t.jsonl:1: 'version' must be 1 to 2, got 0" + versions);
  EXPECT_EQ(error_of(R"({"type":"run","format":"traceml-telemetry","version":"1"})"),
            "t.jsonl:1: 'version' must be 1 to 2, got \"1\"" + versions);
  EXPECT_EQ(error_of(R"({"type":"run","format":"traceml-telemetry","version":1.5})"),
            "t.jsonl:1: 'version' must be 1 to 2, got 1.5" + versions);
  EXPECT_EQ(error_of(R"({"type":"run","format":"traceml-telemetry"})"),
            "t.jsonl:1: missing required key 'version' in a run line");
}

TEST(JsonlReaderErrorTest, SecondRunLine) {
  EXPECT_EQ(error_of("\n" + kRun + "\n" + kStep + "\n" + kRun + "\n"),
            "t.jsonl:4: a second {\"type\":\"run\"} line; a file holds one run, whose header is "
            "line 2 (write each run to its own file)");
}

TEST(JsonlReaderErrorTest, StepIds) {
  const auto step = [](const std::string& value) {
    return with_run(R"({"type":"step","global_rank":0,"step":)" + value +
                    R"(,"ts":1,"events":{}})");
  };
  EXPECT_EQ(error_of(step("-3")), "t.jsonl:2: 'step' must be an integer >= 1, got -3");
  EXPECT_EQ(error_of(step("0")),
            "t.jsonl:2: 'step' must be an integer >= 1, got 0");  // ids start at 1
  EXPECT_EQ(error_of(step("1.5")), "t.jsonl:2: 'step' must be an integer >= 1, got 1.5");
  EXPECT_EQ(error_of(step("\"3\"")), "t.jsonl:2: 'step' must be an integer >= 1, got \"3\"");
  EXPECT_EQ(error_of(step("null")), "t.jsonl:2: 'step' must be an integer >= 1, got null");
  EXPECT_EQ(error_of(step("true")), "t.jsonl:2: 'step' must be an integer >= 1, got true");
  EXPECT_EQ(error_of(step("1e999")), "t.jsonl:2: 'step' must be a finite number, got 1e999");
  EXPECT_EQ(parse(step("1")).telemetry.steps[0].step, 1);  // the boundary itself
  EXPECT_EQ(parse(step("9223372036854775807")).telemetry.steps[0].step, INT64_MAX);
  EXPECT_EQ(error_of(step("9223372036854775808")),
            "t.jsonl:2: 'step' must be an integer >= 1, got 9223372036854775808");
  EXPECT_EQ(error_of(with_run(
                R"({"type":"step_memory","global_rank":0,"step":0,"peak_allocated_bytes":1})")),
            "t.jsonl:2: 'step' must be an integer >= 1, got 0");
}

TEST(JsonlReaderErrorTest, NegativeOrNonFiniteNumbers) {
  const auto forward = [](const std::string& timing) {
    return with_run(R"({"type":"step","global_rank":0,"step":1,"ts":1,"events":{"forward":)" +
                    timing + "}}");
  };
  EXPECT_EQ(error_of(forward(R"({"cpu_ms":-1.5})")),
            "t.jsonl:2: 'events.forward.cpu_ms' must be a finite number >= 0, got -1.5");
  EXPECT_EQ(error_of(forward(R"({"cpu_ms":1,"gpu_ms":-2})")),
            "t.jsonl:2: 'events.forward.gpu_ms' must be a finite number >= 0, got -2");
  EXPECT_EQ(error_of(forward(R"({"cpu_ms":1e999})")),
            "t.jsonl:2: 'events.forward.cpu_ms' must be a finite number, got 1e999");
  EXPECT_EQ(error_of(forward(R"({"cpu_ms":-1e999})")),
            "t.jsonl:2: 'events.forward.cpu_ms' must be a finite number, got -1e999");
  EXPECT_EQ(error_of(forward(R"({"cpu_ms":"1.2"})")),
            "t.jsonl:2: 'events.forward.cpu_ms' must be a finite number >= 0, got \"1.2\"");
  EXPECT_EQ(
      error_of(forward("3")),
      "t.jsonl:2: 'events.forward' must be an object like {\"cpu_ms\":3.0,\"gpu_ms\":3.1}, got 3");
  // Zero and -0 are valid measurements (the boundary).
  EXPECT_EQ(parse(forward(R"({"cpu_ms":0,"gpu_ms":-0.0})"))
                .telemetry.steps[0]
                .events.gpu_ms(Event::Forward),
            0.0);

  EXPECT_EQ(error_of(with_run(R"({"type":"step","global_rank":0,"step":1,"ts":-1,"events":{}})")),
            "t.jsonl:2: 'ts' must be a finite number >= 0, got -1");
  EXPECT_EQ(
      error_of(with_run(R"({"type":"step","global_rank":0,"step":1,"ts":1e999,"events":{}})")),
      "t.jsonl:2: 'ts' must be a finite number, got 1e999");
  EXPECT_EQ(
      error_of(with_run(
          R"({"type":"system","node_rank":0,"ts":1,"gpus":[{"index":0},{"util_percent":-5}]})")),
      "t.jsonl:2: 'gpus[1].util_percent' must be a finite number >= 0, got -5");
  EXPECT_EQ(
      error_of(with_run(
          R"({"type":"system","node_rank":0,"ts":1,"gpus":[{"index":0},{"power_w":1e999}]})")),
      "t.jsonl:2: 'gpus[1].power_w' must be a finite number, got 1e999");
  EXPECT_EQ(error_of(with_run(R"({"type":"system","node_rank":0,"ts":1,"cpu_percent":-0.5})")),
            "t.jsonl:2: 'cpu_percent' must be a finite number >= 0, got -0.5");
  EXPECT_EQ(error_of(with_run(
                R"({"type":"process","global_rank":0,"ts":1,"gpu":{"reserved_bytes":-1}})")),
            "t.jsonl:2: 'gpu.reserved_bytes' must be a finite number >= 0, got -1");
  EXPECT_EQ(error_of(with_run(R"({"type":"process","global_rank":0,"ts":1,"rss_bytes":-4096})")),
            "t.jsonl:2: 'rss_bytes' must be a finite number >= 0, got -4096");
  EXPECT_EQ(error_of(with_run(
                R"({"type":"step_memory","global_rank":0,"step":1,"peak_reserved_bytes":-3.2e9})")),
            "t.jsonl:2: 'peak_reserved_bytes' must be a finite number >= 0, got -3.2e+09");
  EXPECT_EQ(error_of(with_run("1e999")), "t.jsonl:2: number out of range, got 1e999");
}

TEST(JsonlReaderErrorTest, NumberOverflowIsNamedByItsPathAtEveryDepth) {
  // An overflow as the first member of an object used to index the node list
  // with its "no node" marker while the path was built (undefined behaviour,
  // seen with UBSan on exactly this line).
  EXPECT_EQ(error_of(with_run(R"({"a":1e999})")),
            "t.jsonl:2: 'a' must be a finite number, got 1e999");
  EXPECT_EQ(error_of(with_run(R"({"type":"x","a":{"b":1e999}})")),
            "t.jsonl:2: 'a.b' must be a finite number, got 1e999");
  EXPECT_EQ(error_of(with_run(R"({"a":[1e999]})")),
            "t.jsonl:2: 'a[0]' must be a finite number, got 1e999");
  EXPECT_EQ(error_of(with_run(R"({"a":[1,{"b":[{},{"c":-1e999}]}]})")),
            "t.jsonl:2: 'a[1].b[1].c' must be a finite number, got -1e999");
  EXPECT_EQ(error_of(with_run("[1e999]")), "t.jsonl:2: '[0]' must be a finite number, got 1e999");
}

TEST(JsonlReaderErrorTest, RanksAndCounts) {
  EXPECT_EQ(error_of(with_run(R"({"type":"rank","global_rank":-1})")),
            "t.jsonl:2: 'global_rank' must be an integer >= 0, got -1");
  EXPECT_EQ(parse(with_run(R"({"type":"rank","global_rank":0,"local_rank":0,"node_rank":0})"))
                .telemetry.ranks[0]
                .node_rank,
            0);  // 0 is the boundary
  EXPECT_EQ(error_of(with_run(R"({"type":"rank","global_rank":0,"node_rank":-2})")),
            "t.jsonl:2: 'node_rank' must be an integer >= 0, got -2");
  EXPECT_EQ(error_of(with_run(R"({"type":"rank","global_rank":0,"local_rank":0.5})")),
            "t.jsonl:2: 'local_rank' must be an integer >= 0, got 0.5");
  EXPECT_EQ(error_of(with_run(R"({"type":"rank","global_rank":3000000000})")),
            "t.jsonl:2: 'global_rank' is too large: got 3000000000, at most 2147483647");
  EXPECT_EQ(
      parse(with_run(R"({"type":"rank","global_rank":2147483647})")).telemetry.ranks[0].global_rank,
      2147483647);
  // Sizes and core counts of 0 would be sentinels; unknown is null or absent.
  EXPECT_EQ(error_of(with_run(R"({"type":"rank","global_rank":0,"world_size":0})")),
            "t.jsonl:2: 'world_size' must be an integer >= 1, got 0");
  EXPECT_EQ(error_of(with_run(R"({"type":"rank","global_rank":0,"local_world_size":0})")),
            "t.jsonl:2: 'local_world_size' must be an integer >= 1, got 0");
  EXPECT_EQ(error_of(R"({"type":"run","format":"traceml-telemetry","version":1,"world_size":0})"),
            "t.jsonl:1: 'world_size' must be an integer >= 1, got 0");
  EXPECT_EQ(error_of(with_run(R"({"type":"process","global_rank":0,"ts":1,"cpu_cores":0})")),
            "t.jsonl:2: 'cpu_cores' must be an integer >= 1, got 0");
  EXPECT_EQ(parse(with_run(R"({"type":"process","global_rank":0,"ts":1,"cpu_cores":1})"))
                .telemetry.process[0]
                .cpu_cores,
            1);
  EXPECT_EQ(error_of(with_run(R"({"type":"process","global_rank":0,"ts":1,"gpu":{"device":-1}})")),
            "t.jsonl:2: 'gpu.device' must be an integer >= 0, got -1");
  EXPECT_EQ(error_of(with_run(R"({"type":"system","node_rank":0,"ts":1,"gpus":[{"index":-1}]})")),
            "t.jsonl:2: 'gpus[0].index' must be an integer >= 0, got -1");
}

TEST(JsonlReaderErrorTest, MissingRequiredKeys) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"rank"})", "missing required key 'global_rank' in a rank line"},
      {R"({"type":"step","step":1,"ts":1,"events":{}})",
       "missing required key 'global_rank' in a step line"},
      {R"({"type":"step","global_rank":0,"ts":1,"events":{}})",
       "missing required key 'step' in a step line"},
      {R"({"type":"step","global_rank":0,"step":1,"events":{}})",
       "missing required key 'ts' in a step line"},
      {R"({"type":"step","global_rank":0,"step":1,"ts":1})",
       "missing required key 'events' in a step line"},
      {R"({"type":"step_memory","step":1})",
       "missing required key 'global_rank' in a step_memory line"},
      {R"({"type":"step_memory","global_rank":0})",
       "missing required key 'step' in a step_memory line"},
      {R"({"type":"system","ts":1})", "missing required key 'node_rank' in a system line"},
      {R"({"type":"system","node_rank":0})", "missing required key 'ts' in a system line"},
      {R"({"type":"process","ts":1})", "missing required key 'global_rank' in a process line"},
      {R"({"type":"process","global_rank":0})", "missing required key 'ts' in a process line"},
  };
  for (const auto& [line, message] : cases) {
    EXPECT_EQ(error_of(with_run(line)), std::string("t.jsonl:2: ") + message) << line;
  }
}

TEST(JsonlReaderErrorTest, WrongShapes) {
  EXPECT_EQ(error_of(with_run(R"({"global_rank":0})")),
            "t.jsonl:2: missing required key 'type' (one of \"rank\", \"step\", \"step_memory\", "
            "\"system\", \"process\", \"profiled_steps\")");
  EXPECT_EQ(error_of(with_run(R"({"type":["step"]})")),
            "t.jsonl:2: 'type' must be a string, got an array");
  EXPECT_EQ(
      error_of(with_run(R"({"type":"step","global_rank":0,"step":1,"ts":1,"events":[]})")),
      "t.jsonl:2: 'events' must be an object like {\"forward\":{\"cpu_ms\":3.0,\"gpu_ms\":3.1}}, "
      "got an array");
  EXPECT_EQ(
      error_of(with_run(R"({"type":"system","node_rank":0,"ts":1,"gpus":{}})")),
      "t.jsonl:2: 'gpus' must be an array of objects like {\"index\":0,\"util_percent\":80.0} "
      "(empty when there are none), got an object");
  EXPECT_EQ(
      error_of(with_run(R"({"type":"system","node_rank":0,"ts":1,"gpus":[{},7]})")),
      "t.jsonl:2: 'gpus[1]' must be an object like {\"index\":0,\"util_percent\":80.0}, got 7");
  EXPECT_EQ(
      error_of(with_run(R"({"type":"process","global_rank":0,"ts":1,"gpu":0})")),
      "t.jsonl:2: 'gpu' must be an object like {\"device\":0,\"allocated_bytes\":1e9} or null, "
      "got 0");
  EXPECT_EQ(error_of(with_run(R"({"type":"rank","global_rank":0,"hostname":5})")),
            "t.jsonl:2: 'hostname' must be a string or null, got 5");
  EXPECT_EQ(error_of(with_run(R"({"type":"step_memory","global_rank":0,"step":1,"device":0})")),
            "t.jsonl:2: 'device' must be a string or null, got 0");
  EXPECT_EQ(
      error_of(R"({"type":"run","format":"traceml-telemetry","version":1,"strategy":1})"),
      "t.jsonl:1: 'strategy' must be a string (ddp, fsdp, single_process, distributed_unknown "
      "or unknown), got 1");
  EXPECT_EQ(error_of(R"({"type":"run","format":"traceml-telemetry","version":1,"run_name":false})"),
            "t.jsonl:1: 'run_name' must be a string or null, got false");
}

TEST(JsonlReaderErrorTest, GpuActivity) {
  const std::string head = R"({"type":"step","global_rank":0,"step":1,"ts":1,"events":{},)";
  const std::string full = R"("h2d_ms":1,"h2d_bytes":100,"h2d_copies":2,"h2d_pageable_copies":1,)"
                           R"("h2d_pageable_bytes":50,"collective_ms":0,"busy_ms":3)";
  const std::pair<std::string, std::string> cases[] = {
      {R"("gpu_activity":[])",
       "'gpu_activity' must be an object like {\"h2d_ms\":0.4,\"h2d_bytes\":1e6,...} or null, "
       "got an array"},
      {R"("gpu_activity":{"h2d_ms":1})",
       "missing required key 'gpu_activity.h2d_bytes' in a step line"},
      {R"("gpu_activity":{)" + full + R"(,"busy_ms":null})",
       "'gpu_activity.busy_ms' must be a finite number >= 0, got null"},
      {R"("gpu_activity":{)" + full + R"(,"collective_ms":-1})",
       "'gpu_activity.collective_ms' must be a finite number >= 0, got -1"},
      {R"("gpu_activity":{)" + full + R"(,"h2d_copies":1.5})",
       "'gpu_activity.h2d_copies' must be an integer >= 0, got 1.5"},
      {R"("gpu_activity":{)" + full + R"(,"h2d_pageable_copies":-2})",
       "'gpu_activity.h2d_pageable_copies' must be an integer >= 0, got -2"},
      {R"("gpu_activity":{)" + full + R"(,"h2d_pageable_copies":3})",
       "'gpu_activity.h2d_pageable_copies' (3) must not exceed 'gpu_activity.h2d_copies' (2)"},
      {R"("gpu_activity":{)" + full + R"(,"h2d_pageable_bytes":101})",
       "'gpu_activity.h2d_pageable_bytes' (101) must not exceed 'gpu_activity.h2d_bytes' (100)"},
  };
  for (const auto& [member, message] : cases) {
    EXPECT_EQ(error_of(with_run(head + member + "}")), "t.jsonl:2: " + message) << member;
  }
  // The complete object (a later duplicate key wins) is accepted.
  EXPECT_EQ(error_of(with_run(head + R"("gpu_activity":{)" + full + "}}")), "");
}

TEST(JsonlReaderErrorTest, LongStringsAreCutInMessages) {
  const std::string long_name(100, 'x');
  EXPECT_EQ(
      error_of(with_run(R"({"type":"step","global_rank":")" + long_name + "\"}")),
      "t.jsonl:2: 'global_rank' must be an integer >= 0, got \"" + std::string(60, 'x') + "...\"");
}

TEST(JsonlReaderErrorTest, ErrorCarriesItsParts) {
  try {
    parse(with_run(R"({"type":"rank","global_rank":-1})"), "a/b.jsonl");
    FAIL() << "no error";
  } catch (const TelemetryError& e) {
    EXPECT_EQ(e.source(), "a/b.jsonl");
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.problem(), "'global_rank' must be an integer >= 0, got -1");
  }
}

// ---------------------------------------------------------------------------
// Streams and files.

TEST(JsonlReaderTest, StreamOverloadUsesTheGivenName) {
  std::istringstream in(kRun + "\n" + kStep + "\n");
  const ReadResult r = read_telemetry_jsonl(in, "<stdin>");
  EXPECT_EQ(r.telemetry.steps.size(), 1u);
  std::istringstream bad(kRun + "\n{\n");
  try {
    read_telemetry_jsonl(bad, "<stdin>");
    FAIL() << "no error";
  } catch (const TelemetryError& e) {
    EXPECT_EQ(std::string(e.what()),
              "<stdin>:2: invalid JSON at column 2: syntax error while parsing object key - "
              "unexpected end of input; expected string literal");
  }
}

/// A file of `steps` step lines after the header, larger than one read chunk.
std::string big_text(int steps) {
  std::string text = kRun + "\n";
  for (int i = 1; i <= steps; ++i) {
    text +=
        R"({"type":"step","global_rank":0,"step":)" + std::to_string(i) +
        R"(,"ts":1764662400.5,"events":{"input_wait":{"cpu_ms":1.2,"gpu_ms":1.25},"h2d":{"cpu_ms":0.1,"gpu_ms":0.4},"forward":{"cpu_ms":3.0,"gpu_ms":3.1},"backward":{"cpu_ms":6.0,"gpu_ms":6.5},"optimizer_step":{"cpu_ms":1.5,"gpu_ms":1.25},"traced_step_time":{"cpu_ms":12.0,"gpu_ms":12.5}}})"
        "\n";
  }
  return text;
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "traceml_jsonl_reader_" + name;
}

TEST(JsonlReaderTest, FileLargerThanAReadChunk) {
  const std::string path = temp_path("big.jsonl");
  const int steps = 6000;  // ~2.3 MB: lines straddle the 1 MiB chunk boundaries
  {
    std::ofstream out(path, std::ios::binary);
    out << big_text(steps)
        << R"({"type":"step","global_rank":0,"step":1,"ts":1,"events":{"h2d":{"cpu_ms":-7}}})";
  }
  try {
    read_telemetry_jsonl(path);
    FAIL() << "no error";
  } catch (const TelemetryError& e) {
    // Header + 6000 steps, then the bad line (no trailing newline) is line 6002.
    EXPECT_EQ(std::string(e.what()),
              path + ":6002: 'events.h2d.cpu_ms' must be a finite number >= 0, got -7");
  }
  {
    std::ofstream out(path, std::ios::binary);
    out << big_text(steps);
  }
  const ReadResult r = read_telemetry_jsonl(path);
  ASSERT_EQ(r.telemetry.steps.size(), static_cast<std::size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    ASSERT_EQ(r.telemetry.steps[static_cast<std::size_t>(i)].step, i + 1);
  }
  EXPECT_EQ(r.telemetry.steps.back().events.gpu_ms(Event::TracedStepTime), 12.5);
  std::remove(path.c_str());
}

/// A step line of exactly `bytes` bytes (padded by an unknown key).
std::string step_line_of(std::size_t bytes) {
  const std::string head = R"({"type":"step","global_rank":0,"step":1,"ts":1,"note":")";
  const std::string tail = R"(","events":{"forward":{"cpu_ms":4}}})";
  return head + std::string(bytes - head.size() - tail.size(), 'a') + tail;
}

const std::string kTooLong =
    ": line longer than 1048576 bytes, the longest this format allows (records are a few "
    "hundred bytes; a line this long is not telemetry)";

TEST(JsonlReaderTest, LineOfTheLongestLengthIsRead) {
  const std::string path = temp_path("long_line.jsonl");
  {
    // Longest line without and with "\r\n", then a line after them: the read
    // buffer holds one longest line and its line end, no more.
    std::ofstream out(path, std::ios::binary);
    out << kRun << "\n"
        << step_line_of(kMaxLineBytes) << "\n"
        << step_line_of(kMaxLineBytes) << "\r\n"
        << kStep << "\n";
  }
  const ReadResult r = read_telemetry_jsonl(path);
  ASSERT_EQ(r.telemetry.steps.size(), 3u);
  EXPECT_EQ(r.telemetry.steps[0].events.cpu_ms(Event::Forward), 4.0);
  EXPECT_EQ(r.telemetry.steps[1].events.cpu_ms(Event::Forward), 4.0);
  EXPECT_EQ(r.telemetry.steps[2].events.gpu_ms(Event::Forward), 3.1);
  EXPECT_EQ(parse(with_run(step_line_of(kMaxLineBytes))).telemetry.steps.size(), 1u);
  std::remove(path.c_str());
}

TEST(JsonlReaderErrorTest, LineLongerThanTheLimitIsRefused) {
  const std::string path = temp_path("too_long.jsonl");
  const auto refused = [&](const std::string& text) {
    {
      std::ofstream out(path, std::ios::binary);
      out << text;
    }
    try {
      read_telemetry_jsonl(path);
    } catch (const TelemetryError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // One byte over, with and without a newline, and as the header itself.
  EXPECT_EQ(refused(kRun + "\n" + step_line_of(kMaxLineBytes + 1) + "\n"), path + ":2" + kTooLong);
  EXPECT_EQ(refused(kRun + "\n" + step_line_of(kMaxLineBytes + 1)), path + ":2" + kTooLong);
  EXPECT_EQ(refused(kRun + "\n\n" + step_line_of(kMaxLineBytes + 1) + "\r\n"),
            path + ":3" + kTooLong);
  EXPECT_EQ(refused(std::string(5'000'000, '[') + "\n"), path + ":1" + kTooLong);
  // The same limit in memory.
  EXPECT_EQ(error_of(with_run(step_line_of(kMaxLineBytes + 1))), "t.jsonl:2" + kTooLong);
  EXPECT_EQ(error_of(with_run(std::string(5'000'000, '['))), "t.jsonl:2" + kTooLong);
  std::remove(path.c_str());
}

// ---------------------------------------------------------------------------
// The sample files of tests/golden/data (make_samples.py) read cleanly and have
// the shape their names promise.

ReadResult read_sample(const std::string& name) {
  return read_telemetry_jsonl(std::string(TRACEML_TEST_DATA_DIR) + "/golden/data/" + name);
}

/// Mean of `clock` of event `e` over the steps of `rank` (0 when never measured).
double mean_ms(const model::Telemetry& t, int rank, Event e, bool gpu) {
  double sum = 0.0;
  int n = 0;
  for (const auto& s : t.steps) {
    if (s.global_rank != rank) continue;
    sum += (gpu ? s.events.gpu_ms(e) : s.events.cpu_ms(e)).value_or(0.0);
    ++n;
  }
  return n == 0 ? 0.0 : sum / n;
}

TEST(JsonlSampleTest, SingleInputBound) {
  const ReadResult r = read_sample("single_input_bound.jsonl");
  const auto& t = r.telemetry;
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(t.run.strategy, Strategy::SingleProcess);
  EXPECT_EQ(t.run.world_size, 1);
  ASSERT_EQ(t.ranks.size(), 1u);
  EXPECT_EQ(t.steps.size(), 60u);
  EXPECT_EQ(t.steps.front().step, 1);
  EXPECT_EQ(t.steps.back().step, 60);
  EXPECT_TRUE(t.step_memory.empty());
  for (const auto& s : t.steps) {
    for (std::size_t i = 0; i < model::kEventCount; ++i) {
      EXPECT_EQ(s.events.gpu_ms(static_cast<Event>(i)), std::nullopt);  // CPU clock only
    }
    EXPECT_FALSE(s.events.has(Event::H2D));
  }
  ASSERT_FALSE(t.system.empty());
  for (const auto& s : t.system)
    EXPECT_TRUE(s.gpus.empty());
  ASSERT_FALSE(t.process.empty());
  for (const auto& p : t.process)
    EXPECT_FALSE(p.gpu.has_value());
  // Input wait ~30% of step time (input + traced).
  const double input = mean_ms(t, 0, Event::InputWait, false);
  const double traced = mean_ms(t, 0, Event::TracedStepTime, false);
  EXPECT_NEAR(input / (input + traced), 0.30, 0.02);
}

TEST(JsonlSampleTest, DdpInputStraggler) {
  const ReadResult r = read_sample("ddp_input_straggler.jsonl");
  const auto& t = r.telemetry;
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(t.run.strategy, Strategy::Ddp);
  EXPECT_EQ(t.ranks.size(), 2u);
  EXPECT_EQ(t.steps.size(), 240u);  // 120 steps x 2 ranks
  EXPECT_EQ(t.step_memory.size(), 240u);
  for (const auto& s : t.steps) {
    EXPECT_TRUE(s.events.gpu_ms(Event::InputWait).has_value());  // GPU clock everywhere
    EXPECT_TRUE(s.events.gpu_ms(Event::TracedStepTime).has_value());
  }
  const double wait0 = mean_ms(t, 0, Event::InputWait, true);
  const double wait1 = mean_ms(t, 1, Event::InputWait, true);
  EXPECT_NEAR(wait0, 2.0, 0.5);
  EXPECT_NEAR(wait1, 40.0, 2.0);
  // Rank 0 waits for rank 1 in backward's all-reduce: longer by the input difference.
  const double extra_backward =
      mean_ms(t, 0, Event::Backward, true) - mean_ms(t, 1, Event::Backward, true);
  EXPECT_NEAR(extra_backward, wait1 - wait0, 0.5);
  for (const auto& s : t.system) {
    ASSERT_EQ(s.gpus.size(), 2u);
    EXPECT_NEAR(*s.gpus[0].util_percent, 40.0, 5.0);
  }
  for (const auto& p : t.process)
    ASSERT_TRUE(p.gpu && p.gpu->allocated_bytes);
}

TEST(JsonlSampleTest, Ddp4Balanced) {
  const ReadResult r = read_sample("ddp4_balanced.jsonl");
  const auto& t = r.telemetry;
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(t.run.world_size, 4);
  ASSERT_EQ(t.ranks.size(), 4u);
  EXPECT_EQ(t.ranks[3].node_rank, 1);
  EXPECT_EQ(t.ranks[3].local_rank, 1);
  EXPECT_EQ(t.steps.size(), 1200u);  // 300 steps x 4 ranks
  for (int rank = 0; rank < 4; ++rank) {
    const double input = mean_ms(t, rank, Event::InputWait, true);
    const double traced = mean_ms(t, rank, Event::TracedStepTime, true);
    const double compute = mean_ms(t, rank, Event::Forward, true) +
                           mean_ms(t, rank, Event::Backward, true) +
                           mean_ms(t, rank, Event::OptimizerStep, true);
    const double h2d = mean_ms(t, rank, Event::H2D, true);
    const double step = input + traced;
    EXPECT_NEAR(compute / step, 0.85, 0.01) << rank;
    EXPECT_NEAR((traced - h2d - compute) / step, 0.05, 0.01) << rank;
    EXPECT_NEAR(input / step, 0.03, 0.005) << rank;
  }
  int nodes_seen[2] = {0, 0};
  for (const auto& s : t.system) {
    ++nodes_seen[s.node_rank];
    ASSERT_EQ(s.gpus.size(), 2u);
    EXPECT_NEAR(*s.gpus[1].util_percent, 90.0, 5.0);
  }
  EXPECT_EQ(nodes_seen[0], nodes_seen[1]);
  EXPECT_GT(nodes_seen[0], 0);
}

}  // namespace
}  // namespace traceml::store
