#include "runtime/standalone.hpp"

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "collector/collector.hpp"
#include "collector/finalize.hpp"
#include "runtime/pipe_safety.hpp"
#include "store/run_dir.hpp"
#include "transport/hello.hpp"

namespace traceml::runtime {
namespace {

/// The analysis window of a standalone run: `traceml report`'s default, so
/// that rebuilding the summary from the run directory gives the same bytes.
constexpr std::int64_t kWindow = 10000;

std::string program_name() {
  // glibc's short name of argv[0]; the binary is what users recognise.
  std::string name = program_invocation_short_name != nullptr ? program_invocation_short_name : "";
  return name.empty() ? "program" : name;
}

}  // namespace

std::string standalone_run_dir(const Config& config, const std::string& program, std::time_t now) {
  std::string name;
  if (config.run_name) {
    name = *config.run_name;
  } else {
    name = store::default_run_name(program, now);
    if (config.identity.world_size.value_or(1) > 1)
      name += "_rank" + std::to_string(config.identity.global_rank);
  }
  return store::first_free_run_dir(config.logs_dir, name).string();
}

Standalone::Standalone(const Config& config)
    : run_dir_(standalone_run_dir(config, program_name(), std::time(nullptr))),
      token_(transport::random_run_token()),
      config_rank_(config.identity.global_rank),
      page_time_(config.page_time),
      page_memory_bytes_(config.page_memory_bytes) {
  collector::CollectorOptions o;
  o.bind_host = "127.0.0.1";
  o.port = 0;
  o.token = token_;
  o.run_dir = run_dir_;
  o.run.run_name = std::filesystem::path(run_dir_).filename().string();
  // One rank of several, traced on its own: its Hello names its place in the
  // world, which the collector checks against the run's world size.
  o.run.world_size = config.identity.world_size.value_or(1);
  o.run.strategy = model::strategy_from_string(config.strategy);
  collector_ = std::make_unique<collector::Collector>(o);
}

Standalone::~Standalone() = default;

std::uint16_t Standalone::port() const {
  return collector_->port();
}

void Standalone::finish(std::chrono::steady_clock::time_point deadline) {
  collector_->finish(deadline, 1);
  try {
    report::PageLimits page;
    if (page_time_) page.time = *page_time_;
    if (page_memory_bytes_) page.memory_bytes = *page_memory_bytes_;
    const report::FinalSummary f =
        collector::finalize_run(run_dir_, collector_->take_run(), kWindow, page);
    std::string verdict;
    const auto& p = f.json["primary_diagnosis"];
    if (p.is_object() && p.contains("status") && p["status"].is_string())
      verdict = p["status"].get<std::string>();
    if (p.is_object() && p.contains("summary") && p["summary"].is_string())
      verdict += ": " + p["summary"].get<std::string>();
    // One rank of several: its verdict is not the job's, and says so.
    const auto& partial = f.json.contains("partial") ? f.json["partial"] : report::Json();
    std::string scope;
    if (partial.is_object() && partial.contains("world_size") &&
        partial["world_size"].is_number_integer())
      scope = "rank " + std::to_string(config_rank_) + " of " +
              std::to_string(partial["world_size"].get<std::int64_t>()) + ", a partial view: ";
    write_stderr_line("traceml: " + scope + verdict);
    if (partial.is_object() && partial.contains("merge_command") &&
        partial["merge_command"].is_string())
      write_stderr_line("traceml: merge the job's ranks: " +
                        partial["merge_command"].get<std::string>());
    write_stderr_line("traceml: summary written to " + run_dir_ + "/final_summary.txt");
    if (f.html_error) write_stderr_line("traceml: warning: " + *f.html_error);
    if (f.timeline_error) write_stderr_line("traceml: warning: " + *f.timeline_error);
  } catch (const std::exception& e) {
    write_stderr_line(std::string("traceml: warning: no summary written: ") + e.what());
  }
}

}  // namespace traceml::runtime
