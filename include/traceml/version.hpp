// traceml's version, for programs that link the library.
#pragma once

namespace traceml {

/// The library's version, e.g. "0.1.0".
const char* version();

}  // namespace traceml
