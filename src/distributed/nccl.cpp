#include "distributed/nccl.h"

#include <dlfcn.h>

#include <mutex>

#include "anvil/dist.h"
#include "anvil/error.h"
#include "core/env_flag.h"

namespace anvil::dist::detail {

// The layouts NCCL reads (x86-64, aarch64): ncclUniqueId is 128 bytes, the
// 2.14 ncclConfig_t 40.
static_assert(sizeof(NcclApi::UniqueId) == 128);
static_assert(sizeof(void*) != 8 || sizeof(NcclApi::Config) == 40);

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
  l.ok = bind(lib, "ncclGetUniqueId", a.get_unique_id, l.why) &&
         bind(lib, "ncclCommInitRankConfig", a.comm_init_rank_config, l.why) &&
         bind(lib, "ncclCommGetAsyncError", a.comm_get_async_error, l.why) &&
         bind(lib, "ncclCommDestroy", a.comm_destroy, l.why) && bind(lib, "ncclCommAbort", a.comm_abort, l.why) &&
         bind(lib, "ncclAllReduce", a.all_reduce, l.why) && bind(lib, "ncclBroadcast", a.broadcast, l.why) &&
         bind(lib, "ncclAllGather", a.all_gather, l.why) && bind(lib, "ncclReduceScatter", a.reduce_scatter, l.why) &&
         bind(lib, "ncclGetErrorString", a.get_error_string, l.why) &&
         bind(lib, "ncclGetVersion", a.get_version, l.why);
  if (l.ok) {
    int version = 0;
    // ncclCommInitRankConfig (the nonblocking init) arrived in 2.14, ncclAvg in 2.10.
    if (a.get_version(&version) != 0 || version < 21400) {
      l.ok = false;
      l.why = "libnccl.so.2 is older than 2.14 (version code " + std::to_string(version) + ")";
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

namespace anvil::dist {

bool nccl_available(std::string* why) { return detail::load_nccl(why) != nullptr; }

}  // namespace anvil::dist
