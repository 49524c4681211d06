#include "backends/cuda/nvrtc_compile.h"

#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "anvil/error.h"
#include "backends/common/kernel_sources.h"
#include "core/env_flag.h"

namespace anvil::cuda {

namespace {

struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p != nullptr) nvrtcDestroyProgram(&p);
  }
};

std::string program_log(nvrtcProgram p) {
  std::size_t size = 0;
  if (nvrtcGetProgramLogSize(p, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  constexpr std::size_t kMaxLog = 4000;
  if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n...";
  return log;
}

void check(nvrtcResult r, const char* what, const device_common::KernelSpec& spec) {
  if (r == NVRTC_SUCCESS) return;
  throw CompileError(detail::cat("cuda: ", what, " failed with ", nvrtcGetErrorString(r), " for kernel source ",
                                 spec.file, " (", spec.name, ")"));
}

}  // namespace

std::vector<int> nvrtc_architectures() {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> archs(static_cast<std::size_t>(n));
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  std::sort(archs.begin(), archs.end());
  return archs;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

CompiledProgram compile_program(const device_common::KernelSpec& spec, int major, int minor, bool ptx) {
  const int wanted = major * 10 + minor;
  const std::vector<int> archs = nvrtc_architectures();
  ANVIL_CHECK(!archs.empty(), CompileError, "cuda: NVRTC ", nvrtc_version(), " reports no GPU architectures");
  ANVIL_CHECK(wanted >= archs.front(), NotSupported, "cuda: compute capability ", major, ".", minor,
              " is older than this NVRTC supports; expected at least ", archs.front() / 10, ".", archs.front() % 10);
  const bool known = std::find(archs.begin(), archs.end(), wanted) != archs.end();
  int arch = wanted;
  if (!known) {  // newer than this NVRTC: PTX for the newest it knows
    arch = archs.front();
    for (int a : archs)
      if (a <= wanted) arch = a;
  }
  CompiledProgram out;
  out.is_cubin = known && !ptx;
  out.target = (out.is_cubin ? "sm_" : "compute_") + std::to_string(arch);

  const std::string source = device_common::assemble_source("prelude_cuda.h", spec.file);
  Program prog;
  check(nvrtcCreateProgram(&prog.p, source.c_str(), spec.file.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram",
        spec);
  std::vector<std::string> options = {"--gpu-architecture=" + out.target, "--fmad=false", "--std=c++17"};
  for (const std::string& d : spec.defines) options.push_back("-D" + d);
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog.p, static_cast<int>(argv.size()), argv.data());
  out.log = program_log(prog.p);
  if (r != NVRTC_SUCCESS) {
    std::string opts;
    for (const std::string& o : options) opts += " " + o;
    throw CompileError(detail::cat("cuda: compiling kernel source ", spec.file, " (", spec.name, ") for ", out.target,
                                   " failed with ", nvrtcGetErrorString(r), "; options:", opts, "\n", out.log));
  }
  std::size_t size = 0;
  if (out.is_cubin) {
    check(nvrtcGetCUBINSize(prog.p, &size), "nvrtcGetCUBINSize", spec);
    out.image.resize(size);
    check(nvrtcGetCUBIN(prog.p, out.image.data()), "nvrtcGetCUBIN", spec);
  } else {
    check(nvrtcGetPTXSize(prog.p, &size), "nvrtcGetPTXSize", spec);
    out.image.resize(size);  // includes the NUL the driver's loader wants
    check(nvrtcGetPTX(prog.p, out.image.data()), "nvrtcGetPTX", spec);
  }
  return out;
}

namespace {

std::uint64_t fnv1a(const std::string& text, std::uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::filesystem::path cache_dir() {
  if (const char* d = std::getenv("ANVIL_CACHE_DIR"); d != nullptr && *d != '\0')
    return std::filesystem::path(d) / "cuda";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0')
    return std::filesystem::path(x) / "anvil" / "cuda";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
    return std::filesystem::path(h) / ".cache" / "anvil" / "cuda";
  return {};
}

}  // namespace

CompiledProgram compile_program_cached(const device_common::KernelSpec& spec, int major, int minor) {
  const std::filesystem::path dir = cache_dir();
  if (detail::env_flag_off("ANVIL_CUDA_CACHE") || dir.empty()) return compile_program(spec, major, minor);
  // The key covers everything the image depends on: the assembled source,
  // the defines, the device's architecture and the compiler.
  std::uint64_t key = fnv1a(device_common::assemble_source("prelude_cuda.h", spec.file));
  key = fnv1a(device_common::define_options(spec) + "|" + std::to_string(major * 10 + minor) + "|" + nvrtc_version(),
              key);
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.bin", static_cast<unsigned long long>(key));
  const std::filesystem::path file = dir / name;
  // File: "1" (CUBIN) or "0" (PTX), the target, a space, the image's length,
  // a newline, the image. A file that does not parse, or whose length is
  // wrong (a truncated write), is compiled afresh and replaced.
  if (std::ifstream in(file, std::ios::binary); in) {
    std::ostringstream bytes;
    bytes << in.rdbuf();
    const std::string data = bytes.str();
    const std::size_t nl = data.find('\n'), sp = data.find(' ');
    if (data.size() > 2 && nl != std::string::npos && sp != std::string::npos && sp < nl &&
        (data[0] == '0' || data[0] == '1') &&
        std::to_string(data.size() - nl - 1) == data.substr(sp + 1, nl - sp - 1)) {
      CompiledProgram p;
      p.is_cubin = data[0] == '1';
      p.target = data.substr(1, sp - 1);
      p.image = data.substr(nl + 1);
      p.from_cache = true;
      return p;
    }
  }
  CompiledProgram p = compile_program(spec, major, minor);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // Unique per process and thread: two GPUs of one architecture may compile
  // the same program at once.
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path tmp =
      dir / detail::cat(name, ".tmp", ::getpid(), "-", std::hash<std::thread::id>()(std::this_thread::get_id()), "-",
                        counter++);
  std::ofstream out(tmp, std::ios::binary);
  out << (p.is_cubin ? '1' : '0') << p.target << ' ' << p.image.size() << '\n' << p.image;
  out.close();
  if (out) std::filesystem::rename(tmp, file, ec);  // atomic: readers see all of it or nothing
  if (!out || ec) std::filesystem::remove(tmp, ec);
  return p;
}

std::vector<PtxEntry> ptx_entries(const std::string& ptx) {
  std::vector<PtxEntry> entries;
  const std::string marker = ".entry ";
  for (std::size_t at = ptx.find(marker); at != std::string::npos; at = ptx.find(marker, at + 1)) {
    std::size_t b = at + marker.size();
    std::size_t e = b;
    while (e < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[e])) || ptx[e] == '_')) ++e;
    PtxEntry entry{ptx.substr(b, e - b), {}};
    // The parameter list: ".param .u64 name_param_0, .param .align 8 .b8 name_param_1[24], ...".
    const std::size_t close = ptx.find(')', e);
    const std::string params = ptx.substr(e, close == std::string::npos ? std::string::npos : close - e);
    for (std::size_t p = params.find(".param"); p != std::string::npos; p = params.find(".param", p + 1)) {
      std::istringstream param(params.substr(p, params.find(',', p) - p));
      std::size_t element = 0, count = 1;
      for (std::string token; param >> token;) {
        if (token.size() >= 3 && token[0] == '.' && std::strchr("usbf", token[1]) != nullptr &&
            std::isdigit(static_cast<unsigned char>(token[2])))
          element = std::stoul(token.substr(2)) / 8;  // .u64, .f32, .b8, ...
        if (const std::size_t open = token.find('['); open != std::string::npos)
          count = std::stoul(token.substr(open + 1));
      }
      entry.param_bytes.push_back(element * count);
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace anvil::cuda
