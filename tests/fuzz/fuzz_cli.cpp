// fuzz_cli: the command line, the options boundary. The input is an argument
// vector (NUL-separated; `traceml` is argv[0]), read exactly as `traceml`
// reads it (cli/command_line.cpp: CLI11, then the command's check of ranges
// and names); nothing is ever run. A broken promise (cli_invariants.hpp)
// aborts, so that libFuzzer keeps the input. Under ASan+UBSan the range
// checks meet every number CLI11 lets through (NaN, 1e308, -0, hex).
// The checks look at output paths (stat and access, never a write): each
// input is read in an empty directory of its own, which must stay empty, so
// that relative paths meet nothing of the tree the fuzzer runs in and a
// check that created a file would be a finding.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli_invariants.hpp"

namespace {

struct Sandbox {
  std::filesystem::path dir;
  int home = -1;  ///< the fuzzer's own working directory, returned to after each input
};

// Never destroyed: the atexit handler that removes the directory runs
// after static destructors of objects made before it was registered.
const Sandbox& sandbox() {
  static const Sandbox* const s = [] {
    auto* b = new Sandbox;
    std::string tmpl = (std::filesystem::temp_directory_path() / "fuzz_cli.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    b->dir = tmpl;
    b->home = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (b->home < 0) std::abort();
    std::atexit([] { ::rmdir(sandbox().dir.c_str()); });
    return b;
  }();
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto args = traceml::fuzz::cli_args_of(data, size);
  if (args.size() > 64) return 0;  // a shell's limit is far off; so is anything new
  const Sandbox& box = sandbox();
  if (::chdir(box.dir.c_str()) != 0) std::abort();
  const auto why = traceml::fuzz::check_cli_args(args, &box.dir);
  // Back before anything else: libFuzzer's relative paths (corpus,
  // artifacts) are the fuzzer's working directory's.
  if (::fchdir(box.home) != 0) std::abort();
  if (why) {
    std::fprintf(stderr, "fuzz_cli: %s\n", why->c_str());
    std::abort();
  }
  return 0;
}
