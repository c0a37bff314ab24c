// Turns a child's byte stream into whole prefixed lines, so that output of
// several ranks relayed to one terminal never interleaves mid-line.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace traceml::launcher {

class LineRelay {
 public:
  /// The longest line kept back waiting for its newline; beyond it the
  /// buffered bytes are emitted as a line of their own, so a child that writes
  /// megabytes without a newline cannot grow the launcher without bound.
  static constexpr std::size_t kMaxLineBytes = std::size_t{64} * 1024;

  /// `emit` receives each finished line: prefix + text + '\n', in one call.
  LineRelay(std::string prefix, std::function<void(std::string_view)> emit);

  /// Adds bytes read from the child; emits every line they complete.
  void feed(std::string_view bytes);
  /// The stream ended: emits a final line without newline, adding one.
  void finish();

 private:
  /// Appends to the unfinished line, cutting it at the cap.
  void keep(std::string_view text);
  void emit_line(std::string_view text);

  std::string prefix_;
  std::function<void(std::string_view)> emit_;
  std::string pending_;
  std::string line_;  ///< reused buffer for prefix + text + '\n'
};

}  // namespace traceml::launcher
