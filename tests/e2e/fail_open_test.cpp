// Fail-open: whatever happens to the collector, the training program finishes
// with the same exit code and the same output, and says so once. And whatever
// arrives on the collector's port, the run's results stay correct.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../support/examples.hpp"
#include "../support/subprocess.hpp"
#include "collector/collector.hpp"
#include "launcher/free_port.hpp"
#include "timing/cuda_api.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();

/// The quickstart's output with tracing off: what every traced run must print too.
std::string untraced_output(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/env", "TRACEML_DISABLED=1", kExamples + "/quickstart"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = run_process(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return r.out;
}

/// What a rank prints once when it cannot time on a GPU.
const std::string kCpuClockNote = "traceml: no GPU: timing on the CPU clock\n";

std::size_t lines_with(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

TEST(FailOpen, UnreachableCollectorSameOutputAWarningAndTheCount) {
  const std::vector<std::string> args = {"--steps", "200"};
  const std::string expected = untraced_output(args);
  const auto port = launcher::pick_free_port();  // nobody listens there
  ASSERT_TRUE(port);
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "TRACEML_AGGREGATOR_PORT=" + std::to_string(*port),
                                   "TRACEML_RUN_TOKEN=t", kExamples + "/quickstart"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = run_process(argv);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, expected);
  // One warning when it began, one with the count at the end: nothing of
  // this run reached a collector.
  EXPECT_EQ(lines_with(r.err, "traceml: warning: "), 2u) << r.err;
  // Besides the warnings, the one-time note that there is no GPU clock, exactly
  // when this machine has no usable CUDA device.
  const bool has_gpu = timing::load_cuda_api().api.has_value();
  EXPECT_EQ(lines_with(r.err, kCpuClockNote), has_gpu ? 0u : 1u) << r.err;
  EXPECT_EQ(std::size_t(std::count(r.err.begin(), r.err.end(), '\n')),
            2u + lines_with(r.err, kCpuClockNote))
      << r.err;
  EXPECT_NE(r.err.find("cannot reach the collector"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" telemetry records were dropped on this rank and counted"),
            std::string::npos)
      << r.err;
}

TEST(FailOpen, CollectorGoneMidRunSameOutputAWarningAndTheCount) {
  const std::vector<std::string> args = {"--steps", "3000"};
  const std::string expected = untraced_output(args);
  TempDir dir;
  collector::CollectorOptions o;
  o.token = "tok";
  o.run_dir = (dir.path() / "run").string();
  auto collector = std::make_unique<collector::Collector>(o);
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "TRACEML_AGGREGATOR_PORT=" + std::to_string(collector->port()),
                                   "TRACEML_RUN_TOKEN=tok", kExamples + "/quickstart"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess child(argv);
  // Let it connect and send steps, then take the collector away. The
  // collector's own view decides, not the program's output: on a loaded
  // machine the program could print before its sender had connected.
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (collector->live(1).latest.telemetry.steps.empty() &&
         std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(20ms);
  const bool mid_run = child.out_so_far().find("done") == std::string::npos;
  const auto report = collector->finish(std::chrono::steady_clock::now());
  collector.reset();
  const auto r = child.wait();
  EXPECT_EQ(report.ranks_connected, 1);
  EXPECT_GT(report.records, 0);
  EXPECT_TRUE(mid_run) << "the program ended before the collector went away";
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, expected);
  // One warning when the connection broke; one with the count at the end
  // when records were left undelivered (none when the program had finished
  // its steps by then).
  const std::size_t counted =
      lines_with(r.err, " telemetry records were dropped on this rank and counted");
  EXPECT_LE(counted, 1u) << r.err;
  EXPECT_EQ(lines_with(r.err, "traceml: warning: lost the connection"), 1u) << r.err;
  EXPECT_EQ(lines_with(r.err, "traceml: warning: "), 1u + counted) << r.err;
  EXPECT_LE(lines_with(r.err, kCpuClockNote), 1u) << r.err;
  EXPECT_EQ(std::size_t(std::count(r.err.begin(), r.err.end(), '\n')),
            1u + counted + lines_with(r.err, kCpuClockNote))
      << r.err;
}

/// Connects to 127.0.0.1:port, retrying until `deadline`; -1 on failure.
int connect_to(std::uint16_t port, std::chrono::steady_clock::time_point deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    close(fd);
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

void send_and_close(int fd, const std::vector<std::uint8_t>& bytes) {
  if (fd < 0) return;
  (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::this_thread::sleep_for(100ms);
  close(fd);
}

TEST(FailOpen, GarbageOversizedAndWrongTokenConnectionsAreDroppedRunStaysCorrect) {
  TempDir logs;
  const auto port = launcher::pick_free_port();
  ASSERT_TRUE(port);
  ChildProcess run({kCli, "run", "--logs-dir", logs.path().string(), "--run-name", "noisy",
                    "--aggregator-port", std::to_string(*port), "--", kExamples + "/input_bound",
                    "--steps", "80"});
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  const std::string garbage = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  send_and_close(connect_to(*port, deadline),
                 std::vector<std::uint8_t>(garbage.begin(), garbage.end()));
  // A header announcing a 4 GiB frame.
  send_and_close(connect_to(*port, deadline),
                 {0xFF, 0xFF, 0xFF, 0xFF, 0x02, transport::kCodecVersion});
  transport::Hello wrong;
  wrong.token = "not-this-run";
  const auto hello =
      transport::encode_frame(transport::FrameType::Hello, transport::encode_hello(wrong));
  ASSERT_TRUE(hello);
  send_and_close(connect_to(*port, deadline), *hello);
  const auto r = run.wait();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json summary =
      Json::parse(read_file(logs.path() / "noisy" / "final_summary.json"), nullptr, false);
  const Json manifest =
      Json::parse(read_file(logs.path() / "noisy" / "manifest.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << r.err;
  EXPECT_EQ(summary["primary_diagnosis"]["kind"], "INPUT_BOUND");
  EXPECT_EQ(manifest["telemetry"]["rejected_connections"], 3) << manifest.dump();
  EXPECT_EQ(manifest["telemetry"]["ranks_connected"], 1);
  EXPECT_EQ(summary["tracer"]["rejected_connections"], 3);
  EXPECT_EQ(summary["tracer"]["records_dropped"], 0);
}

TEST(FailOpen, InterruptStopsTheRanksAndStillWritesTheSummary) {
  TempDir logs;
  ChildProcess run({kCli,
                    "run",
                    "--logs-dir",
                    logs.path().string(),
                    "--run-name",
                    "ctrl_c",
                    "--aggregator-port",
                    "0",
                    "--master-port",
                    "0",
                    "--nproc-per-node",
                    "2",
                    "--grace-period-sec",
                    "2",
                    "--interval",
                    "0.2",
                    "--",
                    kExamples + "/ddp",
                    "--steps",
                    "1000000",
                    "--log-every",
                    "20"});
  const auto give_up = std::chrono::steady_clock::now() + 90s;
  // Wait until training is under way (a few progress lines) and the ranks'
  // senders have had several intervals (0.2 s) to ship steps, then Ctrl-C.
  // Printing alone proves nothing was sent: on a loaded machine a rank
  // printed its lines before its first flush, and the SIGTERM that follows
  // Ctrl-C ends it before it sends (a rank has no signal handler to flush).
  while (lines_with(run.out_so_far(), "[rank0]: ") < 3 &&
         std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(100ms);
  std::this_thread::sleep_for(2s);
  run.signal(SIGINT);
  const auto r = run.wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  const Json summary =
      Json::parse(read_file(logs.path() / "ctrl_c" / "final_summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << r.err;
  EXPECT_EQ(summary["run"]["status"], "interrupted");
  EXPECT_GT(summary["tracer"]["records_received"].get<int>(), 0);
  const Json manifest =
      Json::parse(read_file(logs.path() / "ctrl_c" / "manifest.json"), nullptr, false);
  EXPECT_EQ(manifest["status"], "interrupted");
  EXPECT_EQ(manifest["interrupt_signal"], SIGINT);
}

}  // namespace
}  // namespace traceml::testing
