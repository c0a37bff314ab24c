// Collector throughput (docs/performance.md): a load generator of 64
// simulated ranks, each on its own TCP connection, sending step records as
// fast as the collector takes them, into a real run database. The figure is
// step records per second from the first connection to the last commit; the
// second argument runs a live view beside it, refreshing ten times a second
// (ten times `--mode live`'s rate). BM_LiveRefresh64Ranks is what one
// refresh of the live view costs on a run of 64 ranks x 20,000 steps.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../tests/support/http_client.hpp"
#include "analysis/step_median.hpp"
#include "collector/collector.hpp"
#include "collector/profile_requests.hpp"
#include "live/live_view.hpp"
#include "metrics/metrics_endpoint.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"
#include "transport/record_codec.hpp"
#include "transport/tcp_client.hpp"

namespace {

using namespace traceml;

std::vector<std::uint8_t> frame(transport::FrameType t, const std::vector<std::uint8_t>& payload) {
  return *transport::encode_frame(t, payload);
}

/// Where each phase began, as a rank of protocol 3 records it: the fetch
/// before the step, the phases one after the other. Nothing on a tree whose
/// steps have no begins (so that this file measures older trees too).
template <class Events>
auto add_begins(Events& ev, int) -> decltype(ev.set_begin(model::Event::Forward, 0.0), void()) {
  double at = 0.0;
  ev.set_begin(model::Event::InputWait, -1.25);
  for (std::size_t e = 1; e + 1 < model::kEventCount; ++e) {
    ev.set_begin(model::Event(e), at);
    at += 1.0 + double(e);
  }
}
template <class Events>
void add_begins(Events&, long) {}

/// One rank's whole stream: Hello, `steps` step records with every phase
/// timed (and, where the tree has them, their begins), Bye; pre-encoded so
/// that the generator costs little CPU.
std::vector<std::uint8_t> rank_stream(int rank, std::int64_t steps, const std::string& token) {
  std::vector<std::uint8_t> out;
  transport::Hello h;
  h.protocol_version = 3;  // written whole, nothing read back: no Verdict wanted
  h.token = token;
  h.identity.global_rank = rank;
  h.identity.world_size = 64;
  auto append = [&](const std::vector<std::uint8_t>& f) {
    out.insert(out.end(), f.begin(), f.end());
  };
  append(frame(transport::FrameType::Hello, transport::encode_hello(h)));
  for (std::int64_t s = 1; s <= steps; ++s) {
    model::StepRecord r;
    r.global_rank = rank;
    r.step = s;
    r.ts = 1.7e9 + double(s) * 0.01;
    for (std::size_t e = 0; e < model::kEventCount; ++e)
      r.events.set(model::Event(e), model::Timing{1.0 + double(e), std::nullopt});
    if (std::getenv("TRACEML_BENCH_NO_BEGINS") == nullptr) add_begins(r.events, 0);
    append(frame(transport::FrameType::Step, transport::encode(r)));
  }
  append(frame(transport::FrameType::Bye, {}));
  return out;
}

void BM_CollectorIngest64Ranks(benchmark::State& state) {
  constexpr int kRanks = 64;
  const std::int64_t steps = state.range(0);
  std::vector<std::vector<std::uint8_t>> streams;
  for (int r = 0; r < kRanks; ++r)
    streams.push_back(rank_stream(r, steps, "bench"));
  std::int64_t records = 0;
  double seconds = 0;
  for (auto _ : state) {
    const auto dir = std::filesystem::temp_directory_path() / "traceml_collector_bench";
    std::filesystem::remove_all(dir);
    collector::CollectorOptions o;
    o.token = "bench";
    o.run_dir = dir.string();
    o.run.world_size = kRanks;
    // A reader of the live snapshot (the view, or the metrics) makes the
    // collector take one each interval.
    if (state.range(1) != 0) o.snapshots = std::make_shared<collector::SnapshotChannel>();
    // The shortest snapshot period (two a second), as a 0.5 s --interval gives.
    o.interval_s = 0.5;
    const auto t0 = std::chrono::steady_clock::now();
    collector::Collector c(o);
    std::atomic<bool> sending{true};
    std::thread viewer;
    std::unique_ptr<metrics::MetricsEndpoint> endpoint;
    if (state.range(1) == 1) {
      // The live view refreshing ten times a second.
      viewer = std::thread([&] {
        while (sending.load()) {
          benchmark::DoNotOptimize(live::render_view(
              live::build_model(*c.latest_snapshot(), "bench", kRanks, 1.0), 160, 50, true));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      });
    } else if (state.range(1) == 2) {
      // The metrics endpoint, scraped ten times a second (Prometheus: once
      // every few seconds).
      endpoint = std::make_unique<metrics::MetricsEndpoint>("127.0.0.1", 0, o.snapshots,
                                                            metrics::RunLabels{"bench", "0"});
      viewer = std::thread([&] {
        while (sending.load()) {
          if (testing::http_request(endpoint->port(), "/metrics").status != 200)
            state.SkipWithError("a scrape failed");
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      });
    }
    std::vector<std::thread> senders;
    for (int r = 0; r < kRanks; ++r) {
      senders.emplace_back([&, r] {
        transport::TcpClient client;
        if (!client.connect("127.0.0.1", c.port(), std::chrono::seconds(10))) return;
        // Batches of ~64 KiB, as a rank's sender writes them.
        const auto& s = streams[std::size_t(r)];
        for (std::size_t at = 0; at < s.size(); at += 65536) {
          const std::size_t n = std::min<std::size_t>(65536, s.size() - at);
          if (!client.send_all(s.data() + at, n, std::chrono::seconds(30))) return;
        }
        client.close();
      });
    }
    for (auto& t : senders)
      t.join();
    sending = false;
    if (viewer.joinable()) viewer.join();
    const auto report =
        c.finish(std::chrono::steady_clock::now() + std::chrono::seconds(120), kRanks);
    const auto t1 = std::chrono::steady_clock::now();
    const double took = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(took);
    seconds += took;
    records += report.records;
    if (report.records != kRanks * steps) state.SkipWithError("records were lost");
    std::filesystem::remove_all(dir);
  }
  state.counters["step_records_per_s"] =
      benchmark::Counter(double(records), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CollectorIngest64Ranks)
    ->Args({4000, 0})
    ->Args({4000, 1})
    ->Args({4000, 2})
    // Seconds of ingest: several snapshots and dozens of scrapes each.
    ->Args({40000, 0})
    ->Args({40000, 2})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

/// One refresh of the live view, as `--mode live` does each second: the
/// collector's latest 100 rows per rank and where each rank is
/// (Collector::live), the verdict of the analysis on them, and the drawing.
void BM_LiveRefresh64Ranks(benchmark::State& state) {
  constexpr int kRanks = 64;
  constexpr std::int64_t kSteps = 20000;
  const auto dir = std::filesystem::temp_directory_path() / "traceml_live_bench";
  std::filesystem::remove_all(dir);
  collector::CollectorOptions o;
  o.token = "bench";
  o.run_dir = dir.string();
  o.run.world_size = kRanks;
  collector::Collector c(o);
  std::vector<std::thread> senders;
  for (int r = 0; r < kRanks; ++r) {
    senders.emplace_back([&, r] {
      const std::vector<std::uint8_t> s = rank_stream(r, kSteps, "bench");
      transport::TcpClient client;
      if (!client.connect("127.0.0.1", c.port(), std::chrono::seconds(10))) return;
      if (!client.send_all(s.data(), s.size(), std::chrono::seconds(60))) return;
      client.close();
    });
  }
  for (auto& t : senders)
    t.join();
  c.stop_ingest(std::chrono::steady_clock::now() + std::chrono::seconds(60), kRanks);
  std::size_t lines = 0;
  for (auto _ : state) {
    const live::LiveModel m =
        live::build_model(collector::snapshot_of(c.live()), "bench", kRanks, 1.0);
    if (m.verdict.empty() || m.ranks.size() != kRanks)
      state.SkipWithError("no verdict, or ranks lost");
    lines += live::render_view(m, 160, 80, true).size();
  }
  benchmark::DoNotOptimize(lines);
  c.finish(std::chrono::steady_clock::now());
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_LiveRefresh64Ranks)->Unit(benchmark::kMillisecond);

/// The latest 100 steps of `ranks` ranks, as the collector's board copies
/// them every board interval.
model::Telemetry latest_rows(int ranks) {
  model::Telemetry t;
  for (int r = 0; r < ranks; ++r)
    for (std::int64_t n = 1; n <= collector::kLiveRows; ++n) {
      model::StepRecord s;
      s.global_rank = r;
      s.step = n;
      s.ts = 1.8e9 + double(n);
      const double jitter = double((n * 7 + r) % 10) * 0.1;
      s.events.set(model::Event::InputWait, {0.5, std::nullopt});
      s.events.set(model::Event::Forward, {2.0 + jitter, std::nullopt});
      s.events.set(model::Event::Backward, {3.0, std::nullopt});
      s.events.set(model::Event::TracedStepTime, {6.0 + jitter, std::nullopt});
      t.steps.push_back(s);
    }
  return t;
}

/// What the board interval already does with those rows: each rank's
/// median step (the stall rules' yardstick). The yardstick of the next.
void BM_BoardMedians1024Ranks(benchmark::State& state) {
  const model::Telemetry t = latest_rows(1024);
  std::size_t n = 0;
  for (auto _ : state)
    n += analysis::median_step_ms(t).size();
  benchmark::DoNotOptimize(n);
}
BENCHMARK(BM_BoardMedians1024Ranks)->Unit(benchmark::kMillisecond);

/// The ranks of latest_rows(ranks) as the live board has them: running.
collector::LiveStatus live_status(int ranks) {
  collector::LiveStatus status;
  status.latest.telemetry = latest_rows(ranks);
  for (int r = 0; r < ranks; ++r) {
    collector::RankLive l;
    l.global_rank = r;
    l.node_rank = r / 8;
    l.condition = collector::RankCondition::Running;
    l.max_step = collector::kLiveRows;
    status.ranks.push_back(l);
  }
  return status;
}

/// The live snapshot the collector's writer takes once an interval when
/// the live view or the metrics endpoint reads it (collector::snapshot_of:
/// each rank's row and the verdict on its latest 100 steps), at 1,024 ranks.
void BM_LiveSnapshot1024Ranks(benchmark::State& state) {
  const collector::LiveStatus status = live_status(1024);
  std::size_t rows = 0;
  for (auto _ : state) {
    const collector::LiveSnapshot snap = collector::snapshot_of(status);
    if (!snap.verdict || snap.ranks.size() != 1024)
      state.SkipWithError("no verdict, or ranks lost");
    rows += snap.ranks.size();
  }
  benchmark::DoNotOptimize(rows);
}
BENCHMARK(BM_LiveSnapshot1024Ranks)->Unit(benchmark::kMillisecond);

/// A scrape's work at 1,024 ranks: the snapshot's metrics as text (on the
/// endpoint's worker thread; the collector does nothing).
void BM_MetricsText1024Ranks(benchmark::State& state) {
  const collector::LiveSnapshot snap = collector::snapshot_of(live_status(1024));
  std::size_t bytes = 0;
  for (auto _ : state)
    bytes += metrics::exposition_text(snap, {"bench", "0"}).size();
  state.counters["bytes"] = double(bytes) / double(state.iterations());
}
BENCHMARK(BM_MetricsText1024Ranks)->Unit(benchmark::kMillisecond);

/// `--profile auto`'s check on the same rows, every board interval: each
/// rank's slow turn (medians of its recent and earlier steps) and the
/// causes among them; no rank is slow, as on a healthy run.
void BM_AutoProfileCheck1024Ranks(benchmark::State& state) {
  const model::Telemetry t = latest_rows(1024);
  collector::ProfileAsking asking;
  asking.auto_steps = 10;
  collector::ProfileRequests requests(asking);
  std::size_t asked = 0;
  double now = 0.0;
  for (auto _ : state)
    asked += requests.check(t, {}, now += 1.0).size();
  if (asked != 0) state.SkipWithError("a healthy run was asked for a profile");
}
BENCHMARK(BM_AutoProfileCheck1024Ranks)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
