#include "backends/cuda/cudnn_api.h"

#include <dlfcn.h>

#include <cstdlib>

#include "anvil/error.h"
#include "backends/cuda/cuda_api.h"
#include "core/backend_settings.h"
#include "core/env_flag.h"

namespace anvil::cuda {

namespace {

struct Loaded {
  CudnnApi api;
  bool ok = false;
  std::string why;
};

std::string version_text(std::size_t v) {
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

Loaded load() {
  Loaded l;
  if (detail::env_flag_off("ANVIL_CUDNN")) {
    l.why = "off: ANVIL_CUDNN=0";
    return l;
  }
  // Note [Finding cuDNN]. RTLD_LOCAL: cuDNN's symbols stay out of the
  // process's global scope.
  const char* override_path = std::getenv("ANVIL_CUDNN_LIBRARY");
  const bool overridden = override_path != nullptr && *override_path != '\0';
  const std::string file = overridden ? override_path : "libcudnn.so.9";
  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    l.why = file + " could not be loaded" + (overridden ? " (ANVIL_CUDNN_LIBRARY)" : "") + ": " +
            (err != nullptr ? err : "not found");
    return l;
  }
  CudnnApi& a = l.api;
  const auto bind = [&](const char* name, auto& fn) {
    if (!l.why.empty()) return;
    void* sym = dlsym(lib, name);
    if (sym == nullptr)
      l.why = file + " has no " + name + " (not cuDNN 9?)";
    else
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
  };
#define ANVIL_CUDNN_BIND(name) bind(#name, a.name);
  ANVIL_CUDNN_FUNCTIONS(ANVIL_CUDNN_BIND)
#undef ANVIL_CUDNN_BIND
  if (!l.why.empty()) return l;
  a.version = a.cudnnGetVersion();
  // The legacy API of cuDNN 9 (descriptors, _v7 heuristics, the v8 RNN
  // API): 8.x lays several of these out differently.
  if (a.version < 90000) {
    l.why = file + " is cuDNN " + version_text(a.version) + "; anvil needs cuDNN 9 or newer";
    return l;
  }
  Dl_info info{};
  a.path = dladdr(reinterpret_cast<void*>(a.cudnnGetVersion), &info) != 0 && info.dli_fname != nullptr ? info.dli_fname
                                                                                                       : file;
  l.ok = true;
  // The library stays loaded for the life of the process (handles are
  // destroyed at exit at the latest).
  return l;
}

const Loaded& loaded() noexcept {
  static Loaded* l = [] {
    try {
      return new Loaded(load());
    } catch (...) {
      auto* e = new Loaded();
      e->why = "loading libcudnn.so.9 failed";
      return e;
    }
  }();
  return *l;
}

detail::CudnnReport report() noexcept {
  detail::CudnnReport r;
  try {
    r.available = load_cudnn(&r.status) != nullptr;
    if (r.available) {
      r.version = static_cast<int>(loaded().api.version);
      r.status = cudnn_status();
    }
  } catch (...) {
    r.status = "out of memory";
  }
  return r;
}

// The core asks the module through this (anvil::backends::cudnn::status()).
[[maybe_unused]] const bool registered = [] {
  detail::register_cudnn_report(&report);
  return true;
}();

}  // namespace

const CudnnApi* load_cudnn(std::string* why) noexcept {
  const Loaded& l = loaded();
  if (why != nullptr) {
    try {
      *why = l.why;
    } catch (...) {
    }
  }
  return l.ok ? &l.api : nullptr;
}

std::string cudnn_status() noexcept {
  try {
    std::string why;
    const CudnnApi* api = load_cudnn(&why);
    if (api == nullptr) return why;
    return "cuDNN " + version_text(api->version) + " (" + api->path + ")";
  } catch (...) {
    return "out of memory";
  }
}

const CudnnApi* cudnn_if_enabled() noexcept {
  if (!detail::vendor_settings().cudnn_enabled.load(std::memory_order_relaxed)) return nullptr;
  return load_cudnn(nullptr);
}

void throw_cudnn_error(cudnnStatus_t status, const char* expr, const char* file, int line, const std::string& device) {
  const CudnnApi* api = load_cudnn(nullptr);
  const char* name = api != nullptr ? api->cudnnGetErrorString(status) : "CUDNN_STATUS_?";
  cudaGetLastError();  // a non-sticky runtime error cuDNN left behind
  throw BackendError(detail::cat(current_op(), ": ", expr, " failed with ", name, " (", static_cast<int>(status),
                                 ") on ", device, " at ", file, ":", line));
}

}  // namespace anvil::cuda
