#include "store/run_dir.hpp"

namespace traceml::store {

std::string default_run_name(const std::string& program, std::time_t now) {
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", &tm);
  return program + "_" + stamp;
}

std::filesystem::path first_free_run_dir(const std::filesystem::path& logs,
                                         const std::string& name) {
  std::filesystem::path dir = logs / name;
  for (int n = 2; std::filesystem::exists(dir); ++n)
    dir = logs / (name + "_" + std::to_string(n));
  return dir;
}

}  // namespace traceml::store
