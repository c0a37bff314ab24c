// End-to-end: `traceml run --metrics-port` as a team's Prometheus sees it. A
// real 2-rank data-parallel training (rank 1 waits for its input), scraped
// twice and checked by promtool, then scraped by a real Prometheus server
// whose HTTP API gives both ranks' series back; hostile clients (a huge
// request, more idle connections than workers, readers that never read)
// while the run goes, which neither stops the endpoint nor changes the
// run's verdict; the same in --mode live; a rank stopped mid-run named hung
// within seconds; a port in use and bad options refused with one line
// before anything exists.
#include <gtest/gtest.h>

#include <signal.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "../support/examples.hpp"
#include "../support/http_client.hpp"
#include "../support/json_file.hpp"
#include "../support/rank_pid.hpp"
#include "../support/subprocess.hpp"
#include "../support/traceml_run.hpp"
#include "launcher/free_port.hpp"
#include "served.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Json = nlohmann::json;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();

/// The endpoint's port, from the line `traceml run` prints; 0 when it did
/// not say within `timeout`.
std::uint16_t metrics_port(const ChildProcess& run, std::chrono::seconds timeout) {
  const std::regex line("metrics for Prometheus at http://127\\.0\\.0\\.1:([0-9]+)/metrics");
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    std::smatch m;
    const std::string err = run.err_so_far();
    if (std::regex_search(err, m, line)) return std::uint16_t(std::stoi(m[1]));
    std::this_thread::sleep_for(100ms);
  }
  return 0;
}

/// A sample's value from exposition text: `series` is the name and labels as
/// written ("traceml_steps_total{node=\"0\",rank=\"1\"}"); -1 when absent.
double sample(const std::string& text, const std::string& series) {
  const auto at = ("\n" + text).find("\n" + series + " ");
  if (at == std::string::npos) return -1.0;
  return std::stod(text.substr(at + series.size() + 1));
}

std::string rank_series(const char* name, int rank) {
  return std::string(name) + "{node=\"0\",rank=\"" + std::to_string(rank) + "\"}";
}

/// Scrapes until rank 1 has finished steps (the ranks connect after their
/// rendezvous), or `timeout`; the last reply.
HttpReply scrape_once_steps(std::uint16_t port, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  HttpReply r;
  while (std::chrono::steady_clock::now() < end) {
    r = http_request(port, "/metrics");
    if (r.status == 200 && sample(r.body, rank_series("traceml_steps_total", 1)) > 0) return r;
    std::this_thread::sleep_for(300ms);
  }
  return r;
}

std::string promtool_problems(const fs::path& dir, const std::string& text) {
  const fs::path file = dir / "scrape.txt";
  std::ofstream(file) << text;
  const ProcessResult r =
      run_process({"/bin/sh", "-c", "promtool check metrics < '" + file.string() + "'"});
  return r.exit_code == 0 ? std::string() : r.out + r.err;
}

/// A Prometheus server of the test's own, scraping `target` every second.
class Prometheus {
 public:
  Prometheus(const fs::path& dir, std::uint16_t target) {
    port_ = launcher::pick_free_port().value_or(0);
    const fs::path config = dir / "prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                          << "scrape_configs:\n  - job_name: traceml\n    static_configs:\n"
                          << "      - targets: ['127.0.0.1:" << target << "']\n";
    server_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/bin/prometheus", "--config.file=" + config.string(),
                                 "--storage.tsdb.path=" + (dir / "tsdb").string(),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port_)});
  }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  /// An instant query's result vector through Prometheus' HTTP API.
  [[nodiscard]] Json query(const std::string& promql) const {
    std::string q;
    for (char c : promql) {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_')
        q += c;
      else {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
        q += hex;
      }
    }
    const HttpReply r = http_request(port_, "/api/v1/query?query=" + q, "GET", 5s);
    if (r.status != 200) return Json::array();
    const Json j = Json::parse(r.body, nullptr, false);
    if (j.is_discarded()) return Json::array();
    return j.value("/data/result"_json_pointer, Json::array());
  }
  [[nodiscard]] std::string log() const { return server_->err_so_far(); }

 private:
  std::uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> server_;
};

const fs::path kRepo = fs::path(TRACEML_TEST_DATA_DIR).parent_path();

/// The PromQL of docs/metrics.md's Grafana table: every `...` of a row's
/// query cell that names a traceml metric, a dashboard's $rank made rank 1.
std::vector<std::string> documented_queries() {
  std::ifstream in(kRepo / "docs" / "metrics.md");
  std::vector<std::string> out;
  bool table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) table = line.find("Grafana") != std::string::npos;
    if (!table || line.rfind("| ", 0) != 0 || line.rfind("| panel", 0) == 0) continue;
    const auto first = line.find(" | ");
    const auto second = line.find(" | ", first + 3);
    const std::string cell = line.substr(first + 3, second - first - 3);
    for (std::size_t at = cell.find('`'); at != std::string::npos;) {
      const std::size_t end = cell.find('`', at + 1);
      if (end == std::string::npos) break;
      std::string q = cell.substr(at + 1, end - at - 1);
      if (q.find("traceml_") != std::string::npos) {
        for (std::size_t v; (v = q.find("$rank")) != std::string::npos;)
          q.replace(v, 5, "1");
        out.push_back(q);
      }
      at = cell.find('`', end + 1);
    }
  }
  return out;
}

std::vector<std::string> ddp(int steps) {
  return {kExamples + "/ddp", "--steps", std::to_string(steps), "--slow-rank", "1",
          "--slow-input-ms",  "20"};
}

std::string primary_kind(const fs::path& run_dir) {
  return load_json(run_dir / "final_summary.json")
      .value("/primary_diagnosis/kind"_json_pointer, std::string());
}

TEST(MetricsE2E, PrometheusScrapesBothRanksOfARealRunWhileHostileClientsAreHeldOff) {
  TempDir dir;
  ChildProcess run(traceml_run_argv(kCli, dir.path() / "logs", "scraped", 2,
                                    {"--metrics-port", "0"}, ddp(2000)));
  const std::uint16_t port = metrics_port(run, 60s);
  ASSERT_GT(port, 0) << run.err_so_far();
  // A real Prometheus server, scraping it every second from now on.
  Prometheus prometheus(dir.path(), port);
  ASSERT_GT(prometheus.port(), 0);

  // Two scrapes: Prometheus' format (promtool), and counters that grow.
  const HttpReply first = scrape_once_steps(port, 90s);
  ASSERT_EQ(first.status, 200) << run.err_so_far();
  ASSERT_GT(sample(first.body, rank_series("traceml_steps_total", 1)), 0) << first.body;
  EXPECT_EQ(promtool_problems(dir.path(), first.body), "");
  EXPECT_EQ(sample(first.body, "traceml_world_size"), 2.0);
  EXPECT_EQ(sample(first.body, "traceml_ranks_connected"), 2.0);
  std::this_thread::sleep_for(2500ms);
  const HttpReply second = http_request(port, "/metrics");
  ASSERT_EQ(second.status, 200);
  EXPECT_EQ(promtool_problems(dir.path(), second.body), "");
  for (const std::string& series :
       {std::string("traceml_records_received_total"), rank_series("traceml_steps_total", 0),
        rank_series("traceml_steps_total", 1)})
    EXPECT_GT(sample(second.body, series), sample(first.body, series)) << series;
  // Rank 1 waits for its input most of each step; rank 0 for rank 1.
  EXPECT_GT(
      sample(second.body, "traceml_step_share_ratio{node=\"0\",rank=\"1\",part=\"input_wait\"}"),
      0.4)
      << second.body;

  // The Prometheus server has scraped it meanwhile: both ranks' series come back.
  std::map<std::string, double> steps;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (steps.size() < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(500ms);
    steps.clear();
    for (const Json& s : prometheus.query("traceml_steps_total{job=\"traceml\"}"))
      steps[s.value("/metric/rank"_json_pointer, std::string())] =
          std::stod(s.value("/value/1"_json_pointer, std::string("0")));
  }
  ASSERT_EQ(steps.size(), 2u) << prometheus.log();
  EXPECT_GT(steps["0"], 0);
  EXPECT_GT(steps["1"], 0);
  EXPECT_EQ(prometheus.query("traceml_step_share_ratio{part=\"input_wait\"}").size(), 2u);
  // Every query docs/metrics.md gives for a Grafana panel returns series.
  const std::vector<std::string> queries = documented_queries();
  EXPECT_GE(queries.size(), 10u);
  std::this_thread::sleep_for(2s);  // rate() needs two samples of each
  for (const std::string& q : queries)
    EXPECT_FALSE(prometheus.query(q).empty()) << "docs/metrics.md: " << q;

  EXPECT_EQ(sample(http_request(port, "/metrics").body, rank_series("traceml_rank_up", 1)), 1.0)
      << "the run went on while Prometheus was asked";

  // Hostile clients while the run goes: a huge request, three times the
  // workers in idle connections, and readers that never read.
  {
    Socket huge(port);
    huge.send("GET /" + std::string(64 * 1024, 'a') + " HTTP/1.1\r\n\r\n");
    std::vector<std::unique_ptr<Socket>> idle;
    for (int i = 0; i < 24; ++i)
      idle.push_back(std::make_unique<Socket>(port));
    std::vector<std::unique_ptr<Socket>> stuck;
    for (int i = 0; i < 10; ++i) {
      auto s = std::make_unique<Socket>(port);
      const int small = 4096;
      ::setsockopt(s->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
      s->send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
      stuck.push_back(std::move(s));
    }
    // The endpoint still answers, within the time its limits give.
    const HttpReply during = http_request(port, "/metrics", "GET", 40s);
    EXPECT_EQ(during.status, 200);
    EXPECT_GE(sample(during.body, rank_series("traceml_steps_total", 1)),
              sample(second.body, rank_series("traceml_steps_total", 1)));
    EXPECT_EQ(sample(during.body, rank_series("traceml_rank_up", 1)), 1.0) << "the run goes on";
  }
  EXPECT_EQ(http_request(port, "/metrics", "GET", 20s).status, 200);

  // The run ends as it would have: its exit code and its verdict.
  const ProcessResult r = run.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(primary_kind(dir.path() / "logs" / "scraped"), "INPUT_STRAGGLER") << r.err;
}

TEST(MetricsE2E, LiveModeServesTheSameSnapshot) {
  TempDir dir;
  ChildProcess run(traceml_run_argv(kCli, dir.path() / "logs", "live", 2,
                                    {"--metrics-port", "0", "--mode", "live"}, ddp(400)));
  const std::uint16_t port = metrics_port(run, 60s);
  ASSERT_GT(port, 0) << run.err_so_far();
  const HttpReply first = scrape_once_steps(port, 90s);
  ASSERT_EQ(first.status, 200) << run.err_so_far();
  EXPECT_EQ(promtool_problems(dir.path(), first.body), "");
  std::this_thread::sleep_for(2500ms);
  const HttpReply second = http_request(port, "/metrics");
  ASSERT_EQ(second.status, 200);
  EXPECT_GT(sample(second.body, "traceml_records_received_total"),
            sample(first.body, "traceml_records_received_total"));
  EXPECT_GT(sample(second.body, rank_series("traceml_steps_total", 0)),
            sample(first.body, rank_series("traceml_steps_total", 0)));
  const ProcessResult r = run.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(primary_kind(dir.path() / "logs" / "live"), "INPUT_STRAGGLER") << r.err;
}

TEST(MetricsE2E, ServeServesTheRanksAnotherLauncherStarted) {
  TempDir dir;
  Served serve(dir, {"--run-name", "served", "--world-size", "2", "--metrics-port", "0"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const std::uint16_t port = metrics_port(serve.child, 10s);
  ASSERT_GT(port, 0) << serve.child.err_so_far();
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  ChildProcess r0(rank_argv(vars, 0, 2, *master, ddp(400)));
  ChildProcess r1(rank_argv(vars, 1, 2, *master, ddp(400)));
  const HttpReply r = scrape_once_steps(port, 90s);
  ASSERT_EQ(r.status, 200) << serve.child.err_so_far();
  EXPECT_EQ(promtool_problems(dir.path(), r.body), "");
  EXPECT_NE(r.body.find("\ntraceml_run_info{run=\"served\",version=\""), std::string::npos)
      << r.body;
  EXPECT_EQ(sample(r.body, "traceml_world_size"), 2.0);
  EXPECT_GT(sample(r.body, rank_series("traceml_steps_total", 0)), 0);
  EXPECT_EQ(r0.wait().exit_code, 0);
  EXPECT_EQ(r1.wait().exit_code, 0);
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(primary_kind(dir.path() / "logs" / "served"), "INPUT_STRAGGLER") << s.err;
}

// A rank stopped (SIGSTOP) mid-run, as a dashboard sees it: within seconds
// the endpoint names it (hung, silent) and its step count stops while the
// other rank's is frozen too, waiting for it in the all-reduce; Ctrl-C then
// ends the run with the hang as its headline, as without the endpoint.
TEST(MetricsE2E, AStoppedRankIsNamedHungWithinSecondsAndItsStepsStop) {
  TempDir dir;
  const std::string name = "stopped";
  ChildProcess run(traceml_run_argv(
      kCli, dir.path() / "logs", name, 2,
      {"--metrics-port", "0", "--interval", "0.5", "--grace-period-sec", "1"},
      {kExamples + "/ddp", "--steps", "1000000", "--log-every", "200", "--timeout-s", "120"}));
  const std::uint16_t port = metrics_port(run, 60s);
  ASSERT_GT(port, 0) << run.err_so_far();
  const HttpReply before = scrape_once_steps(port, 90s);
  ASSERT_EQ(before.status, 200) << run.err_so_far();
  EXPECT_EQ(sample(before.body, "traceml_hang"), 0.0) << before.body;
  EXPECT_EQ(sample(before.body, rank_series("traceml_rank_hung", 1)), 0.0) << before.body;
  const pid_t r1 = rank_pid(name, 1);
  ASSERT_GT(r1, 0) << run.err_so_far();
  ASSERT_EQ(::kill(r1, SIGSTOP), 0);
  const auto stopped = std::chrono::steady_clock::now();

  // Silent after 3 intervals (1.5 s), taken into the next snapshot (0.5 s):
  // about 2 s; 15 s allowed for a loaded machine (named_after_s records it).
  HttpReply hung;
  while (std::chrono::steady_clock::now() - stopped < 15s) {
    hung = http_request(port, "/metrics");
    if (hung.status == 200 && sample(hung.body, "traceml_hang") == 1.0) break;
    std::this_thread::sleep_for(200ms);
  }
  const double named_after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  ::testing::Test::RecordProperty("named_after_s", std::to_string(named_after));
  ASSERT_EQ(sample(hung.body, "traceml_hang"), 1.0) << hung.body;
  EXPECT_EQ(promtool_problems(dir.path(), hung.body), "");
  EXPECT_EQ(sample(hung.body, rank_series("traceml_rank_hung", 1)), 1.0) << hung.body;
  EXPECT_EQ(sample(hung.body, rank_series("traceml_rank_hung", 0)), 0.0) << hung.body;
  EXPECT_EQ(sample(hung.body, rank_series("traceml_rank_silent", 1)), 1.0) << hung.body;
  EXPECT_EQ(sample(hung.body, rank_series("traceml_rank_silent", 0)), 0.0) << hung.body;
  EXPECT_GE(sample(hung.body, rank_series("traceml_rank_last_heard_age_seconds", 1)), 1.5)
      << hung.body;
  // Neither rank advances now: rank 1 is stopped, rank 0 waits for it.
  std::this_thread::sleep_for(1500ms);
  const HttpReply later = http_request(port, "/metrics");
  ASSERT_EQ(later.status, 200);
  for (int rank : {0, 1})
    EXPECT_EQ(sample(later.body, rank_series("traceml_steps_total", rank)),
              sample(hung.body, rank_series("traceml_steps_total", rank)))
        << "rank " << rank << "\n"
        << later.body;
  EXPECT_GT(sample(later.body, rank_series("traceml_rank_step_age_seconds", 1)), 1.5);
  EXPECT_EQ(sample(later.body, "traceml_hang"), 1.0);
  EXPECT_GE(sample(later.body, "traceml_stalls_total"), 1.0);

  run.signal(SIGINT);
  const ProcessResult r = run.wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  const Json summary = load_json(dir.path() / "logs" / name / "final_summary.json");
  EXPECT_EQ(summary.value("/run/hang/rank"_json_pointer, -1), 1) << summary["run"].dump();
}

/// How many lines `s` has.
int lines(const std::string& s) {
  return int(std::count(s.begin(), s.end(), '\n'));
}

TEST(MetricsE2E, APortInUseIsOneLineAndExitTwoBeforeAnythingExists) {
  TempDir dir;
  // A port another program holds.
  const std::uint16_t taken = launcher::pick_free_port().value_or(0);
  ASSERT_GT(taken, 0);
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(taken);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  const std::string expected = "traceml: error: --metrics-port " + std::to_string(taken) +
                               ": cannot listen on 127.0.0.1:" + std::to_string(taken) +
                               ": Address already in use";
  const ProcessResult run = run_process(traceml_run_argv(
      kCli, dir.path() / "logs", "taken", 2, {"--metrics-port", std::to_string(taken)}, ddp(50)));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err.rfind(expected, 0), 0u) << run.err;
  EXPECT_EQ(lines(run.err), 1) << run.err;
  EXPECT_FALSE(fs::exists(dir.path() / "logs" / "taken"));
  const ProcessResult serve =
      run_process({kCli, "serve", "--port", "0", "--logs-dir", (dir.path() / "logs").string(),
                   "--run-name", "served", "--metrics-port", std::to_string(taken)});
  EXPECT_EQ(serve.exit_code, 2);
  EXPECT_EQ(serve.err.rfind(expected, 0), 0u) << serve.err;
  EXPECT_EQ(lines(serve.err), 1) << serve.err;
  EXPECT_FALSE(fs::exists(dir.path() / "logs" / "served"));
  ::close(holder);
}

TEST(MetricsE2E, BadMetricsOptionsAreOneLineAndExitTwo) {
  TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--metrics-port", "70000"}, "--metrics-port"},
      {{"--metrics-port", "-1"}, "--metrics-port"},
      {{"--metrics-port", "0", "--metrics-bind", "localhost"},
       "--metrics-bind 'localhost' is not an IPv4 address"},
      {{"--metrics-bind", "0.0.0.0"}, "--metrics-bind needs --metrics-port"},
  };
  for (const auto& [flags, says] : cases) {
    const ProcessResult run =
        run_process(traceml_run_argv(kCli, dir.path() / "logs", "bad", 1, flags, ddp(10)));
    EXPECT_EQ(run.exit_code, 2) << flags[0] << " " << flags[1];
    EXPECT_NE(run.err.find(says), std::string::npos) << run.err;
    EXPECT_EQ(lines(run.err), 1) << run.err;
    std::vector<std::string> serve = {kCli,         "serve",      "--port",
                                      "0",          "--logs-dir", (dir.path() / "logs").string(),
                                      "--run-name", "bad"};
    serve.insert(serve.end(), flags.begin(), flags.end());
    const ProcessResult s = run_process(serve);
    EXPECT_EQ(s.exit_code, 2) << s.err;
    EXPECT_NE(s.err.find(says), std::string::npos) << s.err;
  }
  // A run directory that holds a run: one line, no word of metrics before it.
  fs::create_directories(dir.path() / "logs" / "held");
  std::ofstream(dir.path() / "logs" / "held" / "telemetry.db") << "a run";
  const ProcessResult held = run_process(
      traceml_run_argv(kCli, dir.path() / "logs", "held", 1, {"--metrics-port", "0"}, ddp(10)));
  EXPECT_EQ(held.exit_code, 2);
  EXPECT_NE(held.err.find("already holds a run"), std::string::npos) << held.err;
  EXPECT_EQ(lines(held.err), 1) << held.err;
  // The metrics on a port the run needs for something else.
  const std::string logs = (dir.path() / "logs").string();
  for (const char* flag : {"--aggregator-port", "--master-port"}) {
    const ProcessResult run =
        run_process({kCli, "run", "--logs-dir", logs, "--run-name", "bad", flag, "29765",
                     "--metrics-port", "29765", "--", kExamples + "/ddp"});
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_NE(run.err.find("--metrics-port 29765 is the " + std::string(flag) + " too"),
              std::string::npos)
        << run.err;
  }
  const ProcessResult serve = run_process({kCli, "serve", "--logs-dir", logs, "--run-name", "bad",
                                           "--port", "29765", "--metrics-port", "29765"});
  EXPECT_EQ(serve.exit_code, 2) << serve.err;
  EXPECT_NE(serve.err.find("--metrics-port 29765 is the --port too"), std::string::npos)
      << serve.err;
  EXPECT_FALSE(fs::exists(dir.path() / "logs" / "bad"));
}

}  // namespace
}  // namespace traceml::testing
