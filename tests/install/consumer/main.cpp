#include <cstdio>

#include <traceml/version.hpp>

int main() {
  std::printf("%s\n", traceml::version());
  return 0;
}
