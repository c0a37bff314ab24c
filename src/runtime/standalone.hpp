// Standalone mode: a program run without `traceml run` traces itself. The
// runtime hosts a collector inside the process (on loopback, with its own run
// token) and, at shutdown, writes the summary under
// <logs dir>/<program>_<timestamp>/ and says where on stderr.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/config.hpp"

namespace traceml::collector {
class Collector;
}

namespace traceml::runtime {

/// The run directory of a standalone run: <logs>/<name>, where name is the
/// configured run name or <program>_<YYYYmmdd_HHMMSS> (with _rank<N> when the
/// process is one rank of several); _2, _3, ... is appended while it exists.
std::string standalone_run_dir(const Config& config, const std::string& program, std::time_t now);

class Standalone {
 public:
  /// Creates the run directory and starts the collector; throws on failure.
  explicit Standalone(const Config& config);
  ~Standalone();
  Standalone(const Standalone&) = delete;
  Standalone& operator=(const Standalone&) = delete;

  [[nodiscard]] std::uint16_t port() const;
  [[nodiscard]] const std::string& token() const { return token_; }
  [[nodiscard]] const std::string& run_dir() const { return run_dir_; }
  /// Ends the collection, writes the summary and prints where it is.
  void finish(std::chrono::steady_clock::time_point deadline);

 private:
  std::string run_dir_;
  std::string token_;
  int config_rank_ = 0;
  /// The page's limits (Config::page_time, page_memory_bytes).
  std::optional<std::chrono::milliseconds> page_time_;
  std::optional<std::uint64_t> page_memory_bytes_;
  std::unique_ptr<collector::Collector> collector_;
};

}  // namespace traceml::runtime
