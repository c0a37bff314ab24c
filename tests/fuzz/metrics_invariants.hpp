// What the metrics endpoint (`--metrics-port`, metrics/metrics_endpoint.hpp)
// promises whatever reaches it, checked by fuzz_metrics and, on its corpus
// and a fixed-seed loop, by tests/metrics/metrics_endpoint_test.cpp. The
// input's first byte chooses the boundary:
// - odd: the bytes a peer sends. An endpoint of the process's own answers
//   them (the connection shut for writing after them, as a peer that is
//   done): the connection is closed, a reply begins as HTTP's do, and the
//   endpoint answers GET /metrics with 200 afterwards.
// - even: the values of a run. Step records made of the bytes, those the
//   collector's checks (model::check_step) let in, become a snapshot whose
//   exposition text must be Prometheus' format: each line a comment or
//   `name{label="value",...} number`, names and labels of its alphabet,
//   valid UTF-8, and each rank's four shares finite, in [0, 1], adding to 1.
#pragma once

#include <sys/socket.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "../support/http_client.hpp"
#include "collector/live_snapshot.hpp"
#include "metrics/metrics_endpoint.hpp"
#include "model/record_checks.hpp"
#include "model/text.hpp"

namespace traceml::fuzz {

namespace metrics_detail {

/// Reads the input a field at a time; zeros once it is used up.
class Bytes {
 public:
  Bytes(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  std::uint8_t byte() { return at_ < n_ ? d_[at_++] : 0; }
  double number() {
    std::uint64_t bits = 0;
    for (int i = 0; i < 8; ++i)
      bits = (bits << 8) | byte();
    double v = 0.0;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }

 private:
  const std::uint8_t* d_;
  std::size_t n_;
  std::size_t at_ = 0;
};

inline bool name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

/// One sample line: `name{label="value",...} number`. Sets `name` and
/// `labels` (the part in braces) and `value`.
inline std::optional<std::string> sample_line(const std::string& line, std::string& name,
                                              std::string& labels, double& value) {
  std::size_t i = 0;
  while (i < line.size() && name_char(line[i], i == 0))
    ++i;
  if (i == 0) return "no metric name";
  name = line.substr(0, i);
  labels.clear();
  if (i < line.size() && line[i] == '{') {
    const std::size_t open = i++;
    for (;;) {
      const std::size_t start = i;
      while (i < line.size() && name_char(line[i], i == start))
        ++i;
      if (i == start || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"')
        return "a bad label name";
      i += 2;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\') {
          if (i + 1 >= line.size() || std::strchr("\\\"n", line[i + 1]) == nullptr)
            return "a bad escape in a label value";
          ++i;
        }
        ++i;
      }
      if (i >= line.size()) return "an unterminated label value";
      ++i;
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') break;
      return "labels not closed";
    }
    labels = line.substr(open + 1, i - open - 1);
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') return "no space before the value";
  const std::string v = line.substr(i + 1);
  if (v == "Nan" || v == "NaN") {
    value = std::nan("");
    return std::nullopt;
  }
  if (v == "+Inf" || v == "-Inf") {
    value = v[0] == '+' ? HUGE_VAL : -HUGE_VAL;
    return std::nullopt;
  }
  char* end = nullptr;
  value = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size()) return "the value '" + v + "' is no number";
  return std::nullopt;
}

/// The exposition text's promises.
inline std::optional<std::string> check_text(const std::string& text) {
  if (!model::valid_utf8(text)) return "the text is not valid UTF-8";
  std::map<std::string, double> share_sums;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) return "the text does not end with a newline";
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    std::string name;
    std::string labels;
    double value = 0.0;
    if (auto why = sample_line(line, name, labels, value)) return *why + ": " + line;
    if (name == "traceml_step_share_ratio") {
      if (!std::isfinite(value) || value < 0.0 || value > 1.0 + 1e-9)
        return "a share outside [0, 1]: " + line;
      // The rank's labels, less the part.
      share_sums[labels.substr(0, labels.find(",part="))] += value;
    }
  }
  for (const auto& [rank, sum] : share_sums)
    if (std::fabs(sum - 1.0) > 1e-6)
      return "the shares of {" + rank + "} add up to " + std::to_string(sum);
  return std::nullopt;
}

/// The endpoint the request half talks to: made once, kept until exit.
inline std::uint16_t endpoint_port() {
  // Reachable until exit (a static), as traceml keeps its own.
  static metrics::MetricsEndpoint* const endpoint = [] {
    auto channel = std::make_shared<collector::SnapshotChannel>();
    collector::LiveStatus s;
    collector::RankLive l;
    l.node_rank = 0;
    s.ranks.push_back(l);
    channel->publish(std::make_shared<collector::LiveSnapshot>(collector::snapshot_of(s)));
    return new metrics::MetricsEndpoint("127.0.0.1", 0, channel, {"fuzz", "0"});
  }();
  return endpoint->port();
}

inline std::optional<std::string> check_request(const std::uint8_t* data, std::size_t size) {
  const std::uint16_t port = endpoint_port();
  {
    testing::Socket peer(port);
    if (!peer.ok()) return "the endpoint took no connection";
    peer.send(std::string(reinterpret_cast<const char*>(data), size));
    ::shutdown(peer.fd(), SHUT_WR);
    bool closed = false;
    const std::string reply = peer.read(std::chrono::seconds(4), &closed);
    if (!closed) return "the endpoint kept a finished peer's connection open";
    // A reply begins as HTTP's do. Not more: civetweb 1.15 answers a
    // malformed request line in the version it named, bytes and line breaks
    // included ("HTTP/HTTP/1.1\xff\r\n\r 400 Bad Request"), to that peer
    // alone (docs/metrics.md).
    if (!reply.empty() && reply.rfind("HTTP/", 0) != 0)
      return "a reply that is no HTTP status line: " +
             model::escape_for_terminal(reply.substr(0, 40));
  }
  static int count = 0;
  if (++count % 64 == 0 &&
      testing::http_request(port, "/metrics", "GET", std::chrono::seconds(4)).status != 200)
    return "the endpoint stopped answering GET /metrics";
  return std::nullopt;
}

inline std::optional<std::string> check_values(const std::uint8_t* data, std::size_t size) {
  Bytes b(data, size);
  collector::LiveStatus status;
  const int ranks = 1 + b.byte() % 4;
  for (int r = 0; r < ranks; ++r) {
    collector::RankLive l;
    l.global_rank = r;
    if (b.byte() % 2 != 0) l.node_rank = b.byte();
    l.condition = static_cast<collector::RankCondition>(b.byte() % 6);
    l.max_step = b.byte();
    l.quiet_s = std::fabs(b.number());
    l.stuck_s = std::fabs(b.number());
    l.records_dropped = b.byte();
    status.ranks.push_back(l);
    const int steps = b.byte() % 6;
    for (int i = 1; i <= steps; ++i) {
      model::StepRecord rec;
      rec.global_rank = r;
      rec.step = i;
      rec.ts = 1.8e9 + i;
      for (std::size_t e = 0; e < model::kEventCount; ++e) {
        const std::uint8_t has = b.byte();
        if (has % 3 == 0) continue;
        model::Timing t;
        t.cpu_ms = b.number();
        if (has % 3 == 2) t.gpu_ms = b.number();
        rec.events.set(model::Event(e), t);
      }
      // Only what the collector lets in reaches a snapshot.
      if (!model::check_step(rec)) status.latest.telemetry.steps.push_back(rec);
    }
  }
  collector::LiveSnapshot s = collector::snapshot_of(status);
  s.taken_unix = 1.8e9;
  s.counts.records_received = b.byte();
  return check_text(metrics::exposition_text(s, {"fuzz-run", "0.1.0"}));
}

}  // namespace metrics_detail

/// The promises on one input; what broke, or none.
inline std::optional<std::string> check_metrics_input(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return std::nullopt;
  if (data[0] % 2 != 0) return metrics_detail::check_request(data + 1, size - 1);
  return metrics_detail::check_values(data + 1, size - 1);
}

}  // namespace traceml::fuzz
