// fuzz_run_db: a run database as `traceml report RUN_DIR`, `view`, `export`
// and `compare` read it (store/run_db.hpp). The file is the user's: copied
// between machines, cut short by a full disk, edited, or anything at all.
// The input is written as the file and read. Promises checked, each aborting
// when broken:
// - read_run_db returns, or throws RunDbError (one line for the user), and
//   nothing else: no crash, no leak, no undefined behaviour (ASan, UBSan);
// - every record it returns passes the checks every reader applies
//   (model::check): what it gives a report is what a report can take;
// - the file is only read: its bytes are the same afterwards.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/record_kinds.hpp"
#include "store/run_db.hpp"

namespace {

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "fuzz_run_db: %s\n", why.c_str());
  std::abort();
}

/// A file of this process's own, made once.
const std::string& db_path() {
  static const std::string path = [] {
    char dir[] = "/tmp/fuzz_run_db.XXXXXX";
    if (::mkdtemp(dir) == nullptr) broken("cannot make a temporary directory");
    return std::string(dir) + "/telemetry.db";
  }();
  return path;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <class List>
void check_all(const List& records, const char* what) {
  for (const auto& r : records)
    if (const auto why = traceml::model::check(r)) broken(std::string(what) + ": " + *why);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace traceml;
  const std::string& path = db_path();
  for (const char* suffix : {"-wal", "-shm", "-journal"})
    std::remove((path + suffix).c_str());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    if (!out) broken("cannot write the input");
  }
  try {
    const store::RunData run = store::read_run_db(path);
    check_all(run.telemetry.ranks, "rank");
    check_all(run.telemetry.steps, "step");
    check_all(run.telemetry.step_memory, "step memory");
    check_all(run.telemetry.system, "system sample");
    check_all(run.telemetry.process, "process sample");
  } catch (const store::RunDbError&) {
    // The one way a bad file may end: a line for the user.
  }
  const std::vector<char> after = read_all(path);
  if (after.size() != size ||
      !std::equal(after.begin(), after.end(), reinterpret_cast<const char*>(data)))
    broken("reading changed the file");
  return 0;
}
