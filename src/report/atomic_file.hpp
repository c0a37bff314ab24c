// Writing artifacts so that a reader never sees half a file and a failure
// never destroys a good one: write a temporary file beside the target, flush
// it, then rename it over the target.
#pragma once

#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace traceml::report {

struct WriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Replaces `path` with `content` atomically, its permissions `mode` less
/// the umask (0600 for a file that holds a secret). Throws WriteError with a
/// one-line message (path and reason) on failure; the old file stays intact.
void write_file_atomic(const std::string& path, const std::string& content, unsigned mode = 0666);
/// The same, the content written by `produce` as it makes it (a timeline of
/// megabytes is never held whole in memory). What `produce` throws leaves
/// no file and is thrown on.
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& produce,
                       unsigned mode = 0666);

}  // namespace traceml::report
