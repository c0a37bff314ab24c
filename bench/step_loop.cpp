// A training loop without a model, for benchmarks that need many ranks or
// many steps cheaply (bench/end_of_run.sh): each step fetches from a wrapped
// loader that sleeps --fetch-us, then runs forward, backward and optimizer
// phases that spin for --phase-us each. Traced like any program: under
// `traceml run`, or standalone.
//
//   step_loop [--steps N] [--fetch-us U] [--phase-us U]
//
// Its last line on stderr is "step_loop: exited at <unix seconds>", written
// after traceml::shutdown(): the script measures from the last rank's exit
// to the launcher's.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <traceml/traceml.hpp>

namespace {

/// A loader whose every item costs `fetch` of waiting, like input that is late.
class SlowSource {
 public:
  SlowSource(std::size_t n, std::chrono::microseconds fetch) : items_(n, 1), fetch_(fetch) {}
  struct Iter {
    const SlowSource* src;
    std::size_t i;
    int operator*() const {
      if (src->fetch_.count() > 0) std::this_thread::sleep_for(src->fetch_);
      return src->items_[i];
    }
    Iter& operator++() {
      ++i;
      return *this;
    }
    bool operator!=(const Iter& o) const { return i != o.i; }
  };
  [[nodiscard]] Iter begin() const { return {this, 0}; }
  [[nodiscard]] Iter end() const { return {this, items_.size()}; }

 private:
  std::vector<int> items_;
  std::chrono::microseconds fetch_;
};

void spin(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

long arg(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtol(argv[i + 1], nullptr, 10);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = arg(argc, argv, "--steps", 1000);
  const std::chrono::microseconds fetch(arg(argc, argv, "--fetch-us", 0));
  const std::chrono::microseconds phase(arg(argc, argv, "--phase-us", 0));
  traceml::init();
  SlowSource source(static_cast<std::size_t>(steps), fetch);
  auto loader = traceml::wrap_dataloader(source);
  for (int item : loader) {
    traceml::StepScope step;
    {
      traceml::PhaseScope p(traceml::Phase::Forward);
      spin(phase * item);
    }
    {
      traceml::PhaseScope p(traceml::Phase::Backward);
      spin(phase);
    }
    {
      traceml::PhaseScope p(traceml::Phase::OptimizerStep);
      spin(phase);
    }
  }
  traceml::shutdown();
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "step_loop: exited at %.6f\n", now);
  return 0;
}
