#include "metrics/metrics_endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include "analysis/diagnosis_kind.hpp"

namespace traceml::metrics {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

/// Builds the families in the order they are served.
class Families {
 public:
  /// A new family; its samples follow with gauge() or counter().
  Families& family(const char* name, const char* help, MetricType type) {
    MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = type;
    out_.push_back(std::move(f));
    return *this;
  }
  /// A sample of the latest family (a gauge's or a counter's value).
  Families& sample(double value, std::vector<ClientMetric::Label> labels = {}) {
    ClientMetric m;
    m.label = std::move(labels);
    if (out_.back().type == MetricType::Counter)
      m.counter.value = value;
    else
      m.gauge.value = value;
    out_.back().metric.push_back(std::move(m));
    return *this;
  }
  std::vector<MetricFamily> take() { return std::move(out_); }

 private:
  std::vector<MetricFamily> out_;
};

std::vector<ClientMetric::Label> rank_labels(const collector::RankLive& r,
                                             std::vector<ClientMetric::Label> more = {}) {
  std::vector<ClientMetric::Label> l{
      {"node", r.node_rank ? std::to_string(*r.node_rank) : std::string()},
      {"rank", std::to_string(r.global_rank)}};
  l.insert(l.end(), more.begin(), more.end());
  return l;
}

double flag(bool b) {
  return b ? 1.0 : 0.0;
}

/// The families of every rank: one metric name, a sample per rank.
template <typename F>
void per_rank(Families& out, const collector::LiveSnapshot& s, const char* name, const char* help,
              MetricType type, F value) {
  out.family(name, help, type);
  for (const collector::RankRow& r : s.ranks)
    if (const std::optional<double> v = value(r)) out.sample(*v, rank_labels(r.live));
}

}  // namespace

std::vector<MetricFamily> families(const collector::LiveSnapshot& s, const RunLabels& run) {
  using collector::RankCondition;
  using collector::RankRow;
  Families out;
  out.family("traceml_run_info", "The run traceml observes: its name and traceml's version",
             MetricType::Gauge)
      .sample(1.0, {{"run", run.run}, {"version", run.version}});
  if (s.world_size)
    out.family("traceml_world_size", "Ranks the run has", MetricType::Gauge)
        .sample(double(*s.world_size));
  out.family("traceml_ranks_connected", "Ranks with a connection to the collector open now",
             MetricType::Gauge)
      .sample(double(s.ranks_connected()));
  out.family("traceml_records_received_total", "Records the collector accepted, all ranks",
             MetricType::Counter)
      .sample(double(s.counts.records_received));
  out.family("traceml_records_dropped_total",
             "Records the ranks' tracers dropped (their buffers full), all ranks",
             MetricType::Counter)
      .sample(double(s.records_dropped()));
  out.family("traceml_records_invalid_total", "Records the collector refused by its value checks",
             MetricType::Counter)
      .sample(double(s.counts.invalid_records));
  out.family("traceml_connections_refused_total",
             "Connections the collector refused (wrong token, bad handshake, ...)",
             MetricType::Counter)
      .sample(double(s.counts.rejected_connections));
  out.family("traceml_stalls_total", "Times a rank stalled or went silent", MetricType::Counter)
      .sample(double(std::int64_t(s.stalls.size()) + s.counts.stalls_dropped));
  out.family("traceml_hang", "1 while a rank hangs (silent or stalled, not resumed)",
             MetricType::Gauge)
      .sample(flag(s.hung_rank.has_value()));
  {
    collector::LiveVerdict v;
    if (s.verdict) {
      v = *s.verdict;
    } else {
      v.kind = analysis::to_string(analysis::DiagnosisKind::NoData);
      v.status = analysis::status_of(analysis::DiagnosisKind::NoData);
    }
    out.family("traceml_verdict_info",
               "The verdict so far, on each rank's latest 100 steps (1; the labels say it)",
               MetricType::Gauge)
        .sample(1.0, {{"kind", v.kind},
                      {"severity", analysis::severity_name(v.severity)},
                      {"status", v.status}});
  }
  if (s.taken_unix > 0.0) {
    out.family("traceml_snapshot_timestamp_seconds",
               "When these values were taken (unix seconds; once an interval)", MetricType::Gauge)
        .sample(s.taken_unix);
    out.family("traceml_snapshot_duration_seconds", "How long taking them took the collector",
               MetricType::Gauge)
        .sample(s.cost_s);
  }

  per_rank(out, s, "traceml_steps_total", "Steps the rank has finished", MetricType::Counter,
           [](const RankRow& r) { return std::optional<double>(double(r.live.steps_done())); });
  per_rank(out, s, "traceml_window_steps", "Steps in the rank's live window (its latest 100)",
           MetricType::Gauge, [](const RankRow& r) { return std::optional<double>(r.rows); });
  const auto ms = [](std::optional<double> v) {
    return v ? std::optional<double>(*v / 1000.0) : std::nullopt;
  };
  per_rank(out, s, "traceml_step_median_seconds",
           "Median step time over the live window, input wait included", MetricType::Gauge,
           [&](const RankRow& r) { return ms(r.median_ms); });
  per_rank(out, s, "traceml_step_p95_seconds",
           "95th percentile step time over the live window, input wait included", MetricType::Gauge,
           [&](const RankRow& r) { return ms(r.p95_ms); });
  per_rank(out, s, "traceml_step_last_seconds", "The rank's latest step time, input wait included",
           MetricType::Gauge, [&](const RankRow& r) { return ms(r.last_ms); });
  out.family("traceml_step_share_ratio",
             "Share of the mean step over the live window: input_wait, h2d, compute "
             "(forward, backward, optimizer) and residual (untimed); they add up to 1",
             MetricType::Gauge);
  for (const RankRow& r : s.ranks) {
    // A rank's absurd values (near the largest double) make no shares.
    const double whole = r.split_ms();
    if (r.rows == 0 || !(whole > 0.0) || !std::isfinite(whole)) continue;
    const std::pair<const char*, double> parts[] = {
        {"input_wait", r.input_ms},
        {"h2d", r.h2d_ms},
        {"compute", r.forward_ms + r.backward_ms + r.optimizer_ms},
        {"residual", r.residual_ms}};
    for (const auto& [part, value] : parts)
      out.sample(value / whole, rank_labels(r.live, {{"part", part}}));
  }
  out.family("traceml_step_phase_seconds",
             "Mean seconds per step over the live window, by phase (the GPU's clock when "
             "traceml_step_gpu_clock is 1)",
             MetricType::Gauge);
  for (const RankRow& r : s.ranks) {
    if (r.rows == 0) continue;
    const std::pair<const char*, double> phases[] = {
        {"input_wait", r.input_ms},    {"h2d", r.h2d_ms},
        {"forward", r.forward_ms},     {"backward", r.backward_ms},
        {"optimizer", r.optimizer_ms}, {"residual", r.residual_ms}};
    for (const auto& [phase, value] : phases)
      out.sample(value / 1000.0, rank_labels(r.live, {{"phase", phase}}));
  }
  per_rank(out, s, "traceml_step_gpu_clock",
           "1 when the rank's phases are on the GPU's clock (every step of the window has it)",
           MetricType::Gauge, [](const RankRow& r) {
             return r.rows > 0 ? std::optional<double>(flag(r.gpu_clock)) : std::nullopt;
           });
  per_rank(out, s, "traceml_rank_last_heard_age_seconds",
           "Seconds since anything arrived from the rank", MetricType::Gauge,
           [](const RankRow& r) { return std::optional<double>(r.live.quiet_s); });
  per_rank(out, s, "traceml_rank_step_age_seconds", "Seconds since the rank's step last advanced",
           MetricType::Gauge,
           [](const RankRow& r) { return std::optional<double>(r.live.stuck_s); });
  per_rank(out, s, "traceml_rank_stalled",
           "1 while the rank is stalled (heard from, not advancing)", MetricType::Gauge,
           [](const RankRow& r) {
             return std::optional<double>(flag(r.live.condition == RankCondition::Stalled));
           });
  per_rank(out, s, "traceml_rank_silent", "1 while nothing arrives from the rank (3 intervals)",
           MetricType::Gauge, [](const RankRow& r) {
             return std::optional<double>(flag(r.live.condition == RankCondition::Silent));
           });
  per_rank(out, s, "traceml_rank_hung", "1 for the rank that hangs now (the run's headline)",
           MetricType::Gauge, [&](const RankRow& r) {
             return std::optional<double>(flag(s.hung_rank == r.live.global_rank));
           });
  per_rank(out, s, "traceml_rank_up", "1 while the rank's connection to the collector is open",
           MetricType::Gauge, [](const RankRow& r) {
             return std::optional<double>(flag(r.live.condition != RankCondition::Ended));
           });
  per_rank(out, s, "traceml_rank_records_dropped_total",
           "Records the rank's tracer dropped (its buffer full)", MetricType::Counter,
           [](const RankRow& r) { return std::optional<double>(double(r.live.records_dropped)); });
  return out.take();
}

std::string exposition_text(const collector::LiveSnapshot& s, const RunLabels& run) {
  return prometheus::TextSerializer().Serialize(families(s, run));
}

std::optional<std::string> bind_problem(const std::string& bind) {
  in_addr v4{};
  if (::inet_pton(AF_INET, bind.c_str(), &v4) == 1) return std::nullopt;
  // Debian's civetweb (1.15) is built without IPv6 listening.
  return "--metrics-bind '" + bind +
         "' is not an IPv4 address (127.0.0.1, the default: this machine only; 0.0.0.0: every "
         "interface)";
}

/// GET /metrics: the latest snapshot's text, made once a snapshot however
/// many scrape it, and written within kReplyTimeoutMs of its first byte.
class MetricsEndpoint::Source final : public CivetHandler {
 public:
  Source(std::shared_ptr<collector::SnapshotChannel> channel, RunLabels run)
      : channel_(std::move(channel)), run_(std::move(run)) {}

  // On civetweb's worker thread: nothing may leave it (C frames above).
  bool handleGet(CivetServer* /*server*/, mg_connection* conn) override {
    std::shared_ptr<const std::string> text;
    try {
      text = latest_text();
    } catch (...) {
      mg_send_http_error(conn, 500, "%s", "traceml could not make the metrics\n");
      return true;
    }
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
              "Content-Length: %zu\r\nConnection: close\r\n\r\n",
              text->size());
    // A reader too slow for the whole reply within the limit is cut (the
    // connection closed, the reply short): civetweb's own wait restarts on
    // each byte taken, so a reader that trickles would hold a worker for as
    // long as it liked. Small writes keep each one within civetweb's wait.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kReplyTimeoutMs);
    for (std::size_t at = 0; at < text->size();) {
      if (std::chrono::steady_clock::now() >= deadline) break;
      const std::size_t n = std::min(kWriteBytes, text->size() - at);
      if (mg_write(conn, text->data() + at, n) <= 0) break;
      at += n;
    }
    return true;
  }

 private:
  /// The text of the channel's latest snapshot; made on the first scrape
  /// after a snapshot, by one worker while the others wait for it.
  std::shared_ptr<const std::string> latest_text() {
    std::shared_ptr<const collector::LiveSnapshot> snapshot = channel_->latest();
    std::lock_guard<std::mutex> lk(mu_);
    if (snapshot != made_from_) {
      text_ = std::make_shared<const std::string>(exposition_text(*snapshot, run_));
      made_from_ = std::move(snapshot);
    }
    return text_;
  }

  static constexpr std::size_t kWriteBytes = 1024;
  std::shared_ptr<collector::SnapshotChannel> channel_;
  RunLabels run_;
  std::mutex mu_;
  std::shared_ptr<const collector::LiveSnapshot> made_from_;
  std::shared_ptr<const std::string> text_;
};

namespace {

/// Only GET /metrics, exactly: civetweb would hand /metrics/anything to the
/// handler too. Returns 1 (answered here) for anything else.
int only_metrics(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  if (ri == nullptr || ri->local_uri == nullptr || std::strcmp(ri->local_uri, "/metrics") != 0) {
    mg_send_http_error(conn, 404, "%s", "Not found: traceml serves GET /metrics only\n");
    return 1;
  }
  if (ri->request_method == nullptr || std::strcmp(ri->request_method, "GET") != 0) {
    mg_send_http_error(conn, 405, "%s", "Method not allowed: traceml serves GET /metrics only\n");
    return 1;
  }
  return 0;
}

/// civetweb's last message on this thread: why mg_start failed, when it
/// did (it runs on the constructor's thread).
thread_local std::string t_last_message;

/// civetweb's own messages never reach the run's terminal; the last one is
/// kept for the error a failed start says.
int quiet(const mg_connection*, const char* message) {
  try {
    t_last_message = message != nullptr ? message : "";
  } catch (...) {
    // A message lost: the error says less.
  }
  return 1;
}

/// Binds a socket as civetweb will, to say why it cannot (errno), in words.
std::optional<std::string> cannot_bind(const std::string& bind, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string(std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, bind.c_str(), &a.sin_addr);
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const int err = errno;
  ::close(fd);
  if (rc == 0) return std::nullopt;
  return std::string(std::strerror(err));
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(const std::string& bind, std::uint16_t port,
                                 std::shared_ptr<collector::SnapshotChannel> channel, RunLabels run)
    : bind_(bind), source_(std::make_unique<Source>(std::move(channel), std::move(run))) {
  if (const auto problem = bind_problem(bind)) throw MetricsError(*problem);
  const std::string where = bind + ":" + std::to_string(port);
  const auto fail = [&](const std::string& why) {
    return MetricsError("--metrics-port " + std::to_string(port) + ": cannot listen on " + where +
                        ": " + why + " (choose another --metrics-port, or 0 for a free one)");
  };
  if (const auto why = cannot_bind(bind, port)) throw fail(*why);
  static const CivetCallbacks callbacks = [] {
    CivetCallbacks c;
    c.begin_request = only_metrics;
    c.log_message = quiet;
    return c;
  }();
  std::vector<std::string> options{
      "listening_ports",
      where,
      "num_threads",
      std::to_string(kMaxConnections),
      "connection_queue",
      std::to_string(kQueuedConnections),
      "listen_backlog",
      std::to_string(kListenBacklog),
      "max_request_size",
      std::to_string(kRequestBytes),
      "request_timeout_ms",
      std::to_string(kRequestTimeoutMs),
      // One request a connection: no connection stays open between scrapes.
      "enable_keep_alive",
      "no",
  };
  try {
    server_ = std::make_unique<CivetServer>(options, &callbacks);
  } catch (const std::exception&) {
    std::string why = "the server did not start";
    if (!t_last_message.empty()) why += " (civetweb: " + t_last_message + ")";
    t_last_message.clear();
    throw fail(why);
  }
  server_->addHandler("/metrics", source_.get());
  const std::vector<int> ports = server_->getListeningPorts();
  port_ = ports.empty() ? port : static_cast<std::uint16_t>(ports.front());
}

MetricsEndpoint::~MetricsEndpoint() {
  // The server first: its workers use the handler.
  if (server_) server_->close();
}

std::string MetricsEndpoint::url() const {
  // Every interface: the address Prometheus would use is this machine's name.
  std::string host = bind_;
  if (host == "0.0.0.0") {
    char name[256] = {};
    host = ::gethostname(name, sizeof name - 1) == 0 && name[0] != '\0' ? name : "localhost";
  }
  return "http://" + host + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace traceml::metrics
