// The run's live metrics for Prometheus (`traceml run|serve --metrics-port`,
// DECISIONS 19): GET /metrics answers in Prometheus' text exposition format
// from the collector's latest live snapshot (collector/live_snapshot.hpp), so
// a scrape never makes the collector work nor takes its locks. The text is
// prometheus-cpp's (its MetricFamily and TextSerializer); the server is the
// civetweb that prometheus-cpp's own exposer runs, with a handler of ours
// rather than the exposer's: that one writes a reply with no deadline (a
// reader that trickles holds a worker as long as it likes) and serializes it
// again on every scrape. Linked into the CLI only, never into libtraceml.a: a
// rank's program needs none of it. The metrics and the limits: docs/metrics.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "collector/live_snapshot.hpp"

class CivetServer;

namespace prometheus {
struct MetricFamily;
}  // namespace prometheus

namespace traceml::metrics {

/// The endpoint cannot start: what() is one line that says how to fix it.
class MetricsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What one client may cost the run (docs/metrics.md "Limits").
inline constexpr int kMaxConnections = 8;       ///< served at once (worker threads)
inline constexpr int kQueuedConnections = 8;    ///< accepted, waiting for a worker
inline constexpr int kListenBacklog = 16;       ///< the kernel's, beyond those
inline constexpr int kRequestBytes = 8 * 1024;  ///< a request's line and headers
inline constexpr int kRequestTimeoutMs = 5000;  ///< to send the request
inline constexpr int kReplyTimeoutMs = 5000;    ///< to take the whole reply
/// What the run is, for traceml_run_info.
struct RunLabels {
  std::string run;      ///< the run's name
  std::string version;  ///< traceml's
};

/// The metric families of `s`, as the endpoint serves them.
std::vector<prometheus::MetricFamily> families(const collector::LiveSnapshot& s,
                                               const RunLabels& run);

/// `families` in the text exposition format (prometheus-cpp's serializer).
std::string exposition_text(const collector::LiveSnapshot& s, const RunLabels& run);

/// A problem with --metrics-bind (not an IPv4 address), or none.
std::optional<std::string> bind_problem(const std::string& bind);

class MetricsEndpoint {
 public:
  /// Listens on `bind`:`port` (0: a free port) and serves the latest
  /// snapshot of `channel`. Throws MetricsError (a port in use, an address
  /// that is not this machine's) before anything else starts.
  MetricsEndpoint(const std::string& bind, std::uint16_t port,
                  std::shared_ptr<collector::SnapshotChannel> channel, RunLabels run);
  /// Stops serving; a scrape in flight is finished first.
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  /// "http://127.0.0.1:9400/metrics".
  [[nodiscard]] std::string url() const;

 private:
  class Source;
  std::string bind_;
  std::uint16_t port_ = 0;
  std::unique_ptr<Source> source_;
  std::unique_ptr<CivetServer> server_;
};

}  // namespace traceml::metrics
