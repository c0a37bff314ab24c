// `traceml serve` started by a test, and ranks started as torchrun starts
// them: shared by the serve end-to-end tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/subprocess.hpp"

namespace traceml::testing {

inline const std::string kServeCli = TRACEML_CLI_PATH;

namespace served {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// `traceml serve` on a free port, its variables written to an env file.
struct Served {
  Served(const TempDir& dir, const std::vector<std::string>& flags,
         const std::vector<std::string>& env = {})
      : env_file(dir.path() / "traceml.env"), child(argv(dir, flags, env)) {}

  std::vector<std::string> argv(const TempDir& dir, const std::vector<std::string>& flags,
                                const std::vector<std::string>& env) const {
    std::vector<std::string> a = {"/usr/bin/env"};
    a.insert(a.end(), env.begin(), env.end());
    for (const std::string& s :
         {kServeCli, std::string("serve"), std::string("--port"), std::string("0"),
          std::string("--env-file"), env_file.string(), std::string("--logs-dir"),
          (dir.path() / "logs").string(), std::string("--interval"), std::string("0.2")})
      a.push_back(s);
    a.insert(a.end(), flags.begin(), flags.end());
    return a;
  }

  /// TRACEML_AGGREGATOR_HOST=... and TRACEML_AGGREGATOR_PORT=... once serve
  /// listens (empty if it never does).
  std::vector<std::string> rank_env() {
    for (int i = 0; i < 300 && !fs::exists(env_file); ++i)
      std::this_thread::sleep_for(20ms);
    std::vector<std::string> vars;
    std::ifstream in(env_file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) vars.push_back(line);
    return vars;
  }

  /// Waits until serve's stderr holds `text` (at most `limit`).
  bool said(const std::string& text, std::chrono::milliseconds limit = 60s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (child.err_so_far().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  fs::path env_file;
  ChildProcess child;
};

/// One rank of a `world`-rank job, started as torchrun starts it.
std::vector<std::string> rank_argv(const std::vector<std::string>& serve_env, int rank, int world,
                                   int master_port, const std::vector<std::string>& program,
                                   const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> a = {"/usr/bin/env",
                                "RANK=" + std::to_string(rank),
                                "LOCAL_RANK=" + std::to_string(rank),
                                "WORLD_SIZE=" + std::to_string(world),
                                "LOCAL_WORLD_SIZE=" + std::to_string(world),
                                "MASTER_ADDR=127.0.0.1",
                                "MASTER_PORT=" + std::to_string(master_port),
                                "TRACEML_INTERVAL=0.2"};
  a.insert(a.end(), serve_env.begin(), serve_env.end());
  a.insert(a.end(), extra_env.begin(), extra_env.end());
  a.insert(a.end(), program.begin(), program.end());
  return a;
}

}  // namespace served

using served::rank_argv;
using served::Served;

}  // namespace traceml::testing
