// Parsing of the /proc files the sampler reads, and one live reading.
#include <gtest/gtest.h>

#include "runtime/proc_sampler.hpp"

namespace traceml::runtime {
namespace {

TEST(ProcParse, HostCpuLine) {
  // user nice system idle iowait irq softirq steal = 100 0 50 800 50 0 0 0:
  // total 1000, idle + iowait 850, busy 150.
  const auto t = parse_proc_stat_cpu("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->total, 1000u);
  EXPECT_EQ(t->busy, 150u);
  EXPECT_FALSE(parse_proc_stat_cpu("intr 1 2 3"));
  EXPECT_FALSE(parse_proc_stat_cpu("cpu 1 2"));
}

TEST(ProcParse, ProcessTicksCountFromTheLastParenthesis) {
  // A command name with spaces and a ')' in it must not shift the fields.
  const std::string line =
      "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 4 0 100 1000 50";
  EXPECT_EQ(parse_pid_stat_cpu_ticks(line), 325u);  // utime 250 + stime 75
  EXPECT_FALSE(parse_pid_stat_cpu_ticks("1234 (x) S 1 2"));
  EXPECT_FALSE(parse_pid_stat_cpu_ticks("no parenthesis"));
}

TEST(ProcParse, Meminfo) {
  const std::string text = "MemTotal:       16384 kB\nMemFree: 1024 kB\nMemAvailable:    8192 kB\n";
  EXPECT_EQ(parse_meminfo_bytes(text, "MemTotal"), 16384.0 * 1024);
  EXPECT_EQ(parse_meminfo_bytes(text, "MemAvailable"), 8192.0 * 1024);
  EXPECT_FALSE(parse_meminfo_bytes(text, "Mem"));  // a prefix is not a key
  EXPECT_FALSE(parse_meminfo_bytes(text, "SwapTotal"));
}

TEST(ProcSampler, LiveReadingsOfThisProcessAndHost) {
  ProcSampler sampler;
  // Burn some CPU so that the process rate is above zero.
  volatile double x = 0;
  for (int i = 0; i < 20'000'000; ++i)
    x = x + 1e-9 * i;
  const model::ProcessSample p = sampler.sample_process(3, 1.5);
  EXPECT_EQ(p.global_rank, 3);
  EXPECT_DOUBLE_EQ(p.ts, 1.5);
  ASSERT_TRUE(p.cpu_percent);
  EXPECT_GT(*p.cpu_percent, 0.0);
  ASSERT_TRUE(p.rss_bytes);
  EXPECT_GT(*p.rss_bytes, 1e6);  // a test binary holds more than a megabyte
  ASSERT_TRUE(p.ram_total_bytes);
  EXPECT_GT(*p.ram_total_bytes, *p.rss_bytes);
  ASSERT_TRUE(p.cpu_cores);
  EXPECT_GE(*p.cpu_cores, 1);
  EXPECT_FALSE(p.gpu);

  const model::SystemSample s = sampler.sample_system(0, 1.5);
  ASSERT_TRUE(s.ram_total_bytes);
  ASSERT_TRUE(s.ram_used_bytes);
  EXPECT_LT(*s.ram_used_bytes, *s.ram_total_bytes);
  EXPECT_TRUE(s.gpus.empty());
  if (s.cpu_percent) {
    EXPECT_GE(*s.cpu_percent, 0.0);
    EXPECT_LE(*s.cpu_percent, 100.0);
  }
}

}  // namespace
}  // namespace traceml::runtime
