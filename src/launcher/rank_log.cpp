#include "launcher/rank_log.hpp"

#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace traceml::launcher {

RankLog::RankLog(std::string path, std::int64_t max_bytes)
    : path_(std::move(path)), max_bytes_(max_bytes) {
  open();
}

void RankLog::open() {
  // O_CLOEXEC: the ranks started after this one must not hold its log.
  fd_ = UniqueFd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  written_ = 0;
  if (!fd_.valid()) fail("cannot open");
}

void RankLog::fail(const std::string& what) {
  if (!error_) error_ = path_ + ": " + what + " (" + std::strerror(errno) + "); the log stops here";
  fd_.reset();
}

void RankLog::write(std::string_view line) {
  if (!fd_.valid()) return;
  if (written_ > 0 && written_ + std::int64_t(line.size()) > max_bytes_) {
    fd_.reset();
    if (std::rename(path_.c_str(), (path_ + ".1").c_str()) != 0) {
      fail("cannot rotate");
      return;
    }
    rotated_ = true;
    open();
    if (!fd_.valid()) return;
  }
  while (!line.empty()) {
    const ssize_t n = ::write(fd_.get(), line.data(), line.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fail("cannot write");
      return;
    }
    line.remove_prefix(static_cast<std::size_t>(n));
    written_ += n;
  }
}

}  // namespace traceml::launcher
