// The run database: read(write(x)) == x for every record kind with every
// optional present and absent, arrival order, refusal of an existing file, and
// the one-line errors for files that are not a run database.
#include "store/run_db.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <string>

#include "../support/step_blocks.hpp"
#include "../support/subprocess.hpp"
#include "../support/telemetry_compare.hpp"

namespace traceml::store {
namespace {

namespace fs = std::filesystem;
using model::Event;
using testing::expect_same;
using testing::expect_same_list;
using testing::TempDir;

const std::string kHint = "(no telemetry.db found? pass the run directory written by traceml run)";
const fs::path kData = fs::path(TRACEML_TEST_DATA_DIR) / "data";

/// Each rank's steps in the order they came: what the run database keeps
/// (a rank's steps are stored in blocks, and blocks of different ranks are
/// stored as they fill, so the order across ranks is not kept).
template <class Steps>
std::map<int, std::vector<model::StepRecord>> per_rank(const Steps& steps) {
  std::map<int, std::vector<model::StepRecord>> out;
  for (const auto& r : steps)
    out[r.global_rank].push_back(r);
  return out;
}

template <class A, class B>
void expect_same_steps_per_rank(const A& expected, const B& read) {
  const auto a = per_rank(expected);
  const auto b = per_rank(read);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [rank, steps] : a) {
    ASSERT_EQ(b.count(rank), 1u) << "rank " << rank;
    expect_same_list(steps, b.at(rank), "steps of rank " + std::to_string(rank));
  }
}

model::StepRecord step(int rank, std::int64_t id, double ts, double base) {
  model::StepRecord r;
  r.global_rank = rank;
  r.step = id;
  r.ts = ts;
  for (std::size_t e = 0; e < model::kEventCount; ++e)
    r.events.set(static_cast<Event>(e), {base + double(e), base + double(e) + 0.5});
  return r;
}

/// A run that uses every record kind and every optional in both states.
RunData rich_run() {
  RunData d;
  model::Telemetry& t = d.telemetry;
  t.run.run_name = "rich 'run' \"quoted\" r\xc3\xa9sum\xc3\xa9";
  t.run.world_size = 3;
  t.run.strategy = model::Strategy::Fsdp;

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

  // Every event with both clocks; a measured 0.0 next to absent values.
  t.steps.push_back(step(0, 1, 1764662400.1234567, 1.25));
  model::StepGpuActivity activity;  // GPU activity records on the first step only
  activity.h2d_ms = 1.5;
  activity.h2d_bytes = 1.28e8;
  activity.h2d_copies = 4000000000LL;  // beyond 32 bits: stored as an integer
  activity.h2d_pageable_copies = 3;
  activity.h2d_pageable_bytes = 9.6e7;
  activity.collective_ms = 1e-300;
  activity.busy_ms = 0.0;
  t.steps.edit(t.steps.size() - 1, [&](model::StepRecord& r) {
    r.gpu_activity = activity;
    // Begins as a rank records them, and one from a file that is not a
    // whole nanosecond; a thread other than the first.
    r.events.set_begin(Event::InputWait, -1250000 * 1e-6);
    r.events.set_begin(Event::Forward, 0.1234567891);
    r.thread = 4;
  });
  model::StepRecord mixed;
  mixed.global_rank = 2;
  mixed.step = 1;
  mixed.ts = 1764662400.5;
  mixed.events.set(Event::InputWait, {0.0, std::nullopt});          // cpu only, measured zero
  mixed.events.set(Event::Forward, {std::nullopt, 12.0});           // gpu only
  mixed.events.set(Event::Backward, {std::nullopt, std::nullopt});  // present, no clock
  mixed.events.set(Event::TracedStepTime, {1e-300, 1e300});         // extreme doubles
  t.steps.push_back(mixed);
  model::StepRecord empty;  // no event at all
  empty.global_rank = 2;
  empty.step = 9007199254740993;  // beyond double precision: stored as an integer
  empty.ts = 0.0;
  t.steps.push_back(empty);

  model::StepMemoryRecord mem_full{0, 1, "cuda:0", 1.5e9, 2.0e9};
  model::StepMemoryRecord mem_none{2, 1, "", std::nullopt, std::nullopt};
  model::StepMemoryRecord mem_half{2, 2, "cpu", std::nullopt, 0.0};
  t.step_memory = {mem_full, mem_none, mem_half};

  model::SystemSample sys_gpus;
  sys_gpus.node_rank = 0;
  sys_gpus.ts = 1764662401.0;
  sys_gpus.cpu_percent = 37.5;
  sys_gpus.ram_used_bytes = 1.0e10;
  sys_gpus.ram_total_bytes = 6.4e10;
  model::GpuSample g0;
  g0.index = 0;
  g0.util_percent = 99.0;
  g0.mem_used_bytes = 7.0e10;
  g0.mem_total_bytes = 8.0e10;
  g0.temperature_c = 71.0;
  g0.power_w = 400.5;
  g0.power_limit_w = 700.0;
  model::GpuSample g3;  // every optional absent, index not its position
  g3.index = 3;
  sys_gpus.gpus = {g0, g3};
  model::SystemSample sys_bare;
  sys_bare.node_rank = 1;
  sys_bare.ts = 1764662402.0;
  t.system = {sys_gpus, sys_bare};

  model::ProcessSample p_gpu;
  p_gpu.global_rank = 0;
  p_gpu.ts = 1764662401.5;
  p_gpu.cpu_percent = 250.0;
  p_gpu.cpu_cores = 16;
  p_gpu.rss_bytes = 3.0e9;
  p_gpu.ram_total_bytes = 6.4e10;
  p_gpu.gpu = model::ProcessGpu{0, 1.0e9, 2.0e9, 8.0e10};
  model::ProcessSample p_gpu_empty;  // a GPU whose values are all absent
  p_gpu_empty.global_rank = 2;
  p_gpu_empty.ts = 1764662401.6;
  p_gpu_empty.gpu = model::ProcessGpu{};
  model::ProcessSample p_none;
  p_none.global_rank = 2;
  p_none.ts = 1764662401.7;
  p_none.cpu_percent = 0.0;
  t.process = {p_gpu, p_gpu_empty, p_none};

  model::TracerStats ts0;
  ts0.global_rank = 0;
  ts0.pid = 4242;
  ts0.strategy = "fsdp";
  ts0.steps_recorded = 100;
  ts0.records_sent = 250;
  ts0.records_dropped = 3;
  ts0.overhead_ns_per_step = 812.5;
  model::TracerStats ts1 = ts0;
  ts1.global_rank = 1;
  ts1.pid = 4243;
  ts1.overhead_ns_per_step = std::nullopt;
  ts0.gpu = model::TracerStats::Gpu{1, 95, 5, 12};  // rank 0 timed on cuda:1
  ts0.activity_lost = 7;
  d.deliveries = {RankDelivery{0, 247, true, ts0}, RankDelivery{1, 0, false, ts1},
                  RankDelivery{2, 7, false, std::nullopt}};
  d.rejected = {RejectedConnection{1764662403.25, "127.0.0.1:50000", "wrong run token"},
                RejectedConnection{1764662404.0, "[::1]:1", ""}};
  return d;
}

/// Writes `d` in an order unlike the read order (deliveries and ranks
/// descending) so that the reader's sorting is exercised.
void write_run(const std::string& path, const RunData& d) {
  RunDbWriter w(path);
  w.add(d.telemetry.run);
  for (auto it = d.telemetry.ranks.rbegin(); it != d.telemetry.ranks.rend(); ++it)
    w.add(*it);
  for (const auto& r : d.telemetry.steps)
    w.add(r);
  for (const auto& r : d.telemetry.step_memory)
    w.add(r);
  for (const auto& s : d.telemetry.system)
    w.add(s);
  for (const auto& s : d.telemetry.process)
    w.add(s);
  for (auto it = d.deliveries.rbegin(); it != d.deliveries.rend(); ++it)
    w.add(*it);
  for (const auto& c : d.rejected)
    w.add(c);
  w.flush();
}

void expect_same_run(const RunData& a, const RunData& b) {
  expect_same(a.telemetry, b.telemetry);
  ASSERT_EQ(a.deliveries.size(), b.deliveries.size());
  for (std::size_t i = 0; i < a.deliveries.size(); ++i) {
    const std::string where = "deliveries[" + std::to_string(i) + "]";
    EXPECT_EQ(a.deliveries[i].global_rank, b.deliveries[i].global_rank) << where;
    EXPECT_EQ(a.deliveries[i].records_received, b.deliveries[i].records_received) << where;
    EXPECT_EQ(a.deliveries[i].clean_end, b.deliveries[i].clean_end) << where;
    ASSERT_EQ(a.deliveries[i].tracer.has_value(), b.deliveries[i].tracer.has_value()) << where;
    if (a.deliveries[i].tracer)
      expect_same(*a.deliveries[i].tracer, *b.deliveries[i].tracer, where);
  }
  ASSERT_EQ(a.rejected.size(), b.rejected.size());
  for (std::size_t i = 0; i < a.rejected.size(); ++i) {
    EXPECT_EQ(a.rejected[i].ts, b.rejected[i].ts);
    EXPECT_EQ(a.rejected[i].peer, b.rejected[i].peer);
    EXPECT_EQ(a.rejected[i].reason, b.rejected[i].reason);
  }
}

std::string error_of(const std::string& path) {
  try {
    read_run_db(path);
  } catch (const RunDbError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RunDb, RoundTripsEveryRecordKindAndEveryOptional) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  const RunData written = rich_run();
  write_run(path, written);
  const RunData read = read_run_db(path);
  expect_same_run(written, read);
  // Spot checks that do not go through the helper: absent stays absent, zero stays zero.
  ASSERT_EQ(read.telemetry.steps.size(), 3u);
  const auto& mixed = read.telemetry.steps[1].events;
  EXPECT_EQ(mixed.cpu_ms(Event::InputWait), 0.0);
  EXPECT_EQ(mixed.gpu_ms(Event::InputWait), std::nullopt);
  EXPECT_TRUE(mixed.has(Event::Backward));
  EXPECT_EQ(mixed.cpu_ms(Event::Backward), std::nullopt);
  EXPECT_FALSE(mixed.has(Event::H2D));
  EXPECT_EQ(read.telemetry.steps[0].events.begin_ms(Event::Forward), 0.1234567891);
  EXPECT_EQ(read.telemetry.steps[0].thread, 4);
  EXPECT_EQ(mixed.begin_mask(), 0u);
  EXPECT_EQ(read.telemetry.steps[2].step, 9007199254740993);
  EXPECT_EQ(read.telemetry.steps[2].events.event_mask(), 0u);
  EXPECT_EQ(read.telemetry.run.strategy, model::Strategy::Fsdp);
  ASSERT_EQ(read.telemetry.ranks.size(), 2u);
  EXPECT_EQ(read.telemetry.ranks[0].hostname, "node-0.cluster");
  EXPECT_EQ(read.telemetry.ranks[1].hostname, std::nullopt);
  ASSERT_EQ(read.deliveries.size(), 3u);
  EXPECT_EQ(read.deliveries[0].global_rank, 0);
  EXPECT_EQ(read.deliveries[2].tracer.has_value(), false);
}

TEST(RunDb, RunWithoutRunInfoOrWorldSizeReadsDefaults) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  {
    RunDbWriter w(path);
    model::RunInfo info;
    info.run_name = "";
    info.strategy = model::Strategy::SingleProcess;
    w.add(info);
    // A later set_run_info replaces the first.
    info.run_name = "second";
    w.add(info);
  }
  const RunData d = read_run_db(path);
  EXPECT_EQ(d.telemetry.run.run_name, "second");
  EXPECT_EQ(d.telemetry.run.world_size, std::nullopt);
  EXPECT_EQ(d.telemetry.run.strategy, model::Strategy::SingleProcess);
  EXPECT_TRUE(d.telemetry.steps.empty());
  EXPECT_TRUE(d.deliveries.empty());

  TempDir dir2;
  const std::string path2 = (dir2.path() / kRunDbFileName).string();
  { RunDbWriter w(path2); }
  const RunData empty = read_run_db(path2);
  EXPECT_EQ(empty.telemetry.run.run_name, "");
  EXPECT_EQ(empty.telemetry.run.world_size, std::nullopt);
}

TEST(RunDb, KeepsEachRanksArrivalOrderAndDuplicateSteps) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  std::vector<model::StepRecord> steps = {step(1, 5, 10.0, 1.0), step(0, 7, 9.0, 2.0),
                                          step(1, 5, 11.0, 3.0),  // duplicate (1, 5), later wins
                                          step(0, 2, 12.0, 4.0), step(3, 1, 8.0, 5.0)};
  std::vector<model::StepMemoryRecord> mem = {
      {1, 5, "cuda:1", 1.0, 2.0}, {1, 5, "cuda:1", 3.0, 4.0}, {0, 1, "cuda:0", 5.0, std::nullopt}};
  std::vector<model::ProcessSample> proc(3);
  proc[0].global_rank = 2;
  proc[0].ts = 3.0;
  proc[1].global_rank = 0;
  proc[1].ts = 1.0;
  proc[2].global_rank = 2;
  proc[2].ts = 2.0;
  {
    RunDbWriter w(path);
    // Interleave kinds: each table keeps its own arrival order.
    for (std::size_t i = 0; i < steps.size(); ++i) {
      w.add(steps[i]);
      if (i < mem.size()) w.add(mem[i]);
      if (i < proc.size()) w.add(proc[i]);
    }
    EXPECT_EQ(w.records(), 11);
  }
  const RunData d = read_run_db(path);
  // Steps: one block per rank, stored at flush() in rank order.
  const std::vector<model::StepRecord> by_rank = {steps[1], steps[3], steps[0], steps[2], steps[4]};
  expect_same_list(by_rank, d.telemetry.steps, "steps");
  expect_same_list(mem, d.telemetry.step_memory, "step_memory");
  expect_same_list(proc, d.telemetry.process, "process");
  EXPECT_EQ(d.telemetry.steps[3].events.cpu_ms(Event::InputWait), 3.0);
}

TEST(RunDb, LaterRankIdentityAndDeliveryReplaceEarlierOnes) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  {
    RunDbWriter w(path);
    model::RankIdentity a;
    a.global_rank = 1;
    a.hostname = "old";
    w.add(a);
    a.hostname = "new";
    a.local_rank = 1;
    w.add(a);
    w.add(RankDelivery{1, 10, false, std::nullopt});
    w.add(RankDelivery{1, 20, true, std::nullopt});
  }
  const RunData d = read_run_db(path);
  ASSERT_EQ(d.telemetry.ranks.size(), 1u);
  EXPECT_EQ(d.telemetry.ranks[0].hostname, "new");
  EXPECT_EQ(d.telemetry.ranks[0].local_rank, 1);
  ASSERT_EQ(d.deliveries.size(), 1u);
  EXPECT_EQ(d.deliveries[0].records_received, 20);
  EXPECT_TRUE(d.deliveries[0].clean_end);
}

TEST(RunDb, FlushMakesRecordsVisibleWhileWriting) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  RunDbWriter w(path);
  w.add(step(0, 1, 1.0, 1.0));
  // Not committed yet: a reader sees the empty schema.
  EXPECT_EQ(read_run_db(path).telemetry.steps.size(), 0u);
  w.flush();
  EXPECT_EQ(read_run_db(path).telemetry.steps.size(), 1u);
  w.flush();  // nothing buffered: a no-op
  EXPECT_EQ(w.records(), 1);
}

TEST(RunDb, CommitsInBatchesAcrossManyRecords) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  constexpr int kSteps = 25003;  // crosses two automatic commits and leaves a partial batch
  {
    RunDbWriter w(path);
    for (int i = 1; i <= kSteps; ++i)
      w.add(step(i % 4, i, double(i), double(i) * 0.001));
    // The commit at 20,000 records holds the blocks that had filled by then:
    // 4 of 1,024 rows for each of the 4 ranks. The rest is in a transaction
    // not committed yet, or in blocks still filling.
    EXPECT_EQ(read_run_db(path).telemetry.steps.size(), 16u * 1024u);
  }  // the destructor stores the partial blocks and commits
  const RunData d = read_run_db(path);
  ASSERT_EQ(d.telemetry.steps.size(), std::size_t(kSteps));
  std::map<int, std::int64_t> last_step;
  for (const auto& r : d.telemetry.steps) {
    ASSERT_EQ(r.global_rank, r.step % 4) << r.step;
    ASSERT_EQ(r.events.gpu_ms(Event::OptimizerStep), double(r.step) * 0.001 + 4.5) << r.step;
    ASSERT_GT(r.step, last_step[r.global_rank]) << "each rank's steps in arrival order";
    last_step[r.global_rank] = r.step;
  }
}

TEST(RunDb, StepsAreStoredInBlocksOfARanksRows) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  {
    RunDbWriter w(path);
    for (int i = 1; i <= 2500; ++i)
      w.add(step(5, i, double(i), 1.0));
    w.add(step(2, 1, 1.0, 1.0));
    w.flush();  // stores the open blocks, whatever their size
    w.add(step(5, 2501, 2501.0, 1.0));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT global_rank, rows, min_step, max_step FROM step_blocks "
                               "ORDER BY id",
                               -1, &q, nullptr),
            SQLITE_OK);
  std::vector<std::string> blocks;
  while (sqlite3_step(q) == SQLITE_ROW)
    blocks.push_back(std::to_string(sqlite3_column_int(q, 0)) + ":" +
                     std::to_string(sqlite3_column_int(q, 1)) + ":" +
                     std::to_string(sqlite3_column_int64(q, 2)) + "-" +
                     std::to_string(sqlite3_column_int64(q, 3)));
  sqlite3_finalize(q);
  sqlite3_close(db);
  const std::vector<std::string> expected = {"5:1024:1-1024", "5:1024:1025-2048", "2:1:1-1",
                                             "5:452:2049-2500", "5:1:2501-2501"};
  EXPECT_EQ(blocks, expected);
  EXPECT_EQ(read_run_db(path).telemetry.steps.size(), 2502u);
}

TEST(RunDb, ManyRanksHoldAtMostEightMebibytesOfOpenBlocks) {
  // 300 ranks x 600 steps, about 19 MiB encoded: the writer stores every
  // open block whenever they hold 8 MiB together, long before a rank fills
  // one. Without that limit each rank's 600 rows would be one block at flush.
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  std::vector<model::StepRecord> steps;
  for (int i = 1; i <= 600; ++i)
    for (int rank = 0; rank < 300; ++rank)
      steps.push_back(step(rank, i, double(i), 1.0));
  {
    RunDbWriter w(path);
    for (const auto& r : steps)
      w.add(r);
    w.flush();
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT COUNT(*), MAX(rows), SUM(rows) FROM step_blocks", -1, &q,
                               nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_GE(sqlite3_column_int(q, 0), 600);
  EXPECT_LE(sqlite3_column_int(q, 1), 300);
  EXPECT_EQ(sqlite3_column_int(q, 2), 300 * 600);
  sqlite3_finalize(q);
  sqlite3_close(db);
  expect_same_steps_per_rank(steps, read_run_db(path).telemetry.steps);
}

TEST(RunDb, GpuActivityAndGpuOnlyTimingsRoundTripThroughFullAndPartialBlocks) {
  // 2,100 steps of two ranks: a full block and a partial one each.
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  std::vector<model::StepRecord> steps;
  for (int i = 1; i <= 2100; ++i) {
    model::StepRecord r;
    r.global_rank = i % 2;
    r.step = i;
    r.ts = double(i);
    // H2D caught on the GPU with no H2D phase marked: no CPU value.
    r.events.set(Event::H2D, {std::nullopt, 0.25 * i});
    r.events.set(Event::TracedStepTime, {10.0, 10.5});
    if (i % 3 != 0) {
      model::StepGpuActivity a;
      a.h2d_ms = 0.25 * i;
      a.h2d_bytes = 1e6 * i;
      a.h2d_copies = i;
      a.h2d_pageable_copies = i / 2;
      a.h2d_pageable_bytes = 5e5 * i;
      a.collective_ms = 0.5 * i;
      a.busy_ms = 9.0;
      r.gpu_activity = a;
    }
    steps.push_back(r);
  }
  {
    RunDbWriter w(path);
    for (const auto& r : steps)
      w.add(r);
  }
  const RunData d = read_run_db(path);
  expect_same_steps_per_rank(steps, d.telemetry.steps);
  const auto ranks = per_rank(d.telemetry.steps);
  const model::StepRecord& first = ranks.at(1).at(0);  // step 1
  EXPECT_EQ(first.events.cpu_ms(Event::H2D), std::nullopt);
  EXPECT_EQ(first.events.gpu_ms(Event::H2D), 0.25);
  ASSERT_TRUE(first.gpu_activity.has_value());
  EXPECT_EQ(first.gpu_activity->h2d_pageable_copies, 0);
  EXPECT_FALSE(ranks.at(1).at(1).gpu_activity.has_value());  // step 3: no records
}

TEST(RunDb, RefusesAnExistingFile) {
  TempDir dir;
  const fs::path path = dir.path() / kRunDbFileName;
  std::ofstream(path) << "precious";
  try {
    RunDbWriter w(path.string());
    FAIL() << "an existing file was opened for writing";
  } catch (const RunDbError& e) {
    EXPECT_EQ(std::string(e.what()),
              path.string() +
                  ": a run database already exists there (a run directory is never overwritten; "
                  "choose a new run name or directory)");
  }
  EXPECT_EQ(testing::read_file(path), "precious");

  // An existing run database too, which stays readable and unchanged.
  const fs::path db = dir.path() / "other.db";
  write_run(db.string(), rich_run());
  EXPECT_THROW(RunDbWriter w(db.string()), RunDbError);
  expect_same_run(rich_run(), read_run_db(db.string()));
}

TEST(RunDb, UncreatableFileIsOneLineError) {
  TempDir dir;
  const std::string path = (dir.path() / "missing-dir" / kRunDbFileName).string();
  try {
    RunDbWriter w(path);
    FAIL();
  } catch (const RunDbError& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ": cannot create the run database: No such file or directory");
  }
}

TEST(RunDb, MissingFileIsOneLineError) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  EXPECT_EQ(error_of(path), path + ": no such file " + kHint);
}

TEST(RunDb, DirectoryNamesTheFileToPass) {
  TempDir dir;
  EXPECT_EQ(error_of(dir.path().string()), dir.path().string() +
                                               ": is a directory, not a run database (pass " +
                                               (dir.path() / kRunDbFileName).string() + ")");
}

TEST(RunDb, TextFileIsNotARunDatabase) {
  TempDir dir;
  const std::string path = (dir.path() / "run.jsonl").string();
  std::ofstream(path) << "{\"type\":\"run\",\"format\":\"traceml-telemetry\",\"version\":1}\n"
                      << std::string(4096, 'x') << "\n";
  EXPECT_EQ(error_of(path), path + ": not a traceml run database " + kHint);

  const std::string empty = (dir.path() / "empty.db").string();
  std::ofstream(empty).flush();
  EXPECT_EQ(error_of(empty), empty + ": not a traceml run database " + kHint);
}

/// Runs SQL on a database file with the plain SQLite API.
void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST(RunDb, OtherSqliteDatabaseIsNotARunDatabase) {
  TempDir dir;
  const std::string path = (dir.path() / "other.sqlite").string();
  exec_sql(path, "CREATE TABLE meta (key TEXT, value TEXT); INSERT INTO meta VALUES ('a', 'b');");
  EXPECT_EQ(error_of(path), path + ": not a traceml run database " + kHint);

  const std::string plain = (dir.path() / "plain.sqlite").string();
  exec_sql(plain, "CREATE TABLE t (x INTEGER);");
  EXPECT_EQ(error_of(plain), plain + ": not a traceml run database " + kHint);
}

TEST(RunDb, VersionOneFileWithoutGpuActivityColumnsReadsWithoutActivity) {
  // A run database written before the GPU activity columns existed: schema
  // version 1, its steps table without them.
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  fs::copy_file(kData / "format_v1.db", path);
  RunData d = read_run_db(path);
  exec_sql(path,
           "ALTER TABLE steps DROP COLUMN has_gpu_activity; ALTER TABLE steps DROP COLUMN "
           "activity_h2d_ms; ALTER TABLE steps DROP COLUMN activity_h2d_bytes; ALTER TABLE steps "
           "DROP COLUMN activity_h2d_copies; ALTER TABLE steps DROP COLUMN "
           "activity_h2d_pageable_copies; ALTER TABLE steps DROP COLUMN "
           "activity_h2d_pageable_bytes; ALTER TABLE steps DROP COLUMN activity_collective_ms; "
           "ALTER TABLE steps DROP COLUMN activity_busy_ms;");
  const RunData read = read_run_db(path);
  bool had_activity = false;
  d.telemetry.steps.edit([&](model::StepRecord& r) {
    had_activity = had_activity || r.gpu_activity.has_value();
    r.gpu_activity.reset();
  });
  EXPECT_TRUE(had_activity);
  expect_same_run(d, read);
}

TEST(RunDb, OtherSchemaVersionIsRefused) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  write_run(path, rich_run());
  exec_sql(path, "UPDATE meta SET value = '3' WHERE key = 'schema_version';");
  EXPECT_EQ(error_of(path), path +
                                ": run database schema version 3, this traceml reads versions 1 "
                                "to 2 (use the traceml release that wrote it)");
  // A version-2 file that says 1 has no steps table to read.
  exec_sql(path, "UPDATE meta SET value = '1' WHERE key = 'schema_version';");
  EXPECT_EQ(error_of(path), path + ": not a traceml run database " + kHint);
}

TEST(RunDb, FileWithoutDeliveryGpuColumnsReadsWithoutGpuClock) {
  // Written before the tracer's GPU clock columns existed.
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  RunData d = rich_run();
  write_run(path, d);
  exec_sql(path,
           "ALTER TABLE deliveries DROP COLUMN gpu_device; ALTER TABLE deliveries DROP COLUMN "
           "gpu_steps_resolved; ALTER TABLE deliveries DROP COLUMN gpu_steps_unresolved; ALTER "
           "TABLE deliveries DROP COLUMN gpu_scopes_skipped; ALTER TABLE deliveries DROP COLUMN "
           "activity_lost;");
  const RunData read = read_run_db(path);
  for (auto& x : d.deliveries) {
    if (!x.tracer) continue;
    x.tracer->gpu.reset();
    x.tracer->activity_lost.reset();
  }
  expect_same_run(d, read);
}

/// The error of reading `path` ("" when it reads), without the path.
std::string read_error(const std::string& path) {
  try {
    read_run_db(path);
  } catch (const RunDbError& e) {
    const std::string what = e.what();
    // The path is the temporary directory's: compare what follows it.
    return what.rfind(path + ": ", 0) == 0 ? what.substr(path.size() + 2) : "(other file) " + what;
  }
  return "";
}

/// The error of reading rich_run() after `sql` changed its file ("" when it
/// reads). Its steps are two blocks: block 1 holds rank 0's step, block 2
/// rank 2's two steps.
std::string error_after(const std::string& sql) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  write_run(path, rich_run());
  exec_sql(path, sql);
  return read_error(path);
}

/// The same for tests/data/format_v1.db (schema version 1, a row per step;
/// step 2 has GPU activity with h2d_bytes 1.28e8).
std::string error_after_v1(const std::string& sql) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  fs::copy_file(kData / "format_v1.db", path);
  exec_sql(path, sql);
  return read_error(path);
}

/// The error of reading rich_run() after `edit` changed records of block `id`.
std::string error_after_edit(std::int64_t id,
                             const std::function<void(std::int64_t, model::StepRecord&)>& edit) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  write_run(path, rich_run());
  testing::rewrite_step_block(path, id, edit);
  return read_error(path);
}

TEST(RunDbCorrupt, NumberColumnsHoldingTextOrBlobsAreRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"UPDATE step_blocks SET rows = 'two' WHERE id = 2",
       "table step_blocks, block 2: column 'rows' holds text \"two\", not an integer"},
      {"UPDATE step_blocks SET global_rank = 4294967296 WHERE id = 1",
       "table step_blocks, block 1: column 'global_rank' holds 4294967296, beyond the range of a "
       "32-bit integer"},
      {"UPDATE step_blocks SET data = 'abc' WHERE id = 1",
       "table step_blocks, block 1: column 'data' holds text \"abc\", not a blob"},
      {"UPDATE step_blocks SET data = 7 WHERE id = 2",
       "table step_blocks, block 2: column 'data' holds the number 7, not a blob"},
      {"UPDATE run_info SET world_size = 'three'",
       "table run_info, row 1: column 'world_size' holds text \"three\", not an integer"},
      {"UPDATE system_samples SET cpu_percent = 'high' WHERE id = 1",
       "table system_samples, row 1: column 'cpu_percent' holds text \"high\", not a number"},
      {"UPDATE process_samples SET has_gpu = 'yes' WHERE id = 1",
       "table process_samples, row 1: column 'has_gpu' holds text \"yes\", not an integer"},
      {"UPDATE deliveries SET gpu_steps_resolved = 'x' WHERE global_rank = 0",
       "table deliveries, row 0: column 'gpu_steps_resolved' holds text \"x\", not an integer"},
      {"UPDATE rejected_connections SET ts = 'yesterday' WHERE id = 1",
       "table rejected_connections, row 1: column 'ts' holds text \"yesterday\", not a number"},
      // Long text is cut in the message; control characters are escaped.
      {"UPDATE system_samples SET ts = replace(hex(zeroblob(50)), '0', 'x') WHERE id = 1",
       "table system_samples, row 1: column 'ts' holds text "
       "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\", not a number"},
      {"UPDATE system_samples SET ts = 'a' || char(27) || '[2J' WHERE id = 1",
       "table system_samples, row 1: column 'ts' holds text \"a\\x1b[2J\", not a number"},
  };
  for (const auto& [sql, message] : cases)
    EXPECT_EQ(error_after(sql), message) << sql;
}

TEST(RunDbCorrupt, VersionOneStepRowsAreCheckedColumnByColumn) {
  const std::pair<const char*, const char*> cases[] = {
      {"UPDATE steps SET forward_cpu_ms = 'abc' WHERE id = 1",
       "table steps, row 1: column 'forward_cpu_ms' holds text \"abc\", not a number"},
      {"UPDATE steps SET ts = x'00ff' WHERE id = 3",
       "table steps, row 3: column 'ts' holds a blob of 2 bytes, not a number"},
      {"UPDATE steps SET step = 'seven' WHERE id = 2",
       "table steps, row 2: column 'step' holds text \"seven\", not an integer"},
      {"UPDATE steps SET step = 1.5 WHERE id = 2",
       "table steps, row 2: column 'step' holds 1.5, not an integer"},
      {"UPDATE steps SET global_rank = 4294967296 WHERE id = 2",
       "table steps, row 2: column 'global_rank' holds 4294967296, beyond the range of a 32-bit "
       "integer"},
      {"UPDATE steps SET event_mask = 64 WHERE id = 3",
       "table steps, row 3: column 'event_mask' holds 64, which sets bits beyond the 6 events"},
      {"UPDATE steps SET activity_busy_ms = NULL WHERE id = 2",
       "table steps, row 2: column 'activity_busy_ms' is NULL, not a number"},
      {"UPDATE steps SET backward_gpu_ms = -1.5 WHERE id = 1",
       "table steps, row 1: 'events.backward.gpu_ms' must be a finite number >= 0, got -1.5"},
      {"UPDATE steps SET forward_cpu_ms = 9e999 WHERE id = 1",
       "table steps, row 1: 'events.forward.cpu_ms' must be a finite number >= 0, got inf"},
      {"UPDATE steps SET ts = -1e999 WHERE id = 2",
       "table steps, row 2: 'ts' must be a finite number >= 0, got -inf"},
      {"UPDATE steps SET global_rank = -7 WHERE id = 2",
       "table steps, row 2: 'global_rank' must be an integer >= 0, got -7"},
      {"UPDATE steps SET step = 0 WHERE id = 2",
       "table steps, row 2: 'step' must be an integer >= 1, got 0"},
      {"UPDATE steps SET activity_h2d_pageable_bytes = 2e8 WHERE id = 2",
       "table steps, row 2: 'gpu_activity.h2d_pageable_bytes' (2e+08) must not exceed "
       "'gpu_activity.h2d_bytes' (1.28e+08)"},
  };
  for (const auto& [sql, message] : cases)
    EXPECT_EQ(error_after_v1(sql), message) << sql;
  // Column affinity stores '7' as the integer 7: a number, as "7" is not in JSONL.
  EXPECT_EQ(error_after_v1("UPDATE steps SET step = '7' WHERE id = 2"), "");
}

TEST(RunDbCorrupt, DamagedStepBlocksAreRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"UPDATE step_blocks SET rows = 0 WHERE id = 1",
       "table step_blocks, block 1: 'rows' must be between 1 and 65536, got 0"},
      {"UPDATE step_blocks SET rows = 65537 WHERE id = 1",
       "table step_blocks, block 1: 'rows' must be between 1 and 65536, got 65537"},
      {"UPDATE step_blocks SET rows = rows + 1 WHERE id = 1",
       "table step_blocks, block 1, record 2: the block ends inside the record"},
      {"UPDATE step_blocks SET rows = 1 WHERE id = 2",
       "table step_blocks, block 2: 17 bytes follow record 1, the last that the block's 'rows' "
       "counts"},
      {"UPDATE step_blocks SET data = CAST(data || x'00' AS BLOB) WHERE id = 2",
       "table step_blocks, block 2: 1 byte follows record 2, the last that the block's 'rows' "
       "counts"},
      {"UPDATE step_blocks SET data = substr(data, 1, 20) WHERE id = 1",
       "table step_blocks, block 1, record 1: the block ends inside the record"},
      {"UPDATE step_blocks SET data = x'' WHERE id = 1",
       "table step_blocks, block 1: the block is empty (no codec byte)"},
      {"UPDATE step_blocks SET data = CAST(x'03' || substr(data, 2) AS BLOB) WHERE id = "
       "1",
       "table step_blocks, block 1: block codec 3, this traceml reads 1 to 2 (use the traceml "
       "release that wrote it)"},
      {"UPDATE step_blocks SET global_rank = -7 WHERE id = 1",
       "table step_blocks, block 1, record 1: 'global_rank' must be an integer >= 0, got -7"},
      // Codec 1: step delta 1, ts 0, then flags with bit 20 set (a begin,
      // which codec 1 did not have).
      {"UPDATE step_blocks SET data = x'01020000000000000000808040', rows = 1 WHERE id = 1",
       "table step_blocks, block 1, record 1: its flags 1048576 set bits that block codec 1 does "
       "not define"},
      // Codec 2: the same with bit 27, beyond the 27 bits it defines.
      {"UPDATE step_blocks SET data = x'0202000000000000000080808040', rows = 1 WHERE id = 1",
       "table step_blocks, block 1, record 1: its flags 134217728 set bits that block codec 2 "
       "does not define"},
      // Flags: a CPU value of input_wait, which the record does not have.
      {"UPDATE step_blocks SET data = x'0102000000000000000040000000000000f03f', rows = 1 "
       "WHERE id = 1",
       "table step_blocks, block 1, record 1: its flags give a clock value to an event that it "
       "does not record"},
      {"UPDATE step_blocks SET data = x'01ffffffffffffffffff7f', rows = 1 WHERE id = 1",
       "table step_blocks, block 1, record 1: a number in the record does not fit 64 bits"},
  };
  for (const auto& [sql, message] : cases)
    EXPECT_EQ(error_after(sql), message) << sql;
}

TEST(RunDbCorrupt, ValuesTheCollectorWouldRefuseAreRefused) {
  struct StepCase {
    std::int64_t block;
    std::function<void(std::int64_t, model::StepRecord&)> edit;
    const char* message;
  };
  const StepCase step_cases[] = {
      {1,
       [](std::int64_t, model::StepRecord& r) {
         r.events.set(Event::Backward, {1.0, -1.5});
       },
       "table step_blocks, block 1, record 1: 'events.backward.gpu_ms' must be a finite number "
       ">= 0, got -1.5"},
      {1,
       [](std::int64_t, model::StepRecord& r) {
         r.events.set(Event::Forward, {HUGE_VAL, std::nullopt});
       },
       "table step_blocks, block 1, record 1: 'events.forward.cpu_ms' must be a finite number >= "
       "0, got inf"},
      {1,
       [](std::int64_t, model::StepRecord& r) {
         r.events.set(Event::Forward, {NAN, 1.0});
       },
       "table step_blocks, block 1, record 1: 'events.forward.cpu_ms' must be a finite number >= "
       "0, got nan"},
      {2,
       [](std::int64_t i, model::StepRecord& r) {
         if (i == 2) r.ts = -HUGE_VAL;
       },
       "table step_blocks, block 2, record 2: 'ts' must be a finite number >= 0, got -inf"},
      {2,
       [](std::int64_t i, model::StepRecord& r) {
         if (i == 2) r.step = 0;
       },
       "table step_blocks, block 2, record 2: 'step' must be an integer >= 1, got 0"},
      {1, [](std::int64_t, model::StepRecord& r) { r.gpu_activity->h2d_pageable_bytes = 2e8; },
       "table step_blocks, block 1, record 1: 'gpu_activity.h2d_pageable_bytes' (2e+08) must not "
       "exceed 'gpu_activity.h2d_bytes' (1.28e+08)"},
  };
  for (const auto& c : step_cases)
    EXPECT_EQ(error_after_edit(c.block, c.edit), c.message);
  const std::pair<const char*, const char*> cases[] = {
      {"UPDATE ranks SET global_rank = -7 WHERE global_rank = 2",
       "table ranks, row -7: 'global_rank' must be an integer >= 0, got -7"},
      {"UPDATE ranks SET local_world_size = 0 WHERE global_rank = 0",
       "table ranks, row 0: 'local_world_size' must be an integer >= 1, got 0"},
      {"UPDATE run_info SET world_size = 0",
       "table run_info, row 1: 'world_size' must be an integer >= 1, got 0"},
      {"UPDATE step_memory SET peak_reserved_bytes = -1 WHERE id = 3",
       "table step_memory, row 3: 'peak_reserved_bytes' must be a finite number >= 0, got -1"},
      {"UPDATE system_samples SET node_rank = -1 WHERE id = 2",
       "table system_samples, row 2: 'node_rank' must be an integer >= 0, got -1"},
      {"UPDATE system_gpus SET util_percent = -5 WHERE id = 2",
       "table system_gpus, row 2: 'util_percent' must be a finite number >= 0, got -5"},
      {"UPDATE process_samples SET cpu_cores = 0 WHERE id = 1",
       "table process_samples, row 1: 'cpu_cores' must be an integer >= 1, got 0"},
      {"UPDATE process_samples SET gpu_reserved_bytes = -1 WHERE id = 1",
       "table process_samples, row 1: 'gpu.reserved_bytes' must be a finite number >= 0, got -1"},
      {"UPDATE deliveries SET records_dropped = -1 WHERE global_rank = 0",
       "table deliveries, row 0: 'records_dropped' must be an integer >= 0, got -1"},
      {"UPDATE deliveries SET records_received = -3 WHERE global_rank = 2",
       "table deliveries, row 2: 'records_received' must be an integer >= 0, got -3"},
  };
  for (const auto& [sql, message] : cases)
    EXPECT_EQ(error_after(sql), message) << sql;
}

TEST(RunDbCorrupt, NumbersStoredAsNumericTextOrIntegralRealsRead) {
  // Column affinity stores '2' as the integer 2 and 1.0 in an INTEGER column
  // as 1: both are numbers, as "7" is not but 2.0 is in JSONL.
  EXPECT_EQ(error_after("UPDATE step_blocks SET rows = '2' WHERE id = 2"), "");
  EXPECT_EQ(error_after("UPDATE step_blocks SET global_rank = 2.0 WHERE id = 2"), "");
  EXPECT_EQ(error_after("UPDATE system_samples SET cpu_percent = '12.5' WHERE id = 1"), "");
}

TEST(RunDbCorrupt, IllFormedOrLongTextIsRepairedAndCounted) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  write_run(path, rich_run());
  EXPECT_EQ(read_run_db(path).strings_repaired, 0);
  // A host name with an invalid byte and an ESC sequence; a device as a blob;
  // a device of 2,000 bytes; a run name cut inside a 2-byte character.
  exec_sql(path,
           "UPDATE ranks SET hostname = CAST(x'6e6f6465ff1b5b33316d' AS TEXT) WHERE global_rank "
           "= 0; UPDATE step_memory SET device = x'637564613a30' WHERE id = 2; UPDATE step_memory "
           "SET device = replace(hex(zeroblob(1000)), '0', 'd') WHERE id = 3; UPDATE run_info SET "
           "run_name = replace(hex(zeroblob(511)), '0', 'r') || 'r' || char(233);");
  const RunData d = read_run_db(path);
  EXPECT_EQ(d.strings_repaired, 3);
  // U+FFFD for the invalid byte; the ESC is valid UTF-8 and kept (printing
  // escapes it, JSON writes it as \u001b).
  EXPECT_EQ(d.telemetry.ranks[0].hostname, "node\xEF\xBF\xBD\x1b[31m");
  EXPECT_EQ(d.telemetry.step_memory[1].device, "cuda:0");
  EXPECT_EQ(d.telemetry.step_memory[2].device, std::string(1024, 'd'));
  EXPECT_EQ(d.telemetry.run.run_name, std::string(1023, 'r'));
}

// Not a benchmark (bench/ has one): prints the insert rate of step records so
// that a regression is visible in the test log. The bound only catches a
// pathological slowdown (e.g. a commit per record), never a loaded machine.
TEST(RunDb, StepInsertRate) {
  TempDir dir;
  const std::string path = (dir.path() / kRunDbFileName).string();
  constexpr int kSteps = 200000;
  std::vector<model::StepRecord> records;
  records.reserve(kSteps);
  for (int i = 0; i < kSteps; ++i)
    records.push_back(step(i % 8, i / 8 + 1, 1.7e9 + i * 0.01, double(i % 100)));
  const auto t0 = std::chrono::steady_clock::now();
  {
    RunDbWriter w(path);
    for (const auto& r : records)
      w.add(r);
    w.flush();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double rate = kSteps / s;
  std::cout << "[ rate     ] " << static_cast<long>(rate) << " step records/s (" << kSteps << " in "
            << s << " s)\n";
  RecordProperty("step_records_per_s", static_cast<int>(rate));
  EXPECT_GT(rate, 10000.0);
  EXPECT_EQ(read_run_db(path).telemetry.steps.size(), std::size_t(kSteps));
}

}  // namespace
}  // namespace traceml::store
