#include "launcher/program_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace traceml::launcher {
namespace {

enum class FileKind { Missing, NotExecutable, Executable };

FileKind classify(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileKind::Missing;
  // A directory passes access(X_OK) but cannot be executed.
  if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0) return FileKind::NotExecutable;
  return FileKind::Executable;
}

[[noreturn]] void throw_not_found(const std::string& program) {
  throw LaunchError(program + ": program not found (give a path, or put it on PATH)");
}

[[noreturn]] void throw_not_executable(const std::string& program) {
  throw LaunchError(program + ": not executable");
}

}  // namespace

std::string resolve_program(const std::string& program) {
  if (program.empty()) throw LaunchError("no program given: put it after `--`");
  if (program.find('/') != std::string::npos) {
    switch (classify(program)) {
      case FileKind::Missing:
        throw_not_found(program);
      case FileKind::NotExecutable:
        throw_not_executable(program);
      case FileKind::Executable:
        return program;
    }
  }
  // execvp's default when PATH is unset.
  const char* env_path = std::getenv("PATH");
  const std::string_view search = env_path != nullptr ? env_path : "/bin:/usr/bin";
  bool seen_not_executable = false;
  std::size_t begin = 0;
  while (begin <= search.size()) {
    std::size_t end = search.find(':', begin);
    if (end == std::string_view::npos) end = search.size();
    std::string dir(search.substr(begin, end - begin));
    if (dir.empty()) dir = ".";  // an empty PATH entry means the current directory
    std::string candidate = dir + "/" + program;
    switch (classify(candidate)) {
      case FileKind::Executable:
        return candidate;
      case FileKind::NotExecutable:
        seen_not_executable = true;
        break;
      case FileKind::Missing:
        break;
    }
    begin = end + 1;
  }
  if (seen_not_executable) throw_not_executable(program);
  throw_not_found(program);
}

}  // namespace traceml::launcher
