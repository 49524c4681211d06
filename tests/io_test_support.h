// Helpers for the io and data tests: temporary folders, crafted files, the
// interop data pattern shared with tests/python/interop.py, and running that
// script.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "anvil/anvil.h"

namespace anvil::testing {

using Bytes = std::vector<std::uint8_t>;

// A fresh folder under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("anvil-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    return names;
  }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

inline Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void append(Bytes& out, std::string_view s) { out.insert(out.end(), s.begin(), s.end()); }

// Runs `fn`, expecting ErrorType whose message contains every piece.
template <typename ErrorType, typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string_view> pieces) {
  try {
    fn();
    ADD_FAILURE() << "expected " << ::testing::internal::GetTypeName<ErrorType>() << ", nothing was thrown";
  } catch (const ErrorType& e) {
    const std::string what = e.what();
    for (std::string_view piece : pieces)
      EXPECT_NE(what.find(piece), std::string::npos) << "message lacks '" << piece << "': " << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected " << ::testing::internal::GetTypeName<ErrorType>()
                  << ", got another error: " << e.what();
  }
}

// --- the interop pattern (keep in step with tests/python/interop.py) ------------
// Bytes from a 64-bit LCG: every float bit pattern class shows up (NaNs with
// payloads, infinities, subnormals, negative zero), so a bit-for-bit
// comparison means something. Bools are 0/1.
inline Bytes pattern_bytes(DType t, std::int64_t numel, std::uint64_t salt) {
  const std::size_t n = static_cast<std::size_t>(numel) * element_size(t);
  Bytes out(n);
  std::uint64_t state = salt * 0x9e3779b97f4a7c15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = t == boolean ? static_cast<std::uint8_t>((state >> 40) & 1) : static_cast<std::uint8_t>(state >> 56);
  }
  return out;
}

struct InteropCase {
  const char* name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t salt;
};
inline const std::vector<InteropCase>& interop_cases() {
  static const std::vector<InteropCase> cases = {
      {"a.f32", f32, {2, 3}, 1},   {"b.f64", f64, {5}, 2},       {"c.i32", i32, {4, 1, 2}, 3},
      {"d.i64", i64, {3}, 4},      {"e.u8", u8, {7}, 5},         {"f.bool", boolean, {2, 2}, 6},
      {"g.empty", f32, {0, 3}, 7}, {"h.scalar", f64, {}, 8},     {"i.big", f32, {64, 33}, 9},
      {"j.f16", f16, {3, 5}, 12},  {"k.bf16", bf16, {4, 3}, 13},
  };
  return cases;
}

// The cases .npy can hold: NumPy has no bfloat16.
inline std::vector<InteropCase> npy_cases() {
  std::vector<InteropCase> out;
  for (const InteropCase& c : interop_cases())
    if (c.dtype != bf16) out.push_back(c);
  return out;
}

inline Tensor pattern_tensor(const InteropCase& c, Device d = cpu()) {
  const Shape shape(c.shape);
  const Bytes b = pattern_bytes(c.dtype, shape.numel(), c.salt);
  return from_host(b.data(), shape, c.dtype, d);
}

// The bytes of a tensor's elements in C order, read back through the host.
inline Bytes tensor_bytes(const Tensor& t) {
  const Tensor h = t.contiguous().cpu();
  const auto* p = static_cast<const std::uint8_t*>(h.raw_data_ptr());
  return h.numel() == 0 ? Bytes{} : Bytes(p, p + h.nbytes());
}

// --- running tests/python/interop.py -----------------------------------------------

// From CMake, not __FILE__: ccache's base_dir makes __FILE__ relative.
inline std::filesystem::path python_dir() { return std::filesystem::path(ANVIL_SOURCE_DIR) / "tests" / "python"; }

// Runs `run_interop.sh <venv> <args>` (it creates the venv with numpy and
// safetensors on first use); returns the exit status and fills `output`.
inline int run_interop(const std::string& args, std::string& output) {
  std::filesystem::path venv;
  if (const char* env = std::getenv("ANVIL_PYTHON_VENV"); env != nullptr && *env != '\0')
    venv = env;
  else
    venv = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "python-venv";
  const std::string cmd =
      "bash '" + (python_dir() / "run_interop.sh").string() + "' '" + venv.string() + "' " + args + " 2>&1";
  output.clear();
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    output = "popen failed for: " + cmd;
    return -1;
  }
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) output += buf.data();
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace anvil::testing
