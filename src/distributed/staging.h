// One collective's buffers and raw calls on the thread that runs it: staged
// through a host buffer for an engine on the host, on the device otherwise.
//
// Note [Staging]
// An engine on the host (MPI) takes CPU tensors as they are. Tensors on
// other devices are copied into one host buffer per group (grown as needed,
// reused) with the ledger-counted copy path of Tensor::to, reduced there and
// copied back; the copy back is enqueued on the device's queue, so later
// work on the device sees it. An engine on the device (NCCL) takes the
// tensors where they are, made contiguous there when they are not.
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "anvil/profiler.h"
#include "anvil/runtime.h"
#include "core/env_flag.h"
#include "core/ledger_counters.h"
#include "core/tensor_impl.h"
#include "distributed/collective.h"
#include "distributed/engine.h"
#include "distributed/process_group.h"
#pragma once

#include <cstddef>
#include <memory>

#include "anvil/tensor.h"
#include "core/tensor_impl.h"
#include "distributed/engine.h"
#include "distributed/watchdog.h"

namespace anvil::dist::detail {

// One collective on the thread that runs it: where its engine's buffers are
// (Note [Staging]), and its raw calls, each announced first (Note [Who did
// not arrive]). The collectives say which buffers they need; this makes them
// on the host or on the device, as the engine takes them.
class Call {
 public:
  Call(Engine& engine, WorldEngine& world, Watchdog& watch, std::shared_ptr<anvil::detail::Storage>& staging)
      : engine_(engine),
        world_(world),
        watch_(watch),
        staging_(staging),
        host_(engine.memory() == Engine::Memory::Host) {}

  const CollectiveInfo& info() const { return watch_.info(); }

  // The host staging buffer holds at least `bytes` (for an engine on the host).
  void reserve(std::size_t bytes);
  // A contiguous buffer the engine can take for `t`, holding t's data when
  // `copy`: `t` itself when it is one already, else one at `offset` in the
  // staging buffer (host) or a contiguous copy on t's device.
  Tensor in(const Tensor& t, std::size_t offset, bool copy);
  // A buffer of `shape` in the collective's dtype, at `offset` in the staging
  // buffer (host) or new on the collective's device.
  Tensor scratch(std::size_t offset, const Shape& shape);
  // Block `r` of a buffer that scratch() made with one more leading dimension.
  Tensor block(const Tensor& all, int r);
  // A buffer's data from `src` (any device).
  void fill(const Tensor& buf, const Tensor& src);
  // Writes `buf` (as in() or block() returned) into `t` when it is not `t`.
  void out(const Tensor& t, const Tensor& buf);

  void allreduce(const Tensor& buf);
  void broadcast(const Tensor& buf);
  void allgather(const Tensor& in, const Tensor& out);
  void reduce_scatter(const Tensor& in, const Tensor& out);

 private:
  void arrive() { world_.announce(info().seq); }

  Engine& engine_;
  WorldEngine& world_;
  Watchdog& watch_;
  std::shared_ptr<anvil::detail::Storage>& staging_;
  bool host_;
};

// `n` rounded up to a multiple of 64 bytes: where a second buffer starts in
// the staging buffer.
inline std::size_t round_up(std::size_t n) { return (n + 63) / 64 * 64; }

}  // namespace anvil::dist::detail
