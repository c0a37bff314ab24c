#include <cstdio>

#include <traceml/traceml.hpp>
#include <traceml/version.hpp>

// The package gives a user's compile the public headers and nothing else of
// the build: no internal definition leaks out.
#ifdef TRACEML_VERSION
#error "TRACEML_VERSION leaks from the traceml package"
#endif

int main() {
  // Links the runtime behind the API (and so every library it needs), without
  // tracing: a disabled init() starts nothing.
  traceml::Options options;
  options.enabled = false;
  traceml::init(options);
  {
    traceml::StepScope step;
    traceml::PhaseScope phase(traceml::Phase::OptimizerStep);
  }
  traceml::shutdown();
  std::printf("%s\n", traceml::version());
  return 0;
}
