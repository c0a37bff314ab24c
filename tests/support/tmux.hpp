// A real terminal for end-to-end tests: a tmux server of its own (its own
// socket) running one command in one window of a fixed size, whose screen
// and history the test reads and to which it sends keys.
#pragma once

#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "subprocess.hpp"

namespace traceml::testing {

/// `s` quoted for the shell tmux runs the command with.
inline std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class Tmux {
 public:
  Tmux(const std::string& command, int width, int height)
      : socket_("traceml-tmux-" + std::to_string(::getpid()) + "-" + std::to_string(++count_)) {
    const ProcessResult r =
        run_process({"/usr/bin/env", "tmux", "-L", socket_, "new-session", "-d", "-s", "t", "-x",
                     std::to_string(width), "-y", std::to_string(height), command});
    started_ = r.exit_code == 0;
    error_ = r.err;
  }
  ~Tmux() { run_process({"/usr/bin/env", "tmux", "-L", socket_, "kill-server"}); }
  Tmux(const Tmux&) = delete;
  Tmux& operator=(const Tmux&) = delete;

  [[nodiscard]] bool started() const { return started_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  /// What the window shows now.
  [[nodiscard]] std::string screen() const {
    return run_process({"/usr/bin/env", "tmux", "-L", socket_, "capture-pane", "-p", "-t", "t"})
        .out;
  }
  /// The window and its history.
  [[nodiscard]] std::string history() const {
    return run_process(
               {"/usr/bin/env", "tmux", "-L", socket_, "capture-pane", "-p", "-S", "-", "-t", "t"})
        .out;
  }
  void resize(int width, int height) const {
    run_process({"/usr/bin/env", "tmux", "-L", socket_, "resize-window", "-t", "t", "-x",
                 std::to_string(width), "-y", std::to_string(height)});
  }
  void keys(const std::string& k) const {
    run_process({"/usr/bin/env", "tmux", "-L", socket_, "send-keys", "-t", "t", k});
  }
  /// Waits until `text()` (the screen by default) shows a match of `re`;
  /// what it showed then, or "(timed out) " and the last look.
  template <class Text>
  std::string wait_for(const std::regex& re, std::chrono::seconds limit, Text text) const {
    const auto end = std::chrono::steady_clock::now() + limit;
    std::string s;
    do {
      s = text();
      if (std::regex_search(s, re)) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } while (std::chrono::steady_clock::now() < end);
    return "(timed out) " + s;
  }
  std::string wait_for(const std::regex& re, std::chrono::seconds limit) const {
    return wait_for(re, limit, [this] { return screen(); });
  }

 private:
  static inline int count_ = 0;
  std::string socket_;
  bool started_ = false;
  std::string error_;
};

}  // namespace traceml::testing
