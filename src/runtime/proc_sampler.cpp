#include "runtime/proc_sampler.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "timing/clock.hpp"

namespace traceml::runtime {
namespace {

std::string slurp(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::optional<HostCpuTicks> parse_proc_stat_cpu(const std::string& text) {
  std::istringstream in(text);
  std::string label;
  in >> label;
  if (label != "cpu") return std::nullopt;
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  std::uint64_t v[8] = {};
  int n = 0;
  while (n < 8 && in >> v[n])
    ++n;
  if (n < 4) return std::nullopt;
  HostCpuTicks t;
  for (int i = 0; i < n; ++i)
    t.total += v[i];
  const std::uint64_t idle = v[3] + (n > 4 ? v[4] : 0);
  t.busy = t.total - idle;
  return t;
}

std::optional<std::uint64_t> parse_pid_stat_cpu_ticks(const std::string& text) {
  // The command name (field 2) is in parentheses and may hold spaces: fields
  // are counted from the last ')'. utime and stime are fields 14 and 15.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(text.substr(close + 1));
  std::string field;
  std::uint64_t utime = 0;
  std::uint64_t stime = 0;
  for (int i = 3; i <= 15; ++i) {
    if (!(in >> field)) return std::nullopt;
    try {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return utime + stime;
}

std::optional<double> parse_meminfo_bytes(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() ||
        line[key.size()] != ':')
      continue;
    std::istringstream fields(line.substr(key.size() + 1));
    double kib = 0;
    if (!(fields >> kib)) return std::nullopt;
    return kib * 1024.0;
  }
  return std::nullopt;
}

ProcSampler::ProcSampler()
    : ticks_per_second_(double(sysconf(_SC_CLK_TCK))), page_bytes_(double(sysconf(_SC_PAGESIZE))) {
  last_process_ticks_ = parse_pid_stat_cpu_ticks(slurp("/proc/self/stat"));
  last_process_ns_ = timing::now_ns();
  last_host_ = parse_proc_stat_cpu(slurp("/proc/stat"));
}

model::ProcessSample ProcSampler::sample_process(int global_rank, double ts) {
  model::ProcessSample s;
  s.global_rank = global_rank;
  s.ts = ts;
  const auto ticks = parse_pid_stat_cpu_ticks(slurp("/proc/self/stat"));
  const std::int64_t now = timing::now_ns();
  if (ticks && last_process_ticks_ && *ticks >= *last_process_ticks_ && now > last_process_ns_ &&
      ticks_per_second_ > 0) {
    const double cpu_s = double(*ticks - *last_process_ticks_) / ticks_per_second_;
    s.cpu_percent = 100.0 * cpu_s / (double(now - last_process_ns_) * 1e-9);
  }
  last_process_ticks_ = ticks;
  last_process_ns_ = now;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0) s.cpu_cores = int(cores);
  std::istringstream statm(slurp("/proc/self/statm"));
  double size_pages = 0;
  double resident_pages = 0;
  if (statm >> size_pages >> resident_pages) s.rss_bytes = resident_pages * page_bytes_;
  s.ram_total_bytes = parse_meminfo_bytes(slurp("/proc/meminfo"), "MemTotal");
  return s;
}

model::SystemSample ProcSampler::sample_system(int node_rank, double ts) {
  model::SystemSample s;
  s.node_rank = node_rank;
  s.ts = ts;
  const auto host = parse_proc_stat_cpu(slurp("/proc/stat"));
  if (host && last_host_ && host->total > last_host_->total && host->busy >= last_host_->busy) {
    s.cpu_percent =
        100.0 * double(host->busy - last_host_->busy) / double(host->total - last_host_->total);
  }
  last_host_ = host;
  const std::string meminfo = slurp("/proc/meminfo");
  const auto total = parse_meminfo_bytes(meminfo, "MemTotal");
  const auto available = parse_meminfo_bytes(meminfo, "MemAvailable");
  s.ram_total_bytes = total;
  if (total && available) s.ram_used_bytes = *total - *available;
  return s;
}

}  // namespace traceml::runtime
