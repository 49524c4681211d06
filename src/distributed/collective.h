// What every group of anvil::dist shares: the Work state, argument checks,
// the description of a collective that errors quote, and host-side reduction
// helpers. The groups (process_group.cpp over the engines of engine.h,
// single_group.cpp, local_group.cpp) see only arguments these have vetted.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/dist.h"

namespace anvil::dist {

// The completion of one collective, shared by its Work handles and the engine
// that runs it.
struct WorkState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  // Set (before the Work is handed out, never changed after) by an engine
  // that lets the waiting thread run the collective itself when nobody has
  // started it yet (Note [The waiter runs its collective], process_group.cpp).
  // wait() calls it first; it does nothing when the collective has started.
  std::function<void()> run_here;
  // Set likewise by an engine that may leave a collective queued until it is
  // waited for (Note [When the worker starts a collective], process_group.cpp):
  // wakes the engine's worker. wait() calls it when run_here could not run
  // the collective, and is_completed() when it is not done.
  std::function<void()> wake_engine;

  void finish(std::exception_ptr e = nullptr);
  void wait();  // rethrows the error
};

namespace detail {

enum class CollectiveKind : std::uint8_t { Allreduce, Broadcast, Allgather, ReduceScatter, Barrier };
const char* name(CollectiveKind kind) noexcept;  // "allreduce", …

// What a collective is, for errors and the fingerprint check: "allreduce #3
// (sum, f32 [1024] on opencl:0)".
struct CollectiveInfo {
  CollectiveKind kind = CollectiveKind::Barrier;
  std::uint64_t seq = 0;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  DType dtype = DType::F32;
  Shape shape;  // of one rank's contribution
  Device device;
  std::string str() const;
};

// ValueError/DeviceMismatch/DTypeError/ShapeError checks shared by every
// engine. `op` is the collective's name as users call it ("allreduce").
void check_tensor(const char* op, const Tensor& t, const char* what);
void check_dtype(const char* op, DType t, bool reduces, ReduceOp rop);
// Every tensor defined, on `device`, of `dtype` and `shape`.
void check_like(const char* op, const std::vector<Tensor>& ts, const char* what, DType dtype, const Shape& shape,
                Device device, std::size_t expected_count);
void check_root(const char* op, int root, int size);

// dst[i] = dst[i] op src[i] on host memory, for `count` elements of `dtype`
// (Avg reduces as Sum; the caller divides afterwards).
void reduce_host(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);
// dst[i] /= divisor: floats divide, integers truncate towards zero (like
// NCCL's average on integers).
void divide_host(void* data, std::size_t count, DType dtype, std::int64_t divisor);

// A completed Work carrying `e`.
Work failed_work(std::exception_ptr e);
Work done_work();

}  // namespace detail
}  // namespace anvil::dist
