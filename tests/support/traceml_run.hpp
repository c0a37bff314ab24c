// The `traceml run` command line of the end-to-end tests: a logs directory of
// the test's own, a system-chosen collector port and rendezvous port (so that
// tests run in parallel), `nproc` ranks, the test's own flags, then `--` and
// the program.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace traceml::testing {

inline std::vector<std::string> traceml_run_argv(const std::string& cli,
                                                 const std::filesystem::path& logs,
                                                 const std::string& run_name, int nproc,
                                                 const std::vector<std::string>& flags,
                                                 const std::vector<std::string>& program) {
  std::vector<std::string> argv = {cli,
                                   "run",
                                   "--logs-dir",
                                   logs.string(),
                                   "--run-name",
                                   run_name,
                                   "--aggregator-port",
                                   "0",
                                   "--master-port",
                                   "0",
                                   "--nproc-per-node",
                                   std::to_string(nproc)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

}  // namespace traceml::testing
