#include "report/profile_trace.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "report/atomic_file.hpp"
#include "report/json_read.hpp"

namespace traceml::report {
namespace {

namespace fs = std::filesystem;

std::int64_t saturated_add(std::int64_t a, std::int64_t b) {
  return b > 0 && a > std::numeric_limits<std::int64_t>::max() - b
             ? std::numeric_limits<std::int64_t>::max()
             : a + b;
}

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string profile_file_name(int rank, std::int64_t first, std::int64_t last) {
  return "rank" + std::to_string(rank) + "_steps" + std::to_string(first) + "-" +
         std::to_string(last) + ".json";
}

namespace {
constexpr const char* kNativeSuffix = ".kineto.json";
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

std::string native_profile_file_name(int rank, std::int64_t first, std::int64_t last) {
  std::string name = profile_file_name(rank, first, last);
  return name.substr(0, name.size() - 5) + kNativeSuffix;
}

ProfileTraceWriter::ProfileTraceWriter(const std::string& run_dir, int rank, std::int64_t first,
                                       std::int64_t last, std::int64_t max_bytes,
                                       std::string reason)
    : max_bytes_(max_bytes) {
  info_.reason = std::move(reason);
  const fs::path dir = fs::path(run_dir) / "profiles";
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string name = profile_file_name(rank, first, last);
  final_ = (dir / name).string();
  partial_ = (dir / ("." + name + ".partial")).string();
  info_.rank = rank;
  info_.first_step = first;
  info_.last_step = last;
  info_.path = "profiles/" + name;
  std::FILE* f = std::fopen(partial_.c_str(), "wbx");
  if (f == nullptr && errno == EEXIST) {
    // A partial file of an earlier profile of the same steps: replaced.
    std::remove(partial_.c_str());
    f = std::fopen(partial_.c_str(), "wbx");
  }
  if (f == nullptr) throw WriteError(partial_ + ": cannot create file: " + std::strerror(errno));
  std::fclose(f);
  created_ = true;
  buffer_ = "{\"traceEvents\":[\n" + std::string(R"({"name":"process_name","ph":"M","pid":)") +
            std::to_string(rank) + R"(,"args":{"name":"rank )" + std::to_string(rank) +
            " (LibTorch profiler)\"}}";
  bytes_ = std::int64_t(buffer_.size());
}

ProfileTraceWriter::~ProfileTraceWriter() {
  if (created_) std::remove(partial_.c_str());
}

void ProfileTraceWriter::add(const model::ProfileOp& op) {
  std::string e = ",\n{\"name\":" + quoted(op.name) + R"(,"cat":")" +
                  (op.gpu != 0 ? "gpu" : "cpu_op") + R"(","ph":"X","pid":)" +
                  std::to_string(info_.rank) + R"(,"tid":)" + std::to_string(op.thread) +
                  R"(,"ts":)" + std::to_string(op.start_us) + R"(,"dur":)" +
                  std::to_string(op.duration_us);
  std::string args;
  if (op.sequence) args += R"("sequence":)" + std::to_string(*op.sequence);
  if (!op.shapes.empty())
    args += std::string(args.empty() ? "" : ",") + R"("input_shapes":)" + quoted(op.shapes);
  e += args.empty() ? "}" : ",\"args\":{" + args + "}}";
  if (bytes_ + std::int64_t(e.size()) > max_bytes_) {
    ++info_.ops_cut;
    return;
  }
  buffer_ += e;
  bytes_ += std::int64_t(e.size());
  ++info_.ops;
}

void ProfileTraceWriter::flush() {
  if (buffer_.empty() || failed_) return;
  // Opened for each chunk: an open profile holds no descriptor between them.
  std::FILE* f = std::fopen(partial_.c_str(), "ab");
  const bool ok =
      f != nullptr && std::fwrite(buffer_.data(), 1, buffer_.size(), f) == buffer_.size();
  const bool closed = f == nullptr || std::fclose(f) == 0;
  if (!ok || !closed) failed_ = true;
  buffer_.clear();
}

ProfileFileInfo ProfileTraceWriter::finish(std::int64_t ops_cut_by_rank, const std::string& error,
                                           bool replace) {
  info_.ops_cut = saturated_add(info_.ops_cut, ops_cut_by_rank);
  info_.error = error;
  nlohmann::json meta = {{"rank", info_.rank},
                         {"first_step", info_.first_step},
                         {"last_step", info_.last_step},
                         {"ops", info_.ops},
                         {"ops_cut", info_.ops_cut},
                         {"clock", "unix microseconds, on the clock of traceml's steps"},
                         {"producer", "traceml"}};
  if (!error.empty()) meta["error"] = error;
  if (!info_.reason.empty()) meta["reason"] = info_.reason;
  buffer_ += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"traceml\":" +
             meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "}}\n";
  flush();
  if (!failed_ && !replace) {
    // Named only where no file is, atomically (a rank keeping its profile
    // under this name at the same moment wins): renameat2's NOREPLACE, or
    // where the file system has none a second name (link() never replaces
    // one) and the partial name dropped.
    int err = 0;
    if (::renameat2(AT_FDCWD, partial_.c_str(), AT_FDCWD, final_.c_str(), RENAME_NOREPLACE) != 0) {
      err = errno;
      if (err == EINVAL || err == ENOSYS || err == ENOTSUP) {
        err = ::link(partial_.c_str(), final_.c_str()) == 0 ? 0 : errno;
        if (err == 0) ::unlink(partial_.c_str());
      }
    }
    if (err != 0)
      throw WriteError(final_ + (err == EEXIST
                                     ? ": kept already"
                                     : ": cannot write file: " + std::string(std::strerror(err))));
    created_ = false;
    return info_;
  }
  if (failed_ || std::rename(partial_.c_str(), final_.c_str()) != 0) {
    const int err = errno;
    throw WriteError(final_ + ": cannot write file: " + std::strerror(err));
  }
  created_ = false;  // it has its name now
  return info_;
}

namespace {

/// `path` opened for reading when it is a regular file (not a FIFO that
/// would block, not a link); null otherwise.
std::FILE* open_regular(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  std::FILE* f = nullptr;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) f = ::fdopen(fd, "rb");
  if (f == nullptr) ::close(fd);
  return f;
}

/// The metadata at the end of a profile file; std::nullopt when it is not there.
std::optional<ProfileFileInfo> read_profile_info(const fs::path& file) {
  constexpr std::size_t kTail = 8192;
  std::FILE* f = open_regular(file.string());
  if (f == nullptr) return std::nullopt;
  std::string tail;
  if (std::fseek(f, 0, SEEK_END) == 0) {
    const long size = std::ftell(f);
    const long from = size > long(kTail) ? size - long(kTail) : 0;
    if (size >= 0 && std::fseek(f, from, SEEK_SET) == 0) {
      tail.resize(std::size_t(size - from));
      tail.resize(std::fread(tail.data(), 1, tail.size(), f));
    }
  }
  std::fclose(f);
  const auto at = tail.rfind("\"otherData\":");
  const auto close = tail.find_last_of('}');
  if (at == std::string::npos || close == std::string::npos || close < at) return std::nullopt;
  const std::string object = tail.substr(at + 12, close - (at + 12));
  const json_read::Json j = json_read::Json::parse(object, nullptr, false);
  const json_read::Json* m = json_read::object_child(&j, "traceml");
  if (m == nullptr) return std::nullopt;
  const auto count = [m](const char* key) -> std::optional<std::int64_t> {
    const auto v = json_read::integer(json_read::child(m, key));
    return v && *v >= 0 ? std::optional<std::int64_t>(*v) : std::nullopt;
  };
  const auto rank = count("rank");
  const auto first = count("first_step");
  const auto last = count("last_step");
  const auto ops = count("ops");
  const auto cut = count("ops_cut");
  if (!rank || *rank > std::numeric_limits<int>::max() || !first || !last || !ops || !cut)
    return std::nullopt;
  ProfileFileInfo info;
  info.rank = int(*rank);
  info.first_step = *first;
  info.last_step = *last;
  info.ops = *ops;
  info.ops_cut = *cut;
  info.error = json_read::text_or(json_read::child(m, "error"));
  info.reason = json_read::text_or(json_read::child(m, "reason"));
  info.path = "profiles/" + file.filename().string();
  // The name says the same as the metadata, or the file is not one of ours.
  if (file.filename().string() != profile_file_name(info.rank, info.first_step, info.last_step))
    return std::nullopt;
  return info;
}

}  // namespace

std::vector<ProfileFileInfo> read_profile_infos(const std::string& run_dir) {
  // The names first, in order: the cap keeps the lowest ranks and steps.
  std::vector<fs::path> files;
  std::error_code ec;
  fs::directory_iterator it(fs::path(run_dir) / "profiles", ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // The profilers' own traces are listed with their profile, not read.
    if (name.rfind("rank", 0) == 0 && it->path().extension() == ".json" &&
        !ends_with(name, kNativeSuffix))
      files.push_back(it->path());
    if (files.size() >= 64 * kMaxListedProfiles) break;  // a directory flooded on purpose
  }
  std::vector<ProfileFileInfo> out;
  for (const fs::path& file : files) {
    auto info = read_profile_info(file);
    if (!info) continue;
    const std::string native =
        native_profile_file_name(info->rank, info->first_step, info->last_step);
    std::error_code native_ec;
    if (fs::is_regular_file(fs::symlink_status(file.parent_path() / native, native_ec)))
      info->native_path = "profiles/" + native;
    out.push_back(std::move(*info));
  }
  std::sort(out.begin(), out.end(), [](const ProfileFileInfo& a, const ProfileFileInfo& b) {
    return std::tie(a.rank, a.first_step, a.last_step) <
           std::tie(b.rank, b.first_step, b.last_step);
  });
  if (out.size() > kMaxListedProfiles) out.resize(kMaxListedProfiles);
  return out;
}

std::vector<model::ProfileOp> read_profile_ops(const std::string& path, std::size_t max_ops) {
  // One event a line, each far below this (a name and shapes of at most
  // 1 KiB each, escaped): a longer line is not one of ours and is skipped.
  constexpr std::size_t kMaxLine = 16384;
  std::vector<model::ProfileOp> ops;
  std::FILE* f = open_regular(path);
  if (f == nullptr) return ops;
  std::vector<char> buf(kMaxLine);
  bool skipping = false;  // inside a line too long to be one of ours
  while (ops.size() < max_ops && std::fgets(buf.data(), int(buf.size()), f) != nullptr) {
    std::string line(buf.data());
    const bool whole = !line.empty() && line.back() == '\n';
    if (skipping || !whole) {
      skipping = !whole;
      continue;
    }
    line.pop_back();
    if (!line.empty() && line.back() == ',') line.pop_back();
    if (line.size() < 2 || line.front() != '{' || line.back() != '}') continue;
    const json_read::Json e = json_read::Json::parse(line, nullptr, false);
    const auto string_at = [](const json_read::Json* at, const char* key) {
      const json_read::Json* v = json_read::child(at, key);
      return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
    };
    if (string_at(&e, "ph") != "X") continue;
    const auto integer = [&e](const char* key) {
      return json_read::integer(json_read::child(&e, key));
    };
    // Bounds that keep every sum the timeline makes of them far from overflowing.
    constexpr std::int64_t kMaxUs = std::int64_t{1} << 56;
    constexpr std::int64_t kMaxThread = std::int64_t{1} << 20;
    const auto ts = integer("ts");
    const auto dur = integer("dur");
    const auto tid = integer("tid");
    const json_read::Json* name = json_read::child(&e, "name");
    if (!ts || !dur || !tid || name == nullptr || !name->is_string() || *ts < 0 || *ts > kMaxUs ||
        *dur < 0 || *dur > kMaxUs || *tid < 0 || *tid >= kMaxThread)
      continue;
    model::ProfileOp op;
    op.name = name->get<std::string>();
    op.start_us = *ts;
    op.duration_us = *dur;
    op.thread = int(*tid);
    op.gpu = string_at(&e, "cat") == "gpu" ? 1 : 0;
    const json_read::Json* args = json_read::object_child(&e, "args");
    if (const auto seq = json_read::integer(json_read::child(args, "sequence"))) op.sequence = *seq;
    op.shapes = string_at(args, "input_shapes");
    ops.push_back(std::move(op));
  }
  std::fclose(f);
  return ops;
}

nlohmann::ordered_json profiles_json(const std::vector<ProfileFileInfo>& infos) {
  using Json = nlohmann::ordered_json;
  Json list = Json::array();
  for (const ProfileFileInfo& p : infos) {
    Json j = Json::object();
    j["rank"] = p.rank;
    j["first_step"] = p.first_step;
    j["last_step"] = p.last_step;
    j["path"] = p.path;
    j["ops"] = p.ops;
    j["ops_cut"] = p.ops_cut;
    j["error"] = p.error.empty() ? Json() : Json(p.error);
    j["reason"] = p.reason.empty() ? Json() : Json(p.reason);
    j["kineto_trace"] = p.native_path.empty() ? Json() : Json(p.native_path);
    list.push_back(std::move(j));
  }
  return list;
}

}  // namespace traceml::report
