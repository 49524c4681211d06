// A collective's life, written once for every engine (engine.h): checked on
// the caller's thread, numbered and queued; then, on the thread that runs it,
// the deadline, the fingerprint check, staging, the arrival announcement, the
// engine's raw call, the result written back, the ledger's record, and its
// Work finished. See process_group.h.
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
// a collective that is first in the queue while no other runs takes it out
// of the queue and runs it on the waiting thread, as the worker would have;
// a collective already started, or queued behind another, is waited for as
// before, and an unwaited one (DDP's buckets during backward) still
// progresses on the worker. Collectives of an engine that is not
// any_thread() (NCCL: its communicator and the device's stream are set up
// on the worker) stay on the worker. A collective that breaks the group on
// the waiting thread throws there; the worker then gives the process its
// grace and leaves, as for its own (leave_after_failure).
// Measured with allreduce(t).wait() in a loop between two ranks on the
// 2-core VM, against MPI_Iallreduce + MPI_Test in the same processes,
// libraries alternating: 4 KiB took 5-6 us more than MPI before and 3-5
// after; 1 MiB ran at 0.83-0.86x of MPI before and 0.84-0.96x after. Most
// of what is left is the worker's wake-up when the collective is issued;
// see Note [When the worker starts a collective].
//
// Note [When the worker starts a collective]
// Issuing a collective wakes the worker, so that one nobody waits for yet
// (DDP's buckets during backward) runs while the caller computes. That
// only pays when the worker has a core to run on, or when the collective
// mostly waits on a network. On a node whose cores the ranks' compute
// threads already fill (ranks on this node x num_threads() >= usable CPUs)
// and with every rank on this node, a CPU tensor's collective is memory
// copies that need a core as much as the compute does: the woken worker
// preempted the caller, ran the collective in its place and woke it again,
// two context switches for no overlap. Measured with allreduce(t).wait()
// between two ranks on the 2-core VM against MPI_Allreduce (1.0 us at
// 4 KiB), three runs each: 4 KiB took 6.7 us with the wake-up and 1.3-1.4
// us without; 1 MiB ran at 0.86-0.88x of MPI with it and 0.93-1.05x
// without; DDP's 2-rank MLP epoch went from 0.160 to 0.157 s (medians of
// six). There such a collective is only queued: the thread that waits for
// it runs it (Note [The waiter runs its collective]), and a wait() that
// cannot (another collective is ahead of it) or is_completed() wakes the
// worker, as does the group's shutdown; a Work destroyed unwaited is
// waited for by its destructor. Everywhere else (other devices, NCCL,
// ranks on several nodes, a core to spare) the worker is woken at once, as
// before.
//
// Note [Who did not arrive]
// Before each collective every rank tells every other rank "arrived at #N"
// on a channel of its own (WorldEngine::announce: small nonblocking MPI
// messages, one receive kept posted from each peer). When a collective
// passes its deadline, the ranks not heard from at #N are the ranks that
// did not arrive: a rank that died, hung, or skipped the collective. MPI
// cannot recover from that, so the group is then broken: the collective's
// wait() throws DistTimeout, every later collective fails at once with it,
// and the process leaves with status 1 — at exit, or after
// kExitGraceSeconds if it is still running then (the message is printed to
// stderr first).
//
// Note [Choosing the engine]
// Whether a collective goes to NCCL must be the same decision on every rank,
// or one rank waits in NCCL while another waits in MPI. A rank cannot decide
// it from its own tensor: on a machine with one GPU, dist::device() is
// cuda:0 on rank 0 and the CPU on rank 1. So the ranks agree once, when the
// group starts, for each device engine of kDeviceEngines (NCCL for CUDA):
// each rank says whether the engine loads for it and its device() is of
// the engine's device type, and the group uses the engine only when every
// rank says yes (WorldEngine::all_agree). Then that type's tensors go to
// it, else they are staged through the host like OpenCL ones, on every rank
// alike. A rank that then passes a CPU tensor where the others pass CUDA
// ones is a mismatch like any other: ANVIL_DIST_DEBUG=1 names it (the
// fingerprint holds the device type), and without it the watchdog ends it.
// A barrier has no tensor: the world's engine runs it.
//
// Note [Staging]
// An engine on the host (MPI) takes CPU tensors as they are. Tensors on
// other devices are copied into one host buffer per group (grown as needed,
// reused) with the ledger-counted copy path of Tensor::to, reduced there and
// copied back; the copy back is enqueued on the device's queue, so later
// work on the device sees it. An engine on the device (NCCL) takes the
// tensors where they are, made contiguous there when they are not.
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

// What ANVIL_DIST_DEBUG=1 compares across ranks (Note [Who did not arrive]).
struct Fingerprint {
  std::int64_t seq = 0;
  std::int32_t kind = 0, op = 0, root = 0, dtype = 0, ndim = 0, device_type = 0;
  std::int64_t dims[kMaxDims] = {};
};

Fingerprint fingerprint_of(const CollectiveInfo& info) {
  Fingerprint f;
  f.seq = static_cast<std::int64_t>(info.seq);
  f.kind = static_cast<std::int32_t>(info.kind);
  const bool reduces = info.kind == CollectiveKind::Allreduce || info.kind == CollectiveKind::ReduceScatter;
  f.op = reduces ? static_cast<std::int32_t>(info.op) : 0;
  f.root = info.kind == CollectiveKind::Broadcast ? info.root : 0;
  if (info.kind != CollectiveKind::Barrier) {
    f.dtype = static_cast<std::int32_t>(info.dtype);
    // The type, not the index: rank r works on its own cuda:r or opencl:r.
    f.device_type = static_cast<std::int32_t>(info.device.type());
    f.ndim = info.shape.size();
    for (int i = 0; i < f.ndim; ++i) f.dims[i] = info.shape[i];
  }
  return f;
}

Shape shape_of(const Fingerprint& f) {
  Shape s;
  for (int i = 0; i < f.ndim; ++i) s.push_back(f.dims[i]);
  return s;
}

// The first field in which `b` (rank rb) differs from `a` (rank ra), as a
// message; "" when they agree.
std::string fingerprint_difference(const Fingerprint& a, int ra, const Fingerprint& b, int rb) {
  auto both = [&](const std::string& field, const std::string& va, const std::string& vb) {
    return cat("ranks disagree on the ", field, "; rank ", ra, " has ", va, ", rank ", rb, " has ", vb);
  };
  if (a.kind != b.kind)
    return both("collective", name(static_cast<CollectiveKind>(a.kind)), name(static_cast<CollectiveKind>(b.kind)));
  if (a.seq != b.seq) return both("sequence number", cat("#", a.seq), cat("#", b.seq));
  if (a.op != b.op)
    return both("reduce op", to_string(static_cast<ReduceOp>(a.op)), to_string(static_cast<ReduceOp>(b.op)));
  if (a.root != b.root) return both("root", cat(a.root), cat(b.root));
  if (a.dtype != b.dtype)
    return both("dtype", std::string(to_string(static_cast<DType>(a.dtype))),
                std::string(to_string(static_cast<DType>(b.dtype))));
  bool same_shape = a.ndim == b.ndim;
  for (int i = 0; same_shape && i < a.ndim; ++i) same_shape = a.dims[i] == b.dims[i];
  if (!same_shape) return both("shape", shape_of(a).str(), shape_of(b).str());
  if (a.device_type != b.device_type)
    return both("device type", std::string(to_string(static_cast<DeviceType>(a.device_type))),
                std::string(to_string(static_cast<DeviceType>(b.device_type))));
  return "";
}

// A view of host storage at `byte_offset` as a contiguous tensor.
Tensor host_view(const std::shared_ptr<anvil::detail::Storage>& storage, std::size_t byte_offset, const Shape& shape,
                 DType dtype) {
  return Tensor(std::make_shared<anvil::detail::TensorImpl>(
      storage, shape, contiguous_strides(shape), static_cast<std::int64_t>(byte_offset / element_size(dtype)), dtype));
}

void* data_of(const Tensor& t) {
  const auto& impl = t.impl_ref();
  return static_cast<char*>(impl.storage()->data()) +
         static_cast<std::size_t>(impl.offset()) * element_size(impl.dtype());
}

Buffer buffer_of(const Tensor& t) { return Buffer{data_of(t), static_cast<std::size_t>(t.numel()), t.dtype()}; }

std::size_t round_up(std::size_t n) { return (n + 63) / 64 * 64; }

// One collective's deadline and the watchdog that its engine's calls poll
// (engine.h).
class Watchdog final : public Watch {
 public:
  Watchdog(WorldEngine& world, const CollectiveInfo& info, double timeout_s)
      : world_(world),
        info_(info),
        timeout_s_(timeout_s),
        deadline_(Clock::now() +
                  std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))) {}

  const CollectiveInfo& info() const override { return info_; }

  bool peers_arrived() override {
    const std::vector<std::uint64_t>& heard = world_.heard();
    for (int r = 0; r < world_.size(); ++r)
      if (r != world_.rank() && heard[r] < info_.seq) return false;
    return true;
  }

  bool expired() override {
    world_.heard();  // take in the arrivals, for timed_out's message
    return Clock::now() > deadline_;
  }

  [[noreturn]] void timed_out(const char* waiting_for) override {
    const std::vector<std::uint64_t>& heard = world_.heard();
    std::string missing, last;
    for (int r = 0; r < world_.size(); ++r) {
      if (heard[r] >= info_.seq) continue;
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      last +=
          cat(last.empty() ? "" : ", ", "rank ", r, " at ", heard[r] == 0 ? std::string("none") : cat("#", heard[r]));
    }
    const std::string who = missing.empty()
                                ? std::string(
                                      "every rank arrived, so they disagree on the collective (run with "
                                      "ANVIL_DIST_DEBUG=1 to find the difference)")
                                : cat("ranks that did not arrive: [", missing, "] (last collective heard from: ", last,
                                      "); a rank died, hung, or skipped this collective");
    throw DistTimeout(cat("dist: ", info_.str(), " did not complete within ", timeout_s_,
                          " s (ANVIL_DIST_TIMEOUT) on rank ", world_.rank(),
                          waiting_for != nullptr ? cat(" (waiting in ", waiting_for, ")") : std::string(), "; ", who,
                          "; the group is unusable and this process exits with status 1"));
  }

 private:
  WorldEngine& world_;
  const CollectiveInfo& info_;
  double timeout_s_;
  Clock::time_point deadline_;
};

// One collective on the thread that runs it: where its engine's buffers are
// (Note [Staging]), and its raw calls, each announced first (Note [Who did
// not arrive]). The collectives below say which buffers they need; this
// makes them on the host or on the device, as the engine takes them.
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
  void reserve(std::size_t bytes) {
    if (!host_ || (staging_ && staging_->nbytes() >= bytes)) return;
    staging_.reset();  // return the old buffer first
    staging_ = std::make_shared<anvil::detail::Storage>(cpu(), std::max<std::size_t>(bytes, 64));
  }

  // A contiguous buffer the engine can take for `t`, holding t's data when
  // `copy`: `t` itself when it is one already, else one at `offset` in the
  // staging buffer (host) or a contiguous copy on t's device.
  Tensor in(const Tensor& t, std::size_t offset, bool copy) {
    if (host_) {
      if (t.device().is_cpu() && t.is_contiguous()) return t;
      Tensor host = host_view(staging_, offset, t.shape(), t.dtype());
      if (copy) anvil::detail::transfer_into(host.impl_ref(), t.contiguous().impl_ref());
      return host;
    }
    if (t.is_contiguous()) return t;
    return copy ? t.contiguous() : empty(t.shape(), t.dtype(), t.device());
  }

  // A buffer of `shape` in the collective's dtype, at `offset` in the staging
  // buffer (host) or new on the collective's device.
  Tensor scratch(std::size_t offset, const Shape& shape) {
    if (host_) return host_view(staging_, offset, shape, info().dtype);
    return empty(shape, info().dtype, info().device);
  }

  // Block `r` of a buffer that scratch() made with one more leading dimension.
  Tensor block(const Tensor& all, int r) {
    if (!host_) return all[r];
    Shape shape = all.shape();
    shape.erase(0);
    const std::size_t size = static_cast<std::size_t>(all.numel() / all.shape()[0]) * element_size(all.dtype());
    const std::size_t offset = static_cast<std::size_t>(all.impl_ref().offset()) * element_size(all.dtype());
    return host_view(staging_, offset + size * static_cast<std::size_t>(r), shape, all.dtype());
  }

  // A buffer's data from `src` (any device).
  void fill(const Tensor& buf, const Tensor& src) {
    if (host_) {
      anvil::detail::transfer_into(buf.impl_ref(), src.contiguous().impl_ref());
    } else {
      Tensor(buf).copy_(src);
    }
  }

  // Writes `buf` (as in() or block() returned) into `t` when it is not `t`.
  void out(const Tensor& t, const Tensor& buf) {
    if (buf.is_same(t)) return;
    if (host_ && t.is_contiguous()) {
      anvil::detail::transfer_into(t.impl_ref(), buf.impl_ref());
    } else {
      Tensor strided = t;
      strided.copy_(host_ ? buf.to(t.device()) : buf);
    }
  }

  void allreduce(const Tensor& buf) {
    arrive();
    engine_.allreduce(buffer_of(buf), info().op, watch_);
  }
  void broadcast(const Tensor& buf) {
    arrive();
    engine_.broadcast(buffer_of(buf), info().root, watch_);
  }
  void allgather(const Tensor& in, const Tensor& out) {
    arrive();
    engine_.allgather(buffer_of(in), buffer_of(out), watch_);
  }
  void reduce_scatter(const Tensor& in, const Tensor& out) {
    arrive();
    engine_.reduce_scatter(buffer_of(in), buffer_of(out), info().op, watch_);
  }

 private:
  void arrive() { world_.announce(info().seq); }

  Engine& engine_;
  WorldEngine& world_;
  Watchdog& watch_;
  std::shared_ptr<anvil::detail::Storage>& staging_;
  bool host_;
};

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
  void check_fingerprints(Watchdog& watch);

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

void EngineGroup::check_fingerprints(Watchdog& watch) {
  const Fingerprint mine = fingerprint_of(watch.info());
  std::vector<Fingerprint> all(static_cast<std::size_t>(size_));
  world_->exchange(&mine, sizeof(Fingerprint), all.data(), watch);
  for (int r = 0; r < size_; ++r) {
    const std::string diff = fingerprint_difference(mine, rank_, all[r], r);
    if (!diff.empty())
      throw CollectiveMismatch(cat("dist: ", watch.info().str(), ": ", diff, " (ANVIL_DIST_DEBUG=1 check, on rank ",
                                   rank_, "); every rank must issue the same collectives in the same order"));
  }
}

void EngineGroup::run(Task& task) {
  const CollectiveInfo& info = task.info;
  const anvil::profiler::Range span(name(info.kind), "collective");  // the profiler's collective span
  Watchdog watch(*world_, info, timeout_s_);
  if (debug_) check_fingerprints(watch);
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
