// Files for the readers and writers in src/io and src/data: reading with
// errors that name the file, and atomic writes.
//
// Note [Atomic writes]
// A writer never leaves a half-written file at `path`: it writes a temporary
// file in the same folder (so rename stays within one filesystem), fsyncs it,
// renames it over `path` (atomic on POSIX), then fsyncs the folder so the
// rename itself survives a crash. On any failure the temporary file is removed
// and `path` is untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace anvil::detail {

// A file opened for reading; closes on destruction.
class InputFile {
 public:
  InputFile(const std::string& path, std::string_view op);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::uint64_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }
  // Reads exactly `n` bytes at `offset`; IOError (naming `what`) when the
  // file ends early or the read fails.
  void read_at(void* dst, std::size_t n, std::uint64_t offset, std::string_view what) const;
  std::vector<std::uint8_t> read_all() const;

 private:
  std::string path_;
  std::string op_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// Streams bytes into the temporary file of an atomic write.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void write(const void* data, std::size_t n) = 0;
};

// See Note [Atomic writes]. `produce` writes the content into the sink; an
// exception it throws aborts the write (and is rethrown) with `path` untouched.
void write_file_atomic(const std::string& path, std::string_view op, const std::function<void(OutputSink&)>& produce);

// `'path'` quoted for messages.
std::string quote(std::string_view s);

}  // namespace anvil::detail
