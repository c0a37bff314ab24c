// A rank without a model, for end-to-end tests that need many rank processes
// or many short steps cheaply (a starved collector, a program's exit status).
// Each step fetches one item from a wrapped loader and holds a forward phase
// for --step-us, until --steps are done or --for-ms have passed; then the
// program calls traceml::shutdown() (unless --no-shutdown: traceml ends at
// exit) and returns --exit; or, after the shutdown, leaves through _exit
// (--end _exit: no exit handlers) or is killed (--end kill: SIGKILL).
//
//   tiny_rank [--steps N] [--step-us U] [--for-ms T] [--exit CODE] [--no-shutdown]
//             [--end _exit|kill] [--die-after STEP] [--progress FILE] [--grow-mb MB]
//
// --die-after STEP: the rank sends itself SIGKILL right after completing step
// STEP (what the OOM killer does), so a test knows exactly which steps it
// completed. --progress FILE: after every step the count of completed steps
// is written over FILE's first line, for a test whose rank is killed from
// outside. --grow-mb MB: each step's forward phase allocates MB more and
// touches every page of it, keeping it all: a memory leak that ends in a
// failed allocation (ulimit -v) or the OOM killer (a memory cgroup).
//
// Its last line on stdout is "tiny_rank: <N> steps", so a test sees that the
// training itself finished.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <traceml/traceml.hpp>

namespace {

long arg(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtol(argv[i + 1], nullptr, 10);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = arg(argc, argv, "--steps", 100);
  const std::chrono::microseconds step(arg(argc, argv, "--step-us", 0));
  const int code = static_cast<int>(arg(argc, argv, "--exit", 0));
  const long for_ms = arg(argc, argv, "--for-ms", 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(for_ms);
  bool shutdown = true;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--no-shutdown") == 0) shutdown = false;
  const long die_after = arg(argc, argv, "--die-after", 0);
  const long grow_mb = arg(argc, argv, "--grow-mb", 0);
  std::vector<std::unique_ptr<char[]>> leak;
  FILE* progress = nullptr;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--progress") == 0) progress = std::fopen(argv[i + 1], "w");
  traceml::init();
  const std::vector<int> items(static_cast<std::size_t>(steps), 1);
  long done = 0;
  for (int item : traceml::wrap_dataloader(items)) {
    {
      traceml::StepScope s;
      traceml::PhaseScope p(traceml::Phase::Forward);
      if (step.count() > 0) std::this_thread::sleep_for(step * item);
      if (grow_mb > 0) {
        const std::size_t bytes = std::size_t(grow_mb) << 20;
        leak.emplace_back(new char[bytes]);
        std::memset(leak.back().get(), 1, bytes);
      }
    }
    ++done;
    if (progress != nullptr) {
      std::rewind(progress);
      std::fprintf(progress, "%012ld\n", done);
      std::fflush(progress);
    }
    if (done == die_after) std::raise(SIGKILL);
    if (for_ms > 0 && std::chrono::steady_clock::now() >= until) break;
  }
  if (shutdown) traceml::shutdown();
  std::printf("tiny_rank: %ld steps\n", done);
  std::fflush(stdout);
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--end") != 0) continue;
    if (std::strcmp(argv[i + 1], "_exit") == 0) std::_Exit(code);
    if (std::strcmp(argv[i + 1], "kill") == 0) std::raise(SIGKILL);
  }
  return code;
}
