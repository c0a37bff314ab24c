// traceml: the command-line entry point. CLI11 wiring only; every subcommand
// is a thin call into the library.
#include <iostream>

int main() {
  std::cout << "traceml\n";
  return 0;
}
