// Reads the telemetry JSONL format, version 1 (docs/telemetry-format.md) into
// model::Telemetry: one JSON object per line, validated line by line so that bad
// input is reported as "FILE:LINE: what is wrong" and never half-imported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/telemetry.hpp"

namespace traceml::store {

/// The `format` value of the run header line.
inline constexpr std::string_view kTelemetryFormatName = "traceml-telemetry";
/// The format version the writer emits; the reader accepts 1 to this. Version
/// 2 added each event's `begin_ms` and the step's `thread` (both optional).
inline constexpr std::int64_t kTelemetryFormatVersion = 2;

/// Longest line the reader accepts, in bytes, not counting its "\n". The
/// largest line traceml writes (a system sample of 256 GPUs) is about 60 KB;
/// a longer line is refused before it is parsed, and the reader never holds
/// more than one such line in memory.
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;
/// Deepest nesting of arrays and objects the reader accepts. Records nest 3
/// levels (a step's events.forward.cpu_ms); the limit leaves room for
/// producers' own keys and bounds what one line can cost to parse.
inline constexpr std::size_t kMaxNestingDepth = 64;
/// Most values (numbers, strings, objects, arrays...) one line may hold. The
/// largest record, a system sample of 256 GPUs, holds about 2,100; the limit
/// keeps the parsed form of a line to a few megabytes (80 bytes per value).
inline constexpr std::size_t kMaxLineValues = std::size_t{1} << 16;

/// Bad telemetry input. what() is exactly "FILE:LINE: problem", or "FILE: problem"
/// when the problem has no line (the file cannot be opened or read), so that the
/// CLI prints it after "traceml: error: " unchanged.
class TelemetryError : public std::runtime_error {
 public:
  TelemetryError(std::string source, std::optional<std::int64_t> line, std::string problem);

  /// The file name (or the stream's name) the input came from.
  [[nodiscard]] const std::string& source() const { return source_; }
  /// 1-based physical line number, counting blank lines; absent for file-level problems.
  [[nodiscard]] std::optional<std::int64_t> line() const { return line_; }
  /// The message without the "FILE:LINE: " prefix.
  [[nodiscard]] const std::string& problem() const { return problem_; }

 private:
  std::string source_;
  std::optional<std::int64_t> line_;
  std::string problem_;
};

/// A successful read: the telemetry plus non-fatal findings, each formatted
/// "FILE:LINE: ..." (or "FILE: ..." for a summary). The library never prints;
/// callers decide where warnings go.
struct ReadResult {
  model::Telemetry telemetry;
  std::vector<std::string> warnings;
};

/// Reads a telemetry JSONL file. Throws TelemetryError on any bad input
/// (missing file, malformed line, wrong header, invalid value).
ReadResult read_telemetry_jsonl(const std::string& path);

/// Reads telemetry JSONL from a stream; `source_name` stands for FILE in messages.
ReadResult read_telemetry_jsonl(std::istream& in, const std::string& source_name);

/// Parses telemetry JSONL held in memory; `source_name` stands for FILE in messages.
ReadResult parse_telemetry_jsonl(std::string_view text, const std::string& source_name);

}  // namespace traceml::store
