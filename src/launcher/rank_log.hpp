// logs/<run>/rank<N>.log: a rank's stdout and stderr as the launcher relays
// them, kept after the run so that a crash can be read later (TraceML's
// --capture-stderr). Bounded: when the file reaches its cap it becomes
// rank<N>.log.1 (replacing an older one) and a new rank<N>.log starts, so a
// rank keeps at most twice the cap on disk and always its latest output, the
// part a crash leaves. Fail-open: a write that fails (disk full) ends the
// log, never the relay.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/unique_fd.hpp"

namespace traceml::launcher {

class RankLog {
 public:
  /// Default cap of one file: 16 MiB, so at most 32 MiB a rank.
  static constexpr std::int64_t kDefaultMaxBytes = std::int64_t{16} << 20;

  /// Opens (creates, truncates) `path`. A log that cannot be opened is off:
  /// error() says why.
  RankLog(std::string path, std::int64_t max_bytes = kDefaultMaxBytes);

  /// Appends one line (newline included).
  void write(std::string_view line);

  [[nodiscard]] bool rotated() const { return rotated_; }
  [[nodiscard]] const std::optional<std::string>& error() const { return error_; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  void open();
  void fail(const std::string& what);

  std::string path_;
  std::int64_t max_bytes_;
  std::int64_t written_ = 0;
  UniqueFd fd_;
  bool rotated_ = false;
  std::optional<std::string> error_;
};

}  // namespace traceml::launcher
