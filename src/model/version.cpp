#include "traceml/version.hpp"

namespace traceml {

const char* version() {
  return TRACEML_VERSION;
}

}  // namespace traceml
