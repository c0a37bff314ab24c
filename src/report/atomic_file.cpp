#include "report/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <ostream>
#include <streambuf>
#include <vector>

namespace traceml::report {

namespace {

std::string reason(int err) {
  return std::strerror(err);
}

}  // namespace

namespace {

/// An ostream's bytes written to a descriptor as they come; the first
/// failure is kept (errno) and everything after it dropped.
class FdSink : public std::streambuf {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  [[nodiscard]] int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* p, std::streamsize n) override {
    std::size_t done = 0;
    while (error_ == 0 && done < std::size_t(n)) {
      const ssize_t w = ::write(fd_, p + done, std::size_t(n) - done);
      if (w < 0) {
        if (errno != EINTR) error_ = errno;
        continue;
      }
      done += std::size_t(w);
    }
    return error_ == 0 ? n : 0;
  }

 private:
  int fd_;
  int error_ = 0;
};

/// The temporary file beside `path`, `produce` writing it, then its
/// permissions, fsync and the rename over `path`.
void write_atomic(const std::string& path, const std::function<int(int fd)>& produce,
                  unsigned mode) {
  std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw WriteError(path + ": cannot create file: " + reason(errno));
  const std::string tmp(name.data());
  int err = 0;
  try {
    err = produce(fd);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (err != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw WriteError(path + ": cannot write file: " + reason(err));
  }
  // Readable like any file the user creates (mkstemp makes it 0600), unless
  // asked for less.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, mode_t(mode) & 0777 & ~mask);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    throw WriteError(path + ": cannot write file: " + reason(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    throw WriteError(path + ": cannot write file: " + reason(err));
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& content, unsigned mode) {
  write_atomic(
      path,
      [&content](int fd) {
        FdSink sink(fd);
        sink.sputn(content.data(), std::streamsize(content.size()));
        return sink.error();
      },
      mode);
}

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& produce,
                       unsigned mode) {
  write_atomic(
      path,
      [&produce](int fd) {
        FdSink sink(fd);
        std::ostream out(&sink);
        produce(out);
        out.flush();
        return sink.error();
      },
      mode);
}

}  // namespace traceml::report
