// fuzz_profile: a profile file in a run directory (docs/profiling.md), as
// `traceml report` and `traceml view` list it (read_profile_infos: its
// metadata, read from its end) and `traceml export --format chrome-trace`
// draws it (read_profile_ops: one event a line). Anyone may have edited the
// file. The input is the file's bytes, named profiles/rank0_steps1-2.json.
// Promises checked, each aborting when broken:
// - neither reader crashes, reads outside the input (ASan) or throws;
// - a profile listed has the name its metadata gives, counts >= 0, and a
//   path inside profiles/;
// - every op read is within the bounds the timeline relies on (start and
//   duration in [0, 2^56] us, thread in [0, 2^20)), its name and shapes
//   valid UTF-8, and there are at most as many as asked.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "model/text.hpp"
#include "report/profile_trace.hpp"

namespace {

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "fuzz_profile: %s\n", why.c_str());
  std::abort();
}

/// The run directory every input is written into (made once).
const std::filesystem::path& run_dir() {
  static const std::filesystem::path dir = [] {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "traceml-fuzz-profile-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) broken("cannot make a temporary directory");
    std::filesystem::create_directories(std::filesystem::path(tmpl) / "profiles");
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path file = run_dir() / "profiles" / "rank0_steps1-2.json";
  {
    std::FILE* f = std::fopen(file.c_str(), "wb");
    if (f == nullptr) broken("cannot write the input");
    if (size > 0 && std::fwrite(data, 1, size, f) != size) broken("cannot write the input");
    std::fclose(f);
  }
  try {
    for (const auto& p : traceml::report::read_profile_infos(run_dir().string())) {
      if (p.path !=
          "profiles/" + traceml::report::profile_file_name(p.rank, p.first_step, p.last_step))
        broken("a listed profile's path is not its name: " + p.path);
      if (p.ops < 0 || p.ops_cut < 0) broken("a negative count");
    }
    constexpr std::size_t kMax = 64;
    const auto ops = traceml::report::read_profile_ops(file.string(), kMax);
    if (ops.size() > kMax) broken("more ops than asked");
    for (const auto& op : ops) {
      if (op.start_us < 0 || op.start_us > (std::int64_t{1} << 56) || op.duration_us < 0 ||
          op.duration_us > (std::int64_t{1} << 56) || op.thread < 0 || op.thread >= (1 << 20))
        broken("an op out of bounds");
      if (!traceml::model::valid_utf8(op.name) || !traceml::model::valid_utf8(op.shapes))
        broken("an op's text is not UTF-8");
    }
  } catch (const std::exception& e) {
    broken(std::string("threw: ") + e.what());
  }
  return 0;
}
