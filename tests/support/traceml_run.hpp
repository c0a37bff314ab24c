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

/// One node of a two-node `traceml run` on this machine: node `node` of 2,
/// `nproc` ranks each, the rendezvous and collector on the given fixed ports
/// (a multi-node run cannot pick free ones), the run named `run_name` in
/// `logs` (each node its own directory, as on machines without a shared file
/// system), the test's own flags, then `--` and the program.
inline std::vector<std::string> traceml_node_argv(const std::string& cli, int node, int nproc,
                                                  int master_port, int collector_port,
                                                  const std::filesystem::path& logs,
                                                  const std::string& run_name,
                                                  const std::vector<std::string>& flags,
                                                  const std::vector<std::string>& program) {
  std::vector<std::string> argv = {cli,
                                   "run",
                                   "--nnodes",
                                   "2",
                                   "--node-rank",
                                   std::to_string(node),
                                   "--nproc-per-node",
                                   std::to_string(nproc),
                                   "--master-addr",
                                   "127.0.0.1",
                                   "--master-port",
                                   std::to_string(master_port),
                                   "--aggregator-port",
                                   std::to_string(collector_port),
                                   "--run-name",
                                   run_name,
                                   "--logs-dir",
                                   logs.string()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

}  // namespace traceml::testing
