#include "dist/nccl.h"

#include <dlfcn.h>

#include <mutex>

#include "anvil/error.h"
#include "core/env_flag.h"

namespace anvil::dist::detail {

void NcclApi::check(int code, const char* call) const {
  if (code == 0) return;
  const char* msg = get_error_string != nullptr ? get_error_string(code) : "unknown error";
  throw BackendError(anvil::detail::cat("dist (nccl): ", call, " failed: ", msg, " (ncclResult_t ", code, ")"));
}

namespace {

struct Loaded {
  NcclApi api;
  bool ok = false;
  std::string why;
};

template <typename F>
bool bind(void* lib, const char* name, F& fn, std::string& why) {
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    why = std::string("libnccl.so.2 has no ") + name;
    return false;
  }
  fn = reinterpret_cast<F>(sym);
  return true;
}

Loaded load() {
  Loaded l;
  if (anvil::detail::env_flag_off("ANVIL_DIST_NCCL")) {
    l.why = "ANVIL_DIST_NCCL is off";
    return l;
  }
  // RTLD_LOCAL: NCCL's symbols stay out of the process's global scope.
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    l.why = std::string("libnccl.so.2 could not be loaded: ") + (err != nullptr ? err : "not found");
    return l;
  }
  NcclApi& a = l.api;
  l.ok =
      bind(lib, "ncclGetUniqueId", a.get_unique_id, l.why) && bind(lib, "ncclCommInitRank", a.comm_init_rank, l.why) &&
      bind(lib, "ncclCommDestroy", a.comm_destroy, l.why) && bind(lib, "ncclCommAbort", a.comm_abort, l.why) &&
      bind(lib, "ncclAllReduce", a.all_reduce, l.why) && bind(lib, "ncclBroadcast", a.broadcast, l.why) &&
      bind(lib, "ncclAllGather", a.all_gather, l.why) && bind(lib, "ncclReduceScatter", a.reduce_scatter, l.why) &&
      bind(lib, "ncclGetErrorString", a.get_error_string, l.why) && bind(lib, "ncclGetVersion", a.get_version, l.why);
  if (l.ok) {
    int version = 0;
    // ncclAvg arrived in 2.10 (version code 21000).
    if (a.get_version(&version) != 0 || version < 21000) {
      l.ok = false;
      l.why = "libnccl.so.2 is older than 2.10 (version code " + std::to_string(version) + ")";
    }
  }
  // The library stays loaded for the life of the process (communicators
  // may be torn down at exit).
  return l;
}

}  // namespace

const NcclApi* load_nccl(std::string* why) noexcept {
  static Loaded* loaded = [] {
    try {
      return new Loaded(load());
    } catch (...) {
      auto* l = new Loaded();
      l->why = "loading libnccl.so.2 failed";
      return l;
    }
  }();
  if (why != nullptr) *why = loaded->why;
  return loaded->ok ? &loaded->api : nullptr;
}

}  // namespace anvil::dist::detail
