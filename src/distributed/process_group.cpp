// A collective's life, written once for every engine (engine.h): checked on
// the caller's thread, numbered and queued; then, on the thread that runs it,
// the deadline and the fingerprint check (watchdog.h), staging and the
// arrival announcement (staging.h), the engine's raw call, the result written
// back, the ledger's record, and its Work finished. See process_group.h.
//
// Note [One engine thread]
// The world's engine (MPI) is initialised MPI_THREAD_SERIALIZED by the
// group's worker thread, and after that one thread at a time calls an
// engine: collectives are queued by the callers (validated first, on the
// caller's thread) and run in issue order, one at a time (`running_`), so
// every rank issues them to its engines in the same order. The worker runs
// them, or the thread waiting for one that nobody has started yet (Note [The
// waiter runs its collective]); the group's mutex orders one thread's engine
// calls before the next's.
//
// Note [The waiter runs its collective]
// Handing a collective to the worker and its completion back costs two
// thread wake-ups, each microseconds on a VM whose vCPU sleeps. So wait() on
// a collective that is first in the queue while no other runs takes it out of
// the queue and runs it on the waiting thread, as the worker would have; one
// already started or queued behind another is waited for, and an unwaited one
// (DDP's buckets) still progresses on the worker. Collectives of an engine
// that is not any_thread() (NCCL) stay on the worker. A collective that breaks
// the group on the waiting thread throws there; the worker then gives the
// process its grace and leaves (leave_after_failure). allreduce(t).wait() of
// 4 KiB between two ranks went from 5-6 us over MPI_Iallreduce to 3-5 us
// (docs/measurements.md).
//
// Note [When the worker starts a collective]
// Issuing a collective wakes the worker, so that one nobody waits for yet
// (DDP's buckets) runs while the caller computes. That pays only when the
// worker has a core, or the collective mostly waits on a network. So on a node
// whose cores the ranks' compute threads fill (ranks on this node x
// num_threads() >= usable CPUs), with every rank on this node, a CPU tensor's
// collective is only queued: the thread that waits for it runs it (Note [The
// waiter runs its collective]); a wait() that cannot, is_completed(), the
// group's shutdown and an unwaited Work's destructor wake the worker. There
// the woken worker had preempted the caller for no overlap: a 4 KiB
// allreduce(t).wait() took 6.7 us with the wake-up, 1.3-1.4 us without
// (docs/measurements.md). Elsewhere (other devices, NCCL, several nodes, a
// core to spare) the worker is woken at once.
//
// Note [Choosing the engine]
// Whether a collective goes to NCCL must be the same decision on every rank,
// or one rank waits in NCCL while another waits in MPI; a rank cannot decide
// from its own tensor (one GPU: cuda:0 on rank 0, the CPU on rank 1). So the
// ranks agree once, at start, for each device engine of kDeviceEngines: each
// says whether the engine loads for it and its device() is of the engine's
// type, and the group uses it only when every rank says yes
// (WorldEngine::all_agree). Else that type's tensors are staged through the
// host like OpenCL ones, on every rank alike. A rank that then passes a CPU
// tensor where the others pass CUDA ones is a mismatch like any other
// (ANVIL_DIST_DEBUG=1 names it; else the watchdog ends it). A barrier has no
// tensor: the world's engine runs it.
#include "distributed/process_group.h"

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

#include "anvil/ops.h"
#include "anvil/profiler.h"
#include "anvil/runtime.h"
#include "core/env_flag.h"
#include "core/ledger_counters.h"
#include "core/tensor_impl.h"
#include "core/transfer.h"
#include "distributed/collective.h"
#include "distributed/engine.h"
#include "distributed/staging.h"
#include "distributed/watchdog.h"

namespace anvil::dist::detail {

using anvil::detail::cat;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kExitGraceSeconds = 10;

double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  ANVIL_CHECK(end != v && *end == '\0' && s > 0, ValueError, "dist: ", name,
              " must be a positive number of seconds; expected e.g. 300, got \"", v, "\"");
  return s;
}

// Note [Choosing the engine]: the engines that take one device type's
// tensors in place of the world's, each agreed on at start in this order.
struct DeviceEngine {
  DeviceType type;
  const char* name;  // for the agreement's errors
  // This rank's engine, or null where it cannot run (its library did not load).
  std::unique_ptr<Engine> (*make)(WorldEngine& world);
};
constexpr DeviceEngine kDeviceEngines[] = {
    {DeviceType::CUDA, "NCCL", make_nccl_engine},
};

void check_count(const char* op, std::int64_t n) {
  ANVIL_CHECK(n <= INT_MAX, ValueError, op, ": too many elements for one MPI call; expected at most ", INT_MAX,
              ", got ", n, "; split the tensor");
}

}  // namespace

double dist_timeout_seconds() { return env_seconds("ANVIL_DIST_TIMEOUT", 300); }

bool dist_debug() { return anvil::detail::env_flag("ANVIL_DIST_DEBUG"); }

namespace {

class EngineGroup final : public ProcessGroup {
 public:
  EngineGroup(int expected_size, std::function<Device()> world_device);
  ~EngineGroup() override { shutdown(); }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::string engine() const override { return world_->name(); }
  std::string engine_for(Device d) const override { return engine_of(d).name(); }

  Work allreduce(Tensor& t, ReduceOp op) override;
  Work broadcast(Tensor& t, int root) override;
  Work allgather(std::vector<Tensor>& out, const Tensor& in) override;
  Work reduce_scatter(Tensor& out, const std::vector<Tensor>& in, ReduceOp op) override;
  Work barrier() override;

  void shutdown() noexcept;

 private:
  // What a collective does with its tensors, between its checks and its
  // record (see Call); returns its bytes for the ledger.
  using Body = std::function<std::size_t(Call&)>;

  // One queued collective.
  struct Task {
    CollectiveInfo info;
    Body body;  // null for a barrier
    std::shared_ptr<WorkState> work;
    bool worker_starts = true;  // Note [When the worker starts a collective]
  };

  Work submit(CollectiveInfo info, Body body);
  void worker_main(int expected_size, const std::function<Device()>& world_device);
  // Note [Choosing the engine]: the ranks' agreements, at start.
  void agree_on_engines(const std::function<Device()>& world_device);
  // The collective's life on the thread that runs it.
  void run(Task& task);
  // Runs `task` and finishes its Work; a DistTimeout breaks the group.
  // Returns whether it did.
  bool run_task(Task& task);
  // Note [The waiter runs its collective]: runs `task` on the calling thread
  // if it is first in the queue and nothing runs; else does nothing.
  void run_on_caller(const std::shared_ptr<Task>& task);
  // Note [When the worker starts a collective].
  bool worker_starts(Device d) const;
  bool worker_has_queued_work() const;  // under mutex_
  // The worker, once a collective broke the group: waits kExitGraceSeconds
  // for the program to shut the group down, else leaves with status 1.
  void leave_after_failure();
  void fail_broken(const std::string& message);

  // Note [Choosing the engine]: the engine of `d`'s tensors.
  Engine& engine_of(Device d) const {
    for (const auto& [type, engine] : device_engines_)
      if (d.type() == type) return *engine;
    return *world_;
  }

  int rank_ = 0, size_ = 1;
  int usable_cpus_ = 1;
  double timeout_s_ = 300;
  bool debug_ = false;

  // Made by the worker before the constructor returns; used by the thread
  // that runs a collective (Note [One engine thread]).
  std::unique_ptr<WorldEngine> world_;
  // The device engines every rank agreed on, by the device type they take.
  std::vector<std::pair<DeviceType, std::unique_ptr<Engine>>> device_engines_;
  std::shared_ptr<anvil::detail::Storage> staging_;

  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool running_ = false;        // a collective runs, on the worker or a waiting thread
  bool leave_pending_ = false;  // a waiting thread's collective broke the group: the worker leaves
  bool started_ = false, stop_ = false, finished_ = false;
  std::exception_ptr start_error_;
  std::uint64_t next_seq_ = 1;
  std::string broken_;  // the timeout that broke the group; "" while usable
};

EngineGroup::EngineGroup(int expected_size, std::function<Device()> world_device) {
  timeout_s_ = dist_timeout_seconds();
  debug_ = dist_debug();
  worker_ = std::thread(
      [this, expected_size, world_device = std::move(world_device)] { worker_main(expected_size, world_device); });
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return started_; });
  if (start_error_) {
    lock.unlock();
    worker_.join();
    std::rethrow_exception(start_error_);
  }
}

void EngineGroup::worker_main(int expected_size, const std::function<Device()>& world_device) {
  try {
    world_ = start_mpi_engine(expected_size);
    rank_ = world_->rank();
    size_ = world_->size();
    cpu_set_t cpus;
    usable_cpus_ = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    agree_on_engines(world_device);
  } catch (...) {
    std::lock_guard lock(mutex_);
    start_error_ = std::current_exception();
    started_ = true;
    cv_.notify_all();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    started_ = true;
  }
  cv_.notify_all();

  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return leave_pending_ || (!running_ && (stop_ || !queue_.empty())); });
      if (leave_pending_) {
        leave_pending_ = false;
        lock.unlock();
        leave_after_failure();
        continue;
      }
      if (queue_.empty()) break;  // stop_ and drained
      task = queue_.front();
      queue_.pop_front();
      running_ = true;
    }
    const bool broke = run_task(*task);
    {
      std::lock_guard lock(mutex_);
      running_ = false;
    }
    if (broke) leave_after_failure();
  }

  // Leaving (Note [Leaving MPI]): a broken group cannot close its engines
  // (they would wait for the rank that is gone).
  bool broken;
  {
    std::lock_guard lock(mutex_);
    broken = !broken_.empty();
  }
  if (!broken) {
    for (auto& [type, engine] : device_engines_) engine->close();
    world_->close();
  }
  std::lock_guard lock(mutex_);
  finished_ = true;
  cv_.notify_all();
}

void EngineGroup::agree_on_engines(const std::function<Device()>& world_device) {
  // Every rank takes part in every agreement, whatever it says (Note [Choosing the engine]).
  for (const DeviceEngine& row : kDeviceEngines) {
    std::unique_ptr<Engine> engine = row.make(*world_);
    bool mine = false;
    if (engine) {
      try {
        mine = world_device().type() == row.type;
      } catch (...) {
        // A bad ANVIL_DIST_DEVICE: no device engine here; dist::device() reports it.
      }
    }
    const std::string what = cat("the ranks' agreement on ", row.name);
    if (world_->all_agree(mine, what.c_str(), timeout_s_)) device_engines_.emplace_back(row.type, std::move(engine));
  }
}

void EngineGroup::run(Task& task) {
  const CollectiveInfo& info = task.info;
  const anvil::profiler::Range span(name(info.kind), "collective");  // the profiler's collective span
  Watchdog watch(*world_, info, timeout_s_);
  if (debug_) check_fingerprints(*world_, watch);
  if (info.kind == CollectiveKind::Barrier) {  // no tensor: the world's engine (Note [Choosing the engine])
    world_->announce(info.seq);
    world_->barrier(watch);
    return;
  }
  Call call(engine_of(info.device), *world_, watch, staging_);
  const std::size_t bytes = task.body(call);
  anvil::detail::record_collective(info.device, bytes);
}

bool EngineGroup::run_task(Task& task) {
  std::exception_ptr error;
  bool broke = false;
  {
    std::lock_guard lock(mutex_);
    if (!broken_.empty())
      error = std::make_exception_ptr(DistTimeout(
          cat("dist: ", task.info.str(), " not run: the group is unusable after an earlier failure (", broken_, ")")));
  }
  if (!error) {
    try {
      run(task);
    } catch (const DistTimeout& e) {
      fail_broken(e.what());
      std::fprintf(stderr, "anvil: %s\n", e.what());
      std::fflush(stderr);
      error = std::current_exception();
      broke = true;
    } catch (...) {
      error = std::current_exception();
    }
  }
  // The collective's tensors go before its waiter can go on: a program that
  // returns from main right after wait() destroys the CPU allocator next,
  // and a tensor freed by this thread after that crashed the process
  // (tests/dist_exit_after_collectives.cpp).
  task.body = nullptr;
  task.work->finish(error);
  return broke;
}

void EngineGroup::run_on_caller(const std::shared_ptr<Task>& task) {
  {
    std::lock_guard lock(mutex_);
    if (running_ || queue_.empty() || queue_.front() != task) return;
    queue_.pop_front();
    running_ = true;
  }
  const bool broke = run_task(*task);
  bool worker_needed;
  {
    std::lock_guard lock(mutex_);
    running_ = false;
    leave_pending_ = leave_pending_ || broke;
    worker_needed = leave_pending_ || stop_ || worker_has_queued_work();
  }
  if (worker_needed) cv_.notify_all();
}

bool EngineGroup::worker_starts(Device d) const {
  if (d.type() != DeviceType::CPU || world_->node_size() < size_) return true;
  return static_cast<std::int64_t>(world_->node_size()) * num_threads() < usable_cpus_;
}

bool EngineGroup::worker_has_queued_work() const {
  for (const auto& t : queue_)
    if (t->worker_starts) return true;
  return false;
}

void EngineGroup::leave_after_failure() {
  // Give the caller's wait() the error and time to act on it, then leave:
  // MPI cannot recover (Note [Who did not arrive]).
  std::unique_lock lock(mutex_);
  const bool stopping = cv_.wait_for(lock, std::chrono::duration<double>(kExitGraceSeconds), [&] { return stop_; });
  if (!stopping) {
    std::fprintf(stderr, "anvil: leaving with status 1 after a failed collective (%s)\n", broken_.c_str());
    std::fflush(nullptr);
    _exit(1);
  }
}

void EngineGroup::fail_broken(const std::string& message) {
  std::deque<std::shared_ptr<Task>> rest;
  {
    std::lock_guard lock(mutex_);
    broken_ = message;
    rest.swap(queue_);
  }
  for (auto& t : rest) {
    t->body = nullptr;  // its tensors before its waiter goes on (run_task)
    t->work->finish(std::make_exception_ptr(DistTimeout(
        cat("dist: ", t->info.str(), " not run: the group is unusable after an earlier failure (", message, ")"))));
  }
}

Work EngineGroup::submit(CollectiveInfo info, Body body) {
  auto task = std::make_shared<Task>();
  task->body = std::move(body);
  task->work = std::make_shared<WorkState>();
  {
    std::lock_guard lock(mutex_);
    info.seq = next_seq_++;
    task->info = std::move(info);
    if (!broken_.empty()) {
      return failed_work(std::make_exception_ptr(DistTimeout(cat(
          "dist: ", task->info.str(), " not run: the group is unusable after an earlier failure (", broken_, ")"))));
    }
    ANVIL_CHECK(!stop_, ValueError, "dist: ", task->info.str(), " issued after the group was shut down (at exit)");
    if (engine_of(task->info.device).any_thread())
      task->work->run_here = [this, weak = std::weak_ptr<Task>(task)] {
        if (const std::shared_ptr<Task> queued = weak.lock()) run_on_caller(queued);
      };
    task->worker_starts = worker_starts(task->info.device);
    if (!task->worker_starts) task->work->wake_engine = [this] { cv_.notify_all(); };
    queue_.push_back(task);
  }
  if (task->worker_starts) cv_.notify_all();
  return Work(task->work);
}

void EngineGroup::shutdown() noexcept {
  {
    std::lock_guard lock(mutex_);
    if (!worker_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  // Note [Leaving MPI]: the queue drains and the engines close on the
  // worker; both are bounded by the timeout, after which we leave without them.
  bool broken;
  {
    std::unique_lock lock(mutex_);
    const bool done = cv_.wait_for(lock, std::chrono::duration<double>(timeout_s_ + 5), [&] { return finished_; });
    if (!done) {
      std::fprintf(stderr,
                   "anvil: dist: MPI did not shut down within %.0f s (a rank is gone?); leaving with status 1\n",
                   timeout_s_ + 5);
      std::fflush(nullptr);
      _exit(1);
    }
    broken = !broken_.empty();
  }
  worker_.join();
  if (broken) {
    // The collective that broke the group was reported; a run that went on
    // after it must not look successful.
    std::fflush(nullptr);
    _exit(1);
  }
}

// ---- the collectives: which buffers each needs, for every engine --------------------

Work EngineGroup::allreduce(Tensor& t, ReduceOp op) {
  check_tensor("allreduce", t, "the tensor");
  check_dtype("allreduce", t.dtype(), true, op);
  check_count("allreduce", t.numel());
  return submit({CollectiveKind::Allreduce, 0, op, 0, t.dtype(), t.shape(), t.device()}, [target = t](Call& c) {
    c.reserve(target.nbytes());
    Tensor buf = c.in(target, 0, true);
    c.allreduce(buf);
    c.out(target, buf);
    return target.nbytes();
  });
}

Work EngineGroup::broadcast(Tensor& t, int root) {
  check_tensor("broadcast", t, "the tensor");
  check_dtype("broadcast", t.dtype(), false, ReduceOp::Sum);
  check_root("broadcast", root, size_);
  check_count("broadcast", t.numel());
  const bool is_root = rank_ == root;
  return submit({CollectiveKind::Broadcast, 0, ReduceOp::Sum, root, t.dtype(), t.shape(), t.device()},
                [target = t, is_root](Call& c) {
                  c.reserve(target.nbytes());
                  Tensor buf = c.in(target, 0, is_root);
                  c.broadcast(buf);
                  if (!is_root) c.out(target, buf);
                  return target.nbytes();
                });
}

Work EngineGroup::allgather(std::vector<Tensor>& out, const Tensor& in) {
  check_tensor("allgather", in, "in");
  check_dtype("allgather", in.dtype(), false, ReduceOp::Sum);
  check_like("allgather", out, "out", in.dtype(), in.shape(), in.device(), static_cast<std::size_t>(size_));
  check_count("allgather", in.numel() * size_);
  return submit({CollectiveKind::Allgather, 0, ReduceOp::Sum, 0, in.dtype(), in.shape(), in.device()},
                [targets = out, source = in, n = size_](Call& c) {
                  const std::size_t one = source.nbytes(), in_bytes = round_up(one);
                  c.reserve(in_bytes + one * static_cast<std::size_t>(n));
                  Tensor buf = c.in(source, 0, true);
                  Shape all_shape = source.shape();
                  all_shape.insert(0, n);
                  Tensor gathered = c.scratch(in_bytes, all_shape);
                  c.allgather(buf, gathered);
                  for (int r = 0; r < n; ++r) c.out(targets[r], c.block(gathered, r));
                  return one * static_cast<std::size_t>(n);
                });
}

Work EngineGroup::reduce_scatter(Tensor& out, const std::vector<Tensor>& in, ReduceOp op) {
  check_tensor("reduce_scatter", out, "out");
  check_dtype("reduce_scatter", out.dtype(), true, op);
  check_like("reduce_scatter", in, "in", out.dtype(), out.shape(), out.device(), static_cast<std::size_t>(size_));
  check_count("reduce_scatter", out.numel() * size_);
  return submit({CollectiveKind::ReduceScatter, 0, op, 0, out.dtype(), out.shape(), out.device()},
                [target = out, sources = in, n = size_](Call& c) {
                  const std::size_t one = target.nbytes(), packed_bytes = round_up(one * static_cast<std::size_t>(n));
                  c.reserve(packed_bytes + one);
                  Shape all_shape = target.shape();
                  all_shape.insert(0, n);
                  Tensor packed = c.scratch(0, all_shape);
                  for (int r = 0; r < n; ++r) c.fill(c.block(packed, r), sources[r]);
                  Tensor buf = c.in(target, packed_bytes, false);
                  c.reduce_scatter(packed, buf);
                  c.out(target, buf);
                  return one * static_cast<std::size_t>(n);
                });
}

Work EngineGroup::barrier() {
  return submit({CollectiveKind::Barrier, 0, ReduceOp::Sum, 0, DType::U8, Shape{}, cpu()}, nullptr);
}

}  // namespace

std::unique_ptr<ProcessGroup> make_process_group(int expected_size, std::function<Device()> world_device) {
  return std::make_unique<EngineGroup>(expected_size, std::move(world_device));
}

void shutdown_process_group(ProcessGroup& group) noexcept { static_cast<EngineGroup&>(group).shutdown(); }

}  // namespace anvil::dist::detail
