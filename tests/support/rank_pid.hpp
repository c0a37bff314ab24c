// The pid of a rank that `traceml run` started, found by its environment:
// for end-to-end tests that stop or kill one rank from outside.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace traceml::testing {

/// The pid of the process whose environment has TRACEML_SESSION_ID=`run`
/// and RANK=`rank`: a rank that `traceml run` started (-1: none).
inline pid_t rank_pid(const std::string& run, int rank) {
  const std::string session = "TRACEML_SESSION_ID=" + run;
  const std::string rank_var = "RANK=" + std::to_string(rank);
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    bool has_session = false, has_rank = false;
    for (std::size_t at = 0; at < env.size();) {
      const std::size_t end = env.find('\0', at);
      const std::string var = env.substr(at, end == std::string::npos ? end : end - at);
      has_session = has_session || var == session;
      has_rank = has_rank || var == rank_var;
      if (end == std::string::npos) break;
      at = end + 1;
    }
    if (has_session && has_rank) return pid_t(std::stol(name));
  }
  return -1;
}

}  // namespace traceml::testing
