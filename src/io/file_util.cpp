#include "io/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "anvil/error.h"

namespace anvil::detail {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Retries on EINTR and short writes.
void write_all(int fd, const void* data, std::size_t n, const std::string& tmp, std::string_view op) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (n > 0) {
    const ::ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw IOError(cat(op, ": cannot write ", quote(tmp), ": ", errno_text(errno)));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

class FdSink final : public OutputSink {
 public:
  FdSink(int fd, const std::string& tmp, std::string_view op) : fd_(fd), tmp_(tmp), op_(op) {}
  void write(const void* data, std::size_t n) override { write_all(fd_, data, n, tmp_, op_); }

 private:
  int fd_;
  const std::string& tmp_;
  std::string_view op_;
};

std::string temp_name_for(const std::filesystem::path& target) {
  static std::atomic<std::uint64_t> counter{0};
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return (target.parent_path() / cat(".", target.filename().string(), ".tmp.", ::getpid(), ".", counter.fetch_add(1),
                                     ".", static_cast<std::uint64_t>(ticks) % 1000000))
      .string();
}

}  // namespace

std::string quote(std::string_view s) {
  constexpr std::size_t kMaxShown = 200;
  std::string out = "'";
  std::size_t shown = 0;
  for (unsigned char c : s) {
    if (shown++ == kMaxShown) {
      out += "...";
      break;
    }
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

InputFile::InputFile(const std::string& path, std::string_view op) : path_(path), op_(op) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw IOError(cat(op, ": cannot open ", quote(path), ": ", errno_text(errno)));
  struct ::stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw IOError(cat(op, ": cannot stat ", quote(path), ": ", errno_text(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw IOError(cat(op, ": ", quote(path), " is not a regular file; expected a file, got ",
                      S_ISDIR(st.st_mode) ? "a directory" : "a special file"));
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(void* dst, std::size_t n, std::uint64_t offset, std::string_view what) const {
  auto* p = static_cast<std::uint8_t*>(dst);
  std::size_t done = 0;
  while (done < n) {
    const ::ssize_t r = ::pread(fd_, p + done, n - done, static_cast<::off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IOError(cat(op_, ": cannot read ", what, " of ", quote(path_), ": ", errno_text(errno)));
    }
    if (r == 0)
      throw IOError(cat(op_, ": ", quote(path_), " ended while reading ", what, "; expected ", n, " bytes at offset ",
                        offset, ", got ", done, " (the file changed while being read?)"));
    done += static_cast<std::size_t>(r);
  }
}

std::vector<std::uint8_t> InputFile::read_all() const {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size_));
  read_at(bytes.data(), bytes.size(), 0, "the file");
  return bytes;
}

void write_file_atomic(const std::string& path, std::string_view op, const std::function<void(OutputSink&)>& produce) {
  ANVIL_CHECK(!path.empty(), ValueError, op, ": empty path; expected a file name");
  const std::filesystem::path target(path);
  ANVIL_CHECK(target.has_filename(), ValueError, op, ": ", quote(path), " names a folder; expected a file name");
  const std::string tmp = temp_name_for(target);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    throw IOError(
        cat(op, ": cannot create a temporary file beside ", quote(path), " (", quote(tmp), "): ", errno_text(errno)));
  bool fd_open = true;
  try {
    FdSink sink(fd, tmp, op);
    produce(sink);
    if (::fsync(fd) != 0) throw IOError(cat(op, ": fsync of ", quote(tmp), " failed: ", errno_text(errno)));
    fd_open = false;
    if (::close(fd) != 0) throw IOError(cat(op, ": close of ", quote(tmp), " failed: ", errno_text(errno)));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw IOError(cat(op, ": cannot rename ", quote(tmp), " to ", quote(path), ": ", errno_text(errno)));
  } catch (...) {
    if (fd_open) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // The rename is done; make it durable. A folder that cannot be opened or
  // fsync'ed (some filesystems refuse) leaves a complete file all the same.
  std::string folder = target.parent_path().string();
  if (folder.empty()) folder = ".";
  const int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    const int rc = ::fsync(dir_fd);
    const int err = errno;
    ::close(dir_fd);
    if (rc != 0 && err != EINVAL && err != EROFS)
      throw IOError(cat(op, ": fsync of the folder ", quote(folder), " after writing ", quote(path),
                        " failed: ", errno_text(err)));
  }
}

}  // namespace anvil::detail
