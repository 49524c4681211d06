// NCCL, loaded at run time (dlopen "libnccl.so.2"; never linked), for the
// collectives on cuda:N tensors of an MPI group (DESIGN §8). Nothing here
// needs libnccl, a CUDA driver or a GPU to build or to start: without them
// load() says why, and CUDA tensors are staged through the host like OpenCL
// ones.
#pragma once

#include <climits>
#include <cstddef>
#include <string>

namespace anvil::dist::detail {

// The slice of NCCL's C ABI that anvil uses (nccl.h: the collectives are
// stable since 2.0, Avg since 2.10, ncclCommInitRankConfig since 2.14).
struct NcclApi {
  using Comm = void*;
  struct UniqueId {
    char internal[128];
  };
  // ncclConfig_t as NCCL 2.14 laid it out, made like NCCL_CONFIG_INITIALIZER
  // (every option "undefined"). A newer NCCL reads only `size` bytes of it
  // and gives the options it does not cover their defaults, so this older
  // layout stays valid.
  struct Config {
    std::size_t size = sizeof(Config);
    unsigned int magic = 0xcafebeef;
    unsigned int version = 21400;  // NCCL_VERSION(2, 14, 0)
    int blocking = INT_MIN;        // NCCL_CONFIG_UNDEF_INT
    int cga_cluster_size = INT_MIN;
    int min_ctas = INT_MIN;
    int max_ctas = INT_MIN;
    const char* net_name = nullptr;  // NCCL_CONFIG_UNDEF_PTR
  };
  static constexpr int kInProgress = 7;  // ncclInProgress: a nonblocking call is still running
  enum DataType : int { Int8 = 0, Uint8 = 1, Int32 = 2, Uint32 = 3, Int64 = 4, Uint64 = 5, Float32 = 7, Float64 = 8 };
  enum RedOp : int { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4 };

  int (*get_unique_id)(UniqueId*) = nullptr;
  int (*comm_init_rank_config)(Comm*, int, UniqueId, int, Config*) = nullptr;
  int (*comm_get_async_error)(Comm, int*) = nullptr;
  int (*comm_destroy)(Comm) = nullptr;
  int (*comm_abort)(Comm) = nullptr;
  int (*all_reduce)(const void*, void*, std::size_t, int, int, Comm, void*) = nullptr;
  int (*broadcast)(const void*, void*, std::size_t, int, int, Comm, void*) = nullptr;
  int (*all_gather)(const void*, void*, std::size_t, int, Comm, void*) = nullptr;
  int (*reduce_scatter)(const void*, void*, std::size_t, int, int, Comm, void*) = nullptr;
  const char* (*get_error_string)(int) = nullptr;
  int (*get_version)(int*) = nullptr;

  // Throws BackendError naming `call` and NCCL's message unless `code` is 0.
  void check(int code, const char* call) const;
};

// The loaded library, or null with the reason in `why` (no library, a symbol
// missing, older than 2.14, or ANVIL_DIST_NCCL=0/off/false/no). Loaded once per process.
const NcclApi* load_nccl(std::string* why) noexcept;

}  // namespace anvil::dist::detail
