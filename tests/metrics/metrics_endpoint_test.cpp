// The metrics endpoint: what a scrape says of a snapshot (checked by
// Prometheus' own promtool), that it answers GET /metrics only, that a port
// in use is one line before anything, and that hostile clients (a huge
// request, a slow sender, idle connections, readers that never read) are
// cut while scrapes go on.
#include "metrics/metrics_endpoint.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../fuzz/metrics_invariants.hpp"
#include "../support/http_client.hpp"
#include "../support/live_status.hpp"
#include "../support/subprocess.hpp"

namespace traceml::metrics {
namespace {

using collector::RankCondition;
using namespace std::chrono_literals;
using testing::HttpReply;
using testing::Socket;

/// A run whose ranks spend `input_ms` of each `step_ms` waiting for input.
constexpr auto status_of = testing::live_status_of;

const RunLabels kRun{"demo-run", "9.9.9"};

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

/// promtool's verdict on `text`: "" when it passes, else what it said.
std::string promtool_problems(const std::string& text) {
  testing::TempDir dir;
  const auto file = dir.path() / "metrics.txt";
  std::ofstream(file) << text;
  const testing::ProcessResult r =
      testing::run_process({"/bin/sh", "-c", "promtool check metrics < '" + file.string() + "'"});
  return r.exit_code == 0 ? std::string()
                          : "exit " + std::to_string(r.exit_code) + ": " + r.out + r.err;
}

TEST(MetricsText, SaysEachRanksStepItsSplitItsStateAndTheRunsVerdict) {
  collector::LiveStatus st = status_of(2, 100, 30.0, 50.0);
  st.ranks[1].condition = RankCondition::Silent;
  st.ranks[1].quiet_s = 12.5;
  st.ranks[1].records_dropped = 7;
  model::Stall stall;
  stall.global_rank = 1;
  stall.kind = "silent";
  stall.step = 101;
  st.stalls.push_back(stall);
  st.invalid_records = 3;
  collector::LiveSnapshot s = collector::snapshot_of(st);
  s.world_size = 2;
  s.taken_unix = 1.8e9;
  s.counts.records_received = 400;
  const std::string text = exposition_text(s, kRun);

  EXPECT_TRUE(has_line(text, "traceml_run_info{run=\"demo-run\",version=\"9.9.9\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "# TYPE traceml_steps_total counter")) << text;
  EXPECT_TRUE(has_line(text, "traceml_steps_total{node=\"0\",rank=\"0\"} 100")) << text;
  EXPECT_TRUE(has_line(text, "traceml_world_size 2")) << text;
  EXPECT_TRUE(has_line(text, "traceml_ranks_connected 2")) << text;
  EXPECT_TRUE(has_line(text, "traceml_records_received_total 400")) << text;
  EXPECT_TRUE(has_line(text, "traceml_records_dropped_total 7")) << text;
  EXPECT_TRUE(has_line(text, "traceml_records_invalid_total 3")) << text;
  EXPECT_TRUE(has_line(text, "traceml_stalls_total 1")) << text;
  // 50 ms steps, 30 of them input wait: in seconds, and as shares adding to 1.
  EXPECT_TRUE(has_line(text, "traceml_step_median_seconds{node=\"0\",rank=\"0\"} 0.05")) << text;
  EXPECT_TRUE(has_line(text, "traceml_step_p95_seconds{node=\"0\",rank=\"0\"} 0.05")) << text;
  EXPECT_TRUE(
      has_line(text, "traceml_step_share_ratio{node=\"0\",rank=\"0\",part=\"input_wait\"} 0.6"))
      << text;
  EXPECT_TRUE(
      has_line(text, "traceml_step_share_ratio{node=\"0\",rank=\"0\",part=\"residual\"} 0.04"))
      << text;
  EXPECT_TRUE(
      has_line(text, "traceml_step_phase_seconds{node=\"0\",rank=\"0\",phase=\"input_wait\"} 0.03"))
      << text;
  // Rank 1 went silent and never came back: the hang, and whose.
  EXPECT_TRUE(has_line(text, "traceml_hang 1")) << text;
  EXPECT_TRUE(has_line(text, "traceml_rank_silent{node=\"0\",rank=\"1\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "traceml_rank_silent{node=\"0\",rank=\"0\"} 0")) << text;
  EXPECT_TRUE(has_line(text, "traceml_rank_hung{node=\"0\",rank=\"1\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "traceml_rank_last_heard_age_seconds{node=\"0\",rank=\"1\"} 12.5"))
      << text;
  EXPECT_TRUE(has_line(text, "traceml_rank_records_dropped_total{node=\"0\",rank=\"1\"} 7"))
      << text;
  EXPECT_NE(text.find("traceml_verdict_info{kind=\"INPUT_BOUND\",severity=\""), std::string::npos)
      << text;
  EXPECT_EQ(promtool_problems(text), "");

  // Once rank 1 runs again there is no hang.
  s.ranks[1].live.condition = RankCondition::Running;
  s.stalls[0].resumed = true;
  s.hung_rank = collector::hung_rank(s.stalls, s.ranks);
  const std::string again = exposition_text(s, kRun);
  EXPECT_TRUE(has_line(again, "traceml_hang 0")) << again;
  EXPECT_TRUE(has_line(again, "traceml_rank_hung{node=\"0\",rank=\"1\"} 0")) << again;
}

TEST(MetricsText, BeforeAnyStepTheVerdictSaysNoData) {
  const collector::LiveSnapshot empty;
  const std::string text = exposition_text(empty, kRun);
  EXPECT_NE(text.find("traceml_verdict_info{kind=\"NO_DATA\",severity=\"info\""), std::string::npos)
      << text;
  EXPECT_TRUE(has_line(text, "traceml_ranks_connected 0")) << text;
  EXPECT_EQ(text.find("rank=\""), std::string::npos) << "no rank yet\n" << text;
  EXPECT_EQ(promtool_problems(text), "");
}

/// An endpoint on a free port serving `channel`.
struct Served {
  std::shared_ptr<collector::SnapshotChannel> channel =
      std::make_shared<collector::SnapshotChannel>();
  MetricsEndpoint endpoint{"127.0.0.1", 0, channel, kRun};
};

TEST(MetricsEndpoint, AnswersGetMetricsExactlyFromTheLatestSnapshot) {
  Served s;
  ASSERT_GT(s.endpoint.port(), 0);
  EXPECT_EQ(s.endpoint.url(), "http://127.0.0.1:" + std::to_string(s.endpoint.port()) + "/metrics");
  HttpReply r = testing::http_request(s.endpoint.port(), "/metrics");
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_NE(r.head.find("Content-Type: text/plain"), std::string::npos) << r.head;
  EXPECT_NE(r.body.find("kind=\"NO_DATA\""), std::string::npos) << r.body;
  // A scrape reads the latest snapshot the collector published.
  auto next = std::make_shared<collector::LiveSnapshot>(
      collector::snapshot_of(status_of(2, 10, 5.0, 10.0)));
  s.channel->publish(next);
  r = testing::http_request(s.endpoint.port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(has_line(r.body, "traceml_steps_total{node=\"0\",rank=\"1\"} 10")) << r.body;
  EXPECT_EQ(promtool_problems(r.body), "");
  // Nothing else.
  for (const char* path : {"/", "/metrics/", "/metrics/x", "/metricsx", "/index.html", "/../etc"})
    EXPECT_EQ(testing::http_request(s.endpoint.port(), path).status, 404) << path;
  EXPECT_EQ(testing::http_request(s.endpoint.port(), "/metrics", "POST").status, 405);
  EXPECT_EQ(testing::http_request(s.endpoint.port(), "/metrics", "DELETE").status, 405);
}

TEST(MetricsEndpoint, APortInUseOrABadAddressIsOneLine) {
  Served first;
  try {
    MetricsEndpoint second("127.0.0.1", first.endpoint.port(), first.channel, kRun);
    FAIL() << "a second endpoint on port " << first.endpoint.port();
  } catch (const MetricsError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--metrics-port " + std::to_string(first.endpoint.port()) +
                        ": cannot listen on 127.0.0.1:"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("Address already in use"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_THROW(MetricsEndpoint("localhost", 0, first.channel, kRun), MetricsError);
  EXPECT_THROW(MetricsEndpoint("192.0.2.1", 0, first.channel, kRun), MetricsError)
      << "an address that is not this machine's";
  EXPECT_TRUE(bind_problem("0.0.0.0") == std::nullopt);
  EXPECT_TRUE(bind_problem("::1").has_value()) << "civetweb 1.15 of Debian listens on IPv4 only";
  EXPECT_TRUE(bind_problem("localhost").has_value());
  EXPECT_TRUE(bind_problem("").has_value());
  // The first still answers.
  EXPECT_EQ(testing::http_request(first.endpoint.port(), "/metrics").status, 200);
}

TEST(MetricsEndpoint, AHugeOrSlowRequestIsCutAndScrapesGoOn) {
  Served s;
  const std::uint16_t port = s.endpoint.port();
  {
    // A request line of 64 KiB: refused and closed, never read whole.
    Socket huge(port);
    ASSERT_TRUE(huge.ok());
    huge.send("GET /" + std::string(64 * 1024, 'a') + " HTTP/1.1\r\n\r\n");
    bool closed = false;
    const std::string reply = huge.read(10s, &closed);
    EXPECT_TRUE(closed);
    EXPECT_TRUE(reply.empty() || reply.rfind("HTTP/1.1 4", 0) == 0 ||
                reply.rfind("HTTP/1.0 4", 0) == 0)
        << reply.substr(0, 80);
  }
  {
    // A sender of a byte every 300 ms: cut once its 5 s are up.
    Socket slow(port);
    ASSERT_TRUE(slow.ok());
    const auto start = std::chrono::steady_clock::now();
    const std::string request =
        "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(200, 'x') + "\r\n\r\n";
    bool cut = false;
    for (char c : request) {
      if (!slow.send(std::string(1, c))) {
        cut = true;
        break;
      }
      bool closed = false;
      slow.read(300ms, &closed);
      if (closed) {
        cut = true;
        break;
      }
    }
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(cut);
    EXPECT_GE(took, 4.0);
    EXPECT_LE(took, 12.0);
  }
  {
    // A connection is closed after its reply: none stays open, idle.
    Socket idle(port);
    ASSERT_TRUE(idle.ok());
    idle.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string first = idle.read(5s, nullptr, 100);
    EXPECT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
    idle.read(1s);  // the rest of the reply
    const auto start = std::chrono::steady_clock::now();
    bool closed = false;
    idle.read(15s, &closed);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(closed);
    EXPECT_LE(took, 8.0);
  }
  EXPECT_EQ(testing::http_request(port, "/metrics").status, 200);
}

TEST(MetricsEndpoint, MoreIdleConnectionsThanWorkersOnlyDelayAScrape) {
  Served s;
  const std::uint16_t port = s.endpoint.port();
  // Three times the workers, saying nothing: each holds a worker for at
  // most the 5 s a request may take; the queue and the kernel hold the rest.
  std::vector<std::unique_ptr<Socket>> idle;
  for (int i = 0; i < 3 * kMaxConnections; ++i)
    idle.push_back(std::make_unique<Socket>(port));
  std::this_thread::sleep_for(200ms);
  const auto start = std::chrono::steady_clock::now();
  const HttpReply r = testing::http_request(port, "/metrics", "GET", 40s);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 200);
  EXPECT_LE(took, 25.0) << "three rounds of 5 s at most, and a margin";
  // Every idle one was closed by the endpoint.
  for (const auto& sock : idle) {
    bool closed = false;
    sock->read(1s, &closed);
    EXPECT_TRUE(closed);
  }
}

/// A reply's Content-Length, from its head; 0 when it has none.
std::size_t content_length(const std::string& reply) {
  const auto at = reply.find("Content-Length: ");
  return at == std::string::npos ? 0 : std::stoul(reply.substr(at + 16));
}

/// A socket with a small receive buffer that has asked for the metrics.
std::unique_ptr<Socket> asked(std::uint16_t port) {
  auto sock = std::make_unique<Socket>(port);
  const int small = 4096;
  ::setsockopt(sock->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sock->send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  return sock;
}

TEST(MetricsEndpoint, ReadersThatNeverReadOrTrickleHoldNoWorker) {
  Served s;
  // 1,024 ranks: a reply of some megabytes.
  s.channel->publish(std::make_shared<collector::LiveSnapshot>(
      collector::snapshot_of(status_of(1024, 2, 1.0, 10.0))));
  const std::uint16_t port = s.endpoint.port();
  // Twice the workers in readers that never read, and one that trickles (a
  // kilobyte every 300 ms: the whole reply would take it more than an hour).
  std::vector<std::unique_ptr<Socket>> stuck;
  for (int i = 0; i < 2 * kMaxConnections; ++i)
    stuck.push_back(asked(port));
  const std::unique_ptr<Socket> trickle = asked(port);
  std::string trickled;
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(300ms);
    trickled += trickle->read(50ms, nullptr, 1024);
  }
  ASSERT_GT(content_length(trickled), std::size_t(1) << 20) << trickled.substr(0, 200);
  EXPECT_LT(trickled.size(), content_length(trickled));
  // A scrape meanwhile is whole and in time: each reply went to the kernel's
  // send buffer, or was cut 5 s after its first byte, and freed its worker.
  const auto start = std::chrono::steady_clock::now();
  const HttpReply r = testing::http_request(port, "/metrics", "GET", 40s);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), content_length(r.head + "\r\n"));
  EXPECT_TRUE(has_line(r.body, "traceml_steps_total{node=\"0\",rank=\"1023\"} 2"));
  EXPECT_LE(took, 15.0);
}

/// The ```yaml blocks of docs/metrics.md, in order.
std::vector<std::string> documented_yaml() {
  std::ifstream in(std::filesystem::path(TRACEML_TEST_DATA_DIR).parent_path() / "docs" /
                   "metrics.md");
  std::vector<std::string> blocks;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (!inside && line == "```yaml") {
      inside = true;
      blocks.emplace_back();
    } else if (inside && line == "```") {
      inside = false;
    } else if (inside) {
      blocks.back() += line + "\n";
    }
  }
  return blocks;
}

// The scrape config and the alerting rules docs/metrics.md gives are what
// Prometheus takes (promtool).
TEST(MetricsDocs, TheScrapeConfigAndTheAlertRulesAreValid) {
  const std::vector<std::string> yaml = documented_yaml();
  ASSERT_EQ(yaml.size(), 2u) << "docs/metrics.md: a scrape config, then alerting rules";
  testing::TempDir dir;
  std::ofstream(dir.path() / "prometheus.yml") << yaml[0];
  std::ofstream(dir.path() / "rules.yml") << yaml[1];
  const testing::ProcessResult config = testing::run_process(
      {"/usr/bin/promtool", "check", "config", (dir.path() / "prometheus.yml").string()});
  EXPECT_EQ(config.exit_code, 0) << config.out << config.err;
  const testing::ProcessResult rules = testing::run_process(
      {"/usr/bin/promtool", "check", "rules", (dir.path() / "rules.yml").string()});
  EXPECT_EQ(rules.exit_code, 0) << rules.out << rules.err;
  EXPECT_NE(rules.out.find("SUCCESS: 3 rules found"), std::string::npos) << rules.out;
}

// fuzz_metrics' promises (tests/fuzz/metrics_invariants.hpp) on its corpus
// and on a fixed-seed loop of both halves, so that they hold without a fuzzer.
TEST(MetricsFuzzInvariants, HoldOnTheCorpusAndOnRandomInputs) {
  const std::filesystem::path corpus =
      std::filesystem::path(TRACEML_TEST_DATA_DIR) / "fuzz" / "corpus" / "fuzz_metrics";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    const std::string bytes = testing::read_file(entry.path());
    const auto why = fuzz::check_metrics_input(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                               bytes.size());
    EXPECT_FALSE(why) << entry.path() << ": " << *why;
    ++files;
  }
  EXPECT_GE(files, 5);
  // The checker itself can fail: a value that is no number, shares that do
  // not add up, a bad label.
  EXPECT_TRUE(fuzz::metrics_detail::check_text("traceml_x 1.5x\n"));
  EXPECT_TRUE(fuzz::metrics_detail::check_text("traceml_x{rank=0} 1\n"));
  EXPECT_TRUE(fuzz::metrics_detail::check_text(
      "traceml_step_share_ratio{node=\"\",rank=\"0\",part=\"h2d\"} 0.5\n"));
  EXPECT_FALSE(
      fuzz::metrics_detail::check_text("# TYPE traceml_x gauge\ntraceml_x{a=\"q\\\"\"} NaN\n"));
  // A real run's text, shares included, passes.
  const std::string real =
      exposition_text(collector::snapshot_of(status_of(3, 20, 4.0, 10.0)), kRun);
  EXPECT_NE(real.find("part=\"residual\""), std::string::npos);
  EXPECT_FALSE(fuzz::metrics_detail::check_text(real)) << real;
  std::mt19937 rng(35);
  for (int i = 0; i < 400; ++i) {
    std::vector<std::uint8_t> input(std::size_t(rng() % 600));
    for (auto& b : input)
      b = std::uint8_t(rng());
    if (!input.empty() && i % 10 != 0) input[0] &= 0xFE;  // mostly values: they are quick
    const auto why = fuzz::check_metrics_input(input.data(), input.size());
    EXPECT_FALSE(why) << "input " << i << ": " << *why;
  }
}

}  // namespace
}  // namespace traceml::metrics
