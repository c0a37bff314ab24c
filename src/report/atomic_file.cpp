#include "report/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace traceml::report {

namespace {

std::string reason(int err) {
  return std::strerror(err);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& content, unsigned mode) {
  std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw WriteError(path + ": cannot create file: " + reason(errno));
  const std::string tmp(name.data());
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw WriteError(path + ": cannot write file: " + reason(err));
    }
    done += static_cast<std::size_t>(n);
  }
  // Readable like any file the user creates (mkstemp makes it 0600), unless
  // asked for less.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, mode_t(mode) & 0777 & ~mask);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw WriteError(path + ": cannot write file: " + reason(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw WriteError(path + ": cannot write file: " + reason(err));
  }
}

}  // namespace traceml::report
