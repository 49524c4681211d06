// The Open MPI engine. See mpi_group.h.
//
// Note [One MPI thread]
// MPI is initialised MPI_THREAD_SERIALIZED by the group's worker thread, and
// after that one thread at a time calls MPI: collectives are queued by the
// callers (validated first, on the caller's thread) and run in issue order,
// one at a time (`running_`), so every rank issues them to MPI in the same
// order. The worker runs them, or the thread waiting for one that nobody has
// started yet (Note [The waiter runs its collective]); the group's mutex
// orders one thread's MPI calls before the next's. Each run uses the
// nonblocking collectives (MPI_Iallreduce, …) and drives them with MPI_Test,
// which lets it notice a deadline; Open MPI's blocking calls spin in the
// same progress loop, so nothing is lost in speed.
//
// Note [The waiter runs its collective]
// Handing a collective to the worker and its completion back costs two
// thread wake-ups, each microseconds on a VM whose vCPU sleeps. So wait() on
// a collective that is first in the queue while no other runs takes it out
// of the queue and runs it on the waiting thread, as the worker would have;
// a collective already started, or queued behind another, is waited for as
// before, and an unwaited one (DDP's buckets during backward) still
// progresses on the worker. NCCL collectives stay on the worker (Note
// [NCCL]: its communicator and the device's stream are set up there). A
// collective that breaks the group on the waiting thread throws there; the
// worker then gives the process its grace and leaves, as for its own
// (leave_after_failure).
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
// Before each collective every rank posts a small nonblocking "arrived at #N"
// message to every other rank on a communicator of its own, and keeps one
// receive posted from each peer. When a collective passes its deadline, the
// ranks not heard from at #N are the ranks that did not arrive: a rank that
// died, hung, or skipped the collective. MPI cannot recover from that, so
// the group is then broken: the collective's wait() throws DistTimeout, every
// later collective fails at once with it, and the process leaves with status
// 1 — at exit, or after kExitGraceSeconds if it is still running then (the
// message is printed to stderr first).
//
// Note [Ring for two ranks]
// Open MPI's nonblocking allreduce (coll/libnbc) reduces to one rank and
// broadcasts back ("binomial") when there are fewer than four ranks, which on
// two ranks moved 1-64 MiB at 0.2-0.6x the speed of the blocking
// MPI_Allreduce (coll/tuned) here; its ring (a reduce-scatter then an
// allgather, the same two steps on two ranks) ran at 0.9-1.05x. So for worlds
// of two or three ranks the worker asks for the ring, unless the user chose an
// algorithm (OMPI_MCA_coll_libnbc_iallreduce_algorithm). From four ranks on,
// libnbc picks the ring for large messages by itself.
//
// Note [NCCL]
// Whether a collective goes to NCCL must be the same decision on every rank,
// or one rank waits in NCCL while another waits in MPI. A rank cannot decide
// it from its own tensor: on a machine with one GPU, dist::device() is
// cuda:0 on rank 0 and the CPU on rank 1. So the ranks agree once, when the
// group starts: each says whether NCCL loads for it and its device() is a
// CUDA device, and the group uses NCCL only when every rank says yes (an
// MPI_MIN over those flags). Then tensors on cuda:N go to NCCL, else they
// are staged through the host like OpenCL ones, on every rank alike. A rank
// that then passes a CPU tensor where the others pass CUDA ones is a
// mismatch like any other: ANVIL_DIST_DEBUG=1 names it (the fingerprint
// holds the device type), and without it the watchdog ends it.
// NCCL's communicator is made at the group's first CUDA collective from a
// unique id that rank 0 broadcasts over MPI, nonblocking
// (ncclCommInitRankConfig with blocking = 0): the worker polls its state
// with ncclCommGetAsyncError against the collective's deadline and, past it,
// aborts it (ncclCommAbort) and raises DistTimeout, so a rank that never
// joins cannot hang the others in NCCL's init. On such a communicator any
// NCCL call may return ncclInProgress, after which nothing may be enqueued
// until the state is ncclSuccess again: every call is polled the same way.
// Every NCCL call is enqueued by the worker — in issue order, like the MPI
// collectives — on the device's own stream (Backend::native_stream). Such a
// collective's Work completes once it is enqueued: the result is then queued
// on the stream ahead of anything enqueued later. The watchdog covers the
// unique id's broadcast, the init and the enqueueing but not the kernels
// themselves: a rank missing from an NCCL collective shows as a wait at the
// next synchronize.
//
// Note [Staging]
// CPU tensors go straight to MPI. Tensors on other devices are copied into one
// host buffer per group (grown as needed, reused) with the ledger-counted
// copy path of Tensor::to, reduced there by MPI and copied back; the copy back
// is enqueued on the device's queue, so later work on the device sees it.
#include "distributed/mpi_group.h"

#include "anvil/runtime.h"

// The C API only: mpi.h would otherwise pull in the C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "core/env_flag.h"
#include "core/ledger_counters.h"
#include "core/tensor_impl.h"
#include "distributed/collective.h"
#include "distributed/nccl.h"
#include "ops/op_common.h"

namespace anvil::dist::detail {

using anvil::detail::cat;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kExitGraceSeconds = 10;
constexpr int kArriveTag = 1;

double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  ANVIL_CHECK(end != v && *end == '\0' && s > 0, ValueError, "dist: ", name,
              " must be a positive number of seconds; expected e.g. 300, got \"", v, "\"");
  return s;
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::I32:
      return MPI_INT32_T;
    case DType::I64:
      return MPI_INT64_T;
    case DType::U8:
    case DType::Bool:
      return MPI_UINT8_T;
    case DType::F16:  // turned away by check_dtype (collective.cpp)
    case DType::BF16:
      break;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return MPI_SUM;  // Avg = sum, then divide
    case ReduceOp::Prod:
      return MPI_PROD;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return cat("MPI error ", code);
  return std::string(buf, static_cast<std::size_t>(len));
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

// A view of `bytes` of host storage at `byte_offset` as a contiguous tensor.
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

std::size_t round_up(std::size_t n) { return (n + 63) / 64 * 64; }

}  // namespace

double dist_timeout_seconds() { return env_seconds("ANVIL_DIST_TIMEOUT", 300); }

bool dist_debug() { return anvil::detail::env_flag("ANVIL_DIST_DEBUG"); }

namespace {

class MpiGroup final : public ProcessGroup {
 public:
  MpiGroup(int expected_size, std::function<Device()> world_device);
  ~MpiGroup() override { shutdown(); }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  std::string engine() const override { return "mpi"; }
  std::string engine_for(Device d) const override { return use_nccl(d) ? "nccl" : engine(); }

  Work allreduce(Tensor& t, ReduceOp op) override;
  Work broadcast(Tensor& t, int root) override;
  Work allgather(std::vector<Tensor>& out, const Tensor& in) override;
  Work reduce_scatter(Tensor& out, const std::vector<Tensor>& in, ReduceOp op) override;
  Work barrier() override;

  void shutdown() noexcept;

 private:
  // One queued collective: `run` is called by the worker.
  struct Task {
    CollectiveInfo info;
    std::function<void(Task&)> run;
    std::shared_ptr<WorkState> work;
    bool worker_starts = true;  // Note [When the worker starts a collective]
  };

  Work submit(CollectiveInfo info, std::function<void(Task&)> run);
  void worker_main(int expected_size, const std::function<Device()>& world_device);
  // Note [NCCL]: the ranks' agreement, at start.
  void agree_on_nccl(const std::function<Device()>& world_device);
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

  // Worker-only helpers (Note [One MPI thread]).
  void post_arrival(std::uint64_t seq);
  void poll_arrivals();
  // Whether every other rank has announced collective #seq (polls first).
  bool every_rank_arrived(std::uint64_t seq);
  void progress(MPI_Request& req, const CollectiveInfo& info, Clock::time_point deadline);
  // `waiting_for`: what the worker was waiting in when the deadline passed, if not MPI.
  [[noreturn]] void timed_out(const CollectiveInfo& info, const char* waiting_for = nullptr);
  void check_mpi(int code, const CollectiveInfo& info, const char* call);
  void check_fingerprints(const CollectiveInfo& info, Clock::time_point deadline);
  // Host memory for a tensor of `bytes` at `offset` in the staging buffer;
  // reserve() first with the total.
  void reserve_staging(std::size_t bytes);

  // Note [NCCL]: whether `d`'s tensors go to NCCL, and the stream to enqueue
  // on (the communicator made first when needed).
  bool use_nccl(Device d) const { return nccl_all_ && d.type() == DeviceType::CUDA; }
  void* nccl_stream(const CollectiveInfo& info, Clock::time_point deadline);
  // Checks what NCCL's `call` returned; on ncclInProgress waits, until the
  // deadline, for the communicator to be ready again.
  void nccl_call(int code, const char* call, const CollectiveInfo& info, Clock::time_point deadline);
  // Aborts the communicator (if any); later CUDA collectives fail with `why`.
  void abort_nccl(const std::string& why) noexcept;
  static int nccl_type(DType t);
  static int nccl_op(ReduceOp op);

  // A contiguous tensor holding `t`'s data on the host: `t` itself for a
  // contiguous CPU tensor, else a copy in the staging buffer at `offset`.
  Tensor stage_in(const Tensor& t, std::size_t offset, bool copy);
  // Writes `host` (as returned by stage_in) back into `t` when it is not `t`.
  static void stage_out(const Tensor& t, const Tensor& host);

  int rank_ = 0, size_ = 1;
  int node_size_ = 1;  // ranks on this node
  int usable_cpus_ = 1;
  double timeout_s_ = 300;
  bool debug_ = false;

  // Worker state.
  MPI_Comm comm_ = MPI_COMM_NULL, arrive_comm_ = MPI_COMM_NULL, debug_comm_ = MPI_COMM_NULL;
  std::vector<std::uint64_t> heard_;  // highest sequence number each rank announced
  std::vector<std::uint64_t> arrive_buf_;
  std::vector<MPI_Request> arrive_req_;
  std::deque<std::pair<std::unique_ptr<std::uint64_t>, MPI_Request>> sends_;
  std::shared_ptr<anvil::detail::Storage> staging_;
  const NcclApi* nccl_ = nullptr;
  bool nccl_all_ = false;  // every rank agreed on NCCL at start (set before the constructor returns)
  NcclApi::Comm nccl_comm_ = nullptr;
  int nccl_device_ = -1;
  std::string nccl_failed_;  // why the communicator was aborted; "" while usable

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
  bool mpi_initialized_ = false;
};

MpiGroup::MpiGroup(int expected_size, std::function<Device()> world_device) {
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

void MpiGroup::worker_main(int expected_size, const std::function<Device()>& world_device) {
  try {
    // Note [Ring for two ranks]; setenv before MPI reads its parameters.
    if (expected_size >= 2 && expected_size <= 3)
      setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
    int provided = 0;
    int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    ANVIL_CHECK(code == MPI_SUCCESS, BackendError, "dist::init: MPI_Init_thread failed: ", mpi_error_string(code));
    mpi_initialized_ = true;
    ANVIL_CHECK(provided >= MPI_THREAD_SERIALIZED, BackendError,
                "dist::init: this MPI does not support threads; expected MPI_THREAD_SERIALIZED or better, got level ",
                provided, "; use an Open MPI built with thread support");
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_dup(MPI_COMM_WORLD, &arrive_comm_);
    MPI_Comm_dup(MPI_COMM_WORLD, &debug_comm_);
    // Errors come back as codes: a dead peer over TCP is a DistTimeout, not an abort.
    for (MPI_Comm c : {comm_, arrive_comm_, debug_comm_}) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
      MPI_Comm_size(node, &node_size_);
      MPI_Comm_free(&node);
    }
    cpu_set_t cpus;
    usable_cpus_ = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    ANVIL_CHECK(expected_size <= 0 || expected_size == size_, ValueError,
                "dist::init: the launcher's world size and MPI's disagree; expected ", expected_size,
                " processes (WORLD_SIZE), got ", size_,
                " from MPI; launch with mpirun -np N (or a launcher Open MPI understands)");
    heard_.assign(static_cast<std::size_t>(size_), 0);
    arrive_buf_.assign(static_cast<std::size_t>(size_), 0);
    arrive_req_.assign(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
    for (int r = 0; r < size_; ++r)
      if (r != rank_) MPI_Irecv(&arrive_buf_[r], 1, MPI_UINT64_T, r, kArriveTag, arrive_comm_, &arrive_req_[r]);
    agree_on_nccl(world_device);
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

  // Leaving (Note [Leaving MPI]): a broken group cannot finalise (MPI would
  // wait for the rank that is gone).
  bool broken;
  {
    std::lock_guard lock(mutex_);
    broken = !broken_.empty();
  }
  if (!broken) {
    for (int r = 0; r < size_; ++r)
      if (arrive_req_[r] != MPI_REQUEST_NULL) {
        MPI_Cancel(&arrive_req_[r]);
        MPI_Wait(&arrive_req_[r], MPI_STATUS_IGNORE);
      }
    for (auto& s : sends_) MPI_Wait(&s.second, MPI_STATUS_IGNORE);
    sends_.clear();
    if (nccl_comm_ != nullptr) nccl_->comm_destroy(nccl_comm_);  // before MPI goes (Note [NCCL])
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&arrive_comm_);
    MPI_Comm_free(&debug_comm_);
    MPI_Finalize();
  }
  std::lock_guard lock(mutex_);
  finished_ = true;
  cv_.notify_all();
}

void MpiGroup::agree_on_nccl(const std::function<Device()>& world_device) {
  // Every rank takes part, whatever it says (Note [NCCL]).
  const NcclApi* api = load_nccl(nullptr);
  int mine = 0;
  if (api != nullptr) {
    try {
      mine = world_device().type() == DeviceType::CUDA ? 1 : 0;
    } catch (...) {
      // A bad ANVIL_DIST_DEVICE: no NCCL here; dist::device() reports it.
    }
  }
  int all = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  int code = MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm_, &req);
  ANVIL_CHECK(code == MPI_SUCCESS, BackendError,
              "dist::init: MPI_Iallreduce (the ranks' agreement on NCCL) failed: ", mpi_error_string(code));
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  for (int flag = 0; !flag;) {
    code = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    ANVIL_CHECK(code == MPI_SUCCESS, BackendError,
                "dist::init: MPI_Test (the ranks' agreement on NCCL) failed: ", mpi_error_string(code));
    if (!flag && Clock::now() > deadline)
      throw DistTimeout(cat("dist::init: the ranks' agreement on NCCL did not complete within ", timeout_s_,
                            " s (ANVIL_DIST_TIMEOUT) on rank ", rank_, " of ", size_,
                            "; a rank died or hung while starting"));
    if (!flag) sched_yield();
  }
  nccl_all_ = all == 1;
  if (nccl_all_) nccl_ = api;
}

bool MpiGroup::run_task(Task& task) {
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
      task.run(task);
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
  task.run = nullptr;
  task.work->finish(error);
  return broke;
}

void MpiGroup::run_on_caller(const std::shared_ptr<Task>& task) {
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

bool MpiGroup::worker_starts(Device d) const {
  if (use_nccl(d) || d.type() != DeviceType::CPU || node_size_ < size_) return true;
  return static_cast<std::int64_t>(node_size_) * num_threads() < usable_cpus_;
}

bool MpiGroup::worker_has_queued_work() const {
  for (const auto& t : queue_)
    if (t->worker_starts) return true;
  return false;
}

void MpiGroup::leave_after_failure() {
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

void MpiGroup::fail_broken(const std::string& message) {
  std::deque<std::shared_ptr<Task>> rest;
  {
    std::lock_guard lock(mutex_);
    broken_ = message;
    rest.swap(queue_);
  }
  for (auto& t : rest) {
    t->run = nullptr;  // its tensors before its waiter goes on (run_task)
    t->work->finish(std::make_exception_ptr(DistTimeout(
        cat("dist: ", t->info.str(), " not run: the group is unusable after an earlier failure (", message, ")"))));
  }
}

Work MpiGroup::submit(CollectiveInfo info, std::function<void(Task&)> run) {
  auto task = std::make_shared<Task>();
  task->run = std::move(run);
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
    if (!use_nccl(task->info.device))
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

void MpiGroup::shutdown() noexcept {
  {
    std::lock_guard lock(mutex_);
    if (!worker_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  // Note [Leaving MPI]: the queue drains and MPI_Finalize runs on the worker;
  // both are bounded by the timeout, after which we leave without them.
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

// ---- the worker's MPI loop ---------------------------------------------------------

void MpiGroup::post_arrival(std::uint64_t seq) {
  while (!sends_.empty()) {  // retire finished announcements
    int flag = 0;
    MPI_Test(&sends_.front().second, &flag, MPI_STATUS_IGNORE);
    if (!flag) break;
    sends_.pop_front();
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    auto value = std::make_unique<std::uint64_t>(seq);
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Isend(value.get(), 1, MPI_UINT64_T, r, kArriveTag, arrive_comm_, &req);
    sends_.emplace_back(std::move(value), req);
  }
  heard_[rank_] = seq;
}

void MpiGroup::poll_arrivals() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    for (;;) {
      int flag = 0;
      if (MPI_Test(&arrive_req_[r], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) break;
      heard_[r] = std::max(heard_[r], arrive_buf_[r]);
      MPI_Irecv(&arrive_buf_[r], 1, MPI_UINT64_T, r, kArriveTag, arrive_comm_, &arrive_req_[r]);
    }
  }
}

void MpiGroup::timed_out(const CollectiveInfo& info, const char* waiting_for) {
  poll_arrivals();
  std::string missing, last;
  for (int r = 0; r < size_; ++r) {
    if (heard_[r] >= info.seq) continue;
    missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    last +=
        cat(last.empty() ? "" : ", ", "rank ", r, " at ", heard_[r] == 0 ? std::string("none") : cat("#", heard_[r]));
  }
  const std::string who = missing.empty()
                              ? std::string(
                                    "every rank arrived, so they disagree on the collective (run with "
                                    "ANVIL_DIST_DEBUG=1 to find the difference)")
                              : cat("ranks that did not arrive: [", missing, "] (last collective heard from: ", last,
                                    "); a rank died, hung, or skipped this collective");
  throw DistTimeout(cat("dist: ", info.str(), " did not complete within ", timeout_s_,
                        " s (ANVIL_DIST_TIMEOUT) on rank ", rank_,
                        waiting_for != nullptr ? cat(" (waiting in ", waiting_for, ")") : std::string(), "; ", who,
                        "; the group is unusable and this process exits with status 1"));
}

void MpiGroup::check_mpi(int code, const CollectiveInfo& info, const char* call) {
  if (code == MPI_SUCCESS) return;
  // With MPI_ERRORS_RETURN a lost peer (TCP) shows up here; it is the same
  // failure as a timeout, and MPI cannot recover from it either.
  poll_arrivals();
  throw DistTimeout(cat("dist: ", info.str(), " failed on rank ", rank_, ": ", call, ": ", mpi_error_string(code),
                        " (a rank died?); the group is unusable and this process exits with status 1"));
}

// Note [Waiting for a late rank]
// Until every rank has announced the collective (Note [Who did not arrive])
// there is nothing for MPI to move, and a spinning worker only takes CPU:
// its own rank's other threads', and on a loaded machine the late rank's
// too, which makes it later still. sched_yield() alone does not give the
// core away when the scheduler has nothing else queued on it: a rank that
// waited 0.6 s for a late peer used 0.31 s of CPU on a loaded 2-core
// machine, a whole core on an idle one. So after kSpinBeforeNap of waiting
// the worker naps kNap between tests while a peer is missing (a late rank
// then costs at most about one nap of latency; an on-time one nothing), and
// spins again once every rank is in, since then each test moves data
// (giving the core away after a millisecond, like Open MPI's
// yield_when_idle). Measured on the 2-rank MLP of benchmarks/train at load
// 7 on 2 cores: epoch 3.95-4.15 s -> 3.83-4.00 s, CPU per epoch over both
// ranks 2.2-2.4 s -> 1.9-2.1 s; on an idle machine no change beyond noise.
namespace {
constexpr auto kSpinBeforeNap = std::chrono::milliseconds(1);
constexpr auto kNap = std::chrono::microseconds(50);
}  // namespace

bool MpiGroup::every_rank_arrived(std::uint64_t seq) {
  poll_arrivals();
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && heard_[r] < seq) return false;
  return true;
}

void MpiGroup::progress(MPI_Request& req, const CollectiveInfo& info, Clock::time_point deadline) {
  const auto start = Clock::now();
  bool idle = false, all_in = false;
  for (unsigned spins = 1;; ++spins) {
    int flag = 0;
    check_mpi(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), info, "MPI_Test");
    if (flag) return;
    // The clock only every 16th test: reading it each time was 7% of a
    // small allreduce's time.
    const bool napping = !all_in && (spins & 15) == 0 && Clock::now() - start > kSpinBeforeNap &&
                         !(all_in = every_rank_arrived(info.seq));
    if (napping) {
      if (Clock::now() > deadline) timed_out(info);
      std::this_thread::sleep_for(kNap);
      continue;
    }
    if ((spins & 255) == 0) {
      poll_arrivals();
      const auto now = Clock::now();
      if (now > deadline) timed_out(info);
      idle = now - start > std::chrono::milliseconds(1);
    }
    if (idle) sched_yield();
  }
}

void MpiGroup::check_fingerprints(const CollectiveInfo& info, Clock::time_point deadline) {
  const Fingerprint mine = fingerprint_of(info);
  std::vector<Fingerprint> all(static_cast<std::size_t>(size_));
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(&mine, sizeof(Fingerprint), MPI_BYTE, all.data(), sizeof(Fingerprint), MPI_BYTE, debug_comm_,
                           &req),
            info, "MPI_Iallgather");
  progress(req, info, deadline);
  for (int r = 0; r < size_; ++r) {
    const std::string diff = fingerprint_difference(mine, rank_, all[r], r);
    if (!diff.empty())
      throw CollectiveMismatch(cat("dist: ", info.str(), ": ", diff, " (ANVIL_DIST_DEBUG=1 check, on rank ", rank_,
                                   "); every rank must issue the same collectives in the same order"));
  }
}

void MpiGroup::reserve_staging(std::size_t bytes) {
  if (staging_ && staging_->nbytes() >= bytes) return;
  staging_.reset();  // return the old buffer first
  staging_ = std::make_shared<anvil::detail::Storage>(cpu(), std::max<std::size_t>(bytes, 64));
}

Tensor MpiGroup::stage_in(const Tensor& t, std::size_t offset, bool copy) {
  if (t.device().is_cpu() && t.is_contiguous()) return t;
  Tensor host = host_view(staging_, offset, t.shape(), t.dtype());
  if (copy) anvil::detail::transfer_into(host, t);
  return host;
}

void MpiGroup::stage_out(const Tensor& t, const Tensor& host) {
  if (host.is_same(t)) return;
  if (t.is_contiguous()) {
    anvil::detail::transfer_into(t, host);
  } else {
    Tensor strided = t;
    strided.copy_(host.to(t.device()));
  }
}

void MpiGroup::abort_nccl(const std::string& why) noexcept {
  if (nccl_comm_ != nullptr) nccl_->comm_abort(nccl_comm_);
  nccl_comm_ = nullptr;
  nccl_failed_ = why;
}

void MpiGroup::nccl_call(int code, const char* call, const CollectiveInfo& info, Clock::time_point deadline) {
  if (code != NcclApi::kInProgress) {
    nccl_->check(code, call);
    return;
  }
  // Note [NCCL]: a nonblocking communicator is busy until its state is
  // ncclSuccess; nothing else may be enqueued before. An error state leaves
  // the communicator unusable: it is aborted.
  for (unsigned spins = 1;; ++spins) {
    int state = NcclApi::kInProgress;
    const int query = nccl_->comm_get_async_error(nccl_comm_, &state);
    const int failure = query != 0 ? query : state != NcclApi::kInProgress ? state : 0;
    if (query == 0 && state == 0) return;
    if (failure != 0) {
      const char* what = query != 0 ? "ncclCommGetAsyncError" : call;
      abort_nccl(cat(what, " failed at ", info.str(), ": ", nccl_->get_error_string(failure)));
      nccl_->check(failure, what);
    }
    if ((spins & 255) == 0) {
      poll_arrivals();
      if (Clock::now() > deadline) {
        abort_nccl(cat(call, " timed out at ", info.str()));
        timed_out(info, call);
      }
    }
    sched_yield();
  }
}

void* MpiGroup::nccl_stream(const CollectiveInfo& info, Clock::time_point deadline) {
  anvil::detail::Backend& backend = anvil::detail::backend_checked(info.device, name(info.kind));
  ANVIL_CHECK(nccl_failed_.empty(), BackendError, "dist (nccl): ", info.str(),
              " not run: this group's NCCL communicator was aborted after an earlier error (", nccl_failed_, ")");
  if (nccl_comm_ == nullptr) {
    // Rank 0 sends its ncclGetUniqueId status with the id, so that every
    // rank fails alike when it failed.
    struct {
      NcclApi::UniqueId id;
      std::int32_t status;
    } unique{};
    if (rank_ == 0) unique.status = nccl_->get_unique_id(&unique.id);
    MPI_Request req = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibcast(&unique, sizeof unique, MPI_BYTE, 0, comm_, &req), info, "MPI_Ibcast (NCCL's unique id)");
    progress(req, info, deadline);
    if (unique.status != 0) {
      abort_nccl(cat("ncclGetUniqueId failed on rank 0: ", nccl_->get_error_string(unique.status)));
      throw BackendError(cat("dist (nccl): ", info.str(), ": ", nccl_failed_, " (ncclResult_t ", unique.status, ")"));
    }
    // native_stream also makes the device current, which NCCL's init needs.
    ANVIL_CHECK(backend.native_stream(info.device.index()) != nullptr, BackendError, name(info.kind), ": ",
                info.device.str(), " has no stream for NCCL");
    NcclApi::Config config;
    config.blocking = 0;  // Note [NCCL]: polled against the deadline below
    const int code = nccl_->comm_init_rank_config(&nccl_comm_, size_, unique.id, rank_, &config);
    nccl_device_ = info.device.index();
    if (code != NcclApi::kInProgress && code != 0) {
      nccl_comm_ = nullptr;  // failing at once, NCCL frees the communicator itself: nothing to abort
      abort_nccl(cat("ncclCommInitRankConfig failed at ", info.str(), ": ", nccl_->get_error_string(code)));
      nccl_->check(code, "ncclCommInitRankConfig");
    }
    nccl_call(code, "ncclCommInitRankConfig", info, deadline);
  }
  ANVIL_CHECK(info.device.index() == nccl_device_, ValueError, name(info.kind),
              ": this group's NCCL communicator is on cuda:", nccl_device_, "; expected tensors on it, got ",
              info.device.str(), "; each rank uses one GPU (anvil::dist::device())");
  void* stream = backend.native_stream(info.device.index());  // also makes the device current
  ANVIL_CHECK(stream != nullptr, BackendError, name(info.kind), ": ", info.device.str(), " has no stream for NCCL");
  return stream;
}

int MpiGroup::nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return NcclApi::Float32;
    case DType::F64:
      return NcclApi::Float64;
    case DType::I32:
      return NcclApi::Int32;
    case DType::I64:
      return NcclApi::Int64;
    case DType::U8:
    case DType::Bool:
      return NcclApi::Uint8;
    case DType::F16:  // turned away by check_dtype (collective.cpp)
    case DType::BF16:
      break;
  }
  return NcclApi::Uint8;
}

int MpiGroup::nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return NcclApi::Sum;
    case ReduceOp::Avg:
      return NcclApi::Avg;  // NCCL's sum then divide (integers truncate)
    case ReduceOp::Prod:
      return NcclApi::Prod;
    case ReduceOp::Max:
      return NcclApi::Max;
    case ReduceOp::Min:
      return NcclApi::Min;
  }
  return NcclApi::Sum;
}

// ---- the collectives -----------------------------------------------------------------

namespace {
void check_count(const char* op, std::int64_t n) {
  ANVIL_CHECK(n <= INT_MAX, ValueError, op, ": too many elements for one MPI call; expected at most ", INT_MAX,
              ", got ", n, "; split the tensor");
}
}  // namespace

Work MpiGroup::allreduce(Tensor& t, ReduceOp op) {
  check_tensor("allreduce", t, "the tensor");
  check_dtype("allreduce", t.dtype(), true, op);
  check_count("allreduce", t.numel());
  CollectiveInfo info{CollectiveKind::Allreduce, 0, op, 0, t.dtype(), t.shape(), t.device()};
  Tensor target = t;
  return submit(std::move(info), [this, target](Task& task) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    const CollectiveInfo& info = task.info;
    if (debug_) check_fingerprints(info, deadline);
    if (use_nccl(info.device)) {
      Tensor dense = target.contiguous();
      post_arrival(info.seq);
      void* stream = nccl_stream(info, deadline);
      nccl_call(nccl_->all_reduce(data_of(dense), data_of(dense), static_cast<std::size_t>(dense.numel()),
                                  nccl_type(info.dtype), nccl_op(info.op), nccl_comm_, stream),
                "ncclAllReduce", info, deadline);
      if (!dense.is_same(target)) Tensor(target).copy_(dense);
      anvil::detail::record_collective(info.device, target.nbytes());
      return;
    }
    reserve_staging(target.nbytes());
    Tensor host = stage_in(target, 0, true);
    post_arrival(info.seq);
    MPI_Request req = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data_of(host), static_cast<int>(host.numel()), mpi_type(info.dtype),
                             mpi_op(info.op), comm_, &req),
              info, "MPI_Iallreduce");
    progress(req, info, deadline);
    if (info.op == ReduceOp::Avg) divide_host(data_of(host), static_cast<std::size_t>(host.numel()), info.dtype, size_);
    stage_out(target, host);
    anvil::detail::record_collective(info.device, target.nbytes());
  });
}

Work MpiGroup::broadcast(Tensor& t, int root) {
  check_tensor("broadcast", t, "the tensor");
  check_dtype("broadcast", t.dtype(), false, ReduceOp::Sum);
  check_root("broadcast", root, size_);
  check_count("broadcast", t.numel());
  CollectiveInfo info{CollectiveKind::Broadcast, 0, ReduceOp::Sum, root, t.dtype(), t.shape(), t.device()};
  Tensor target = t;
  return submit(std::move(info), [this, target](Task& task) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    const CollectiveInfo& info = task.info;
    if (debug_) check_fingerprints(info, deadline);
    if (use_nccl(info.device)) {
      Tensor dense = target.contiguous();
      post_arrival(info.seq);
      void* stream = nccl_stream(info, deadline);
      nccl_call(nccl_->broadcast(data_of(dense), data_of(dense), static_cast<std::size_t>(dense.numel()),
                                 nccl_type(info.dtype), info.root, nccl_comm_, stream),
                "ncclBroadcast", info, deadline);
      if (!dense.is_same(target)) Tensor(target).copy_(dense);
      anvil::detail::record_collective(info.device, target.nbytes());
      return;
    }
    reserve_staging(target.nbytes());
    const bool is_root = rank_ == info.root;
    Tensor host = stage_in(target, 0, is_root);
    post_arrival(info.seq);
    MPI_Request req = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibcast(data_of(host), static_cast<int>(host.numel()), mpi_type(info.dtype), info.root, comm_, &req),
              info, "MPI_Ibcast");
    progress(req, info, deadline);
    if (!is_root) stage_out(target, host);
    anvil::detail::record_collective(info.device, target.nbytes());
  });
}

Work MpiGroup::allgather(std::vector<Tensor>& out, const Tensor& in) {
  check_tensor("allgather", in, "in");
  check_dtype("allgather", in.dtype(), false, ReduceOp::Sum);
  check_like("allgather", out, "out", in.dtype(), in.shape(), in.device(), static_cast<std::size_t>(size_));
  check_count("allgather", in.numel() * size_);
  CollectiveInfo info{CollectiveKind::Allgather, 0, ReduceOp::Sum, 0, in.dtype(), in.shape(), in.device()};
  std::vector<Tensor> targets = out;
  Tensor source = in;
  return submit(std::move(info), [this, targets, source](Task& task) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    const CollectiveInfo& info = task.info;
    if (debug_) check_fingerprints(info, deadline);
    if (use_nccl(info.device)) {
      Tensor dense = source.contiguous();
      Shape all_shape = source.shape();
      all_shape.insert(0, size_);
      Tensor gathered = empty(all_shape, info.dtype, info.device);
      post_arrival(info.seq);
      void* stream = nccl_stream(info, deadline);
      nccl_call(nccl_->all_gather(data_of(dense), data_of(gathered), static_cast<std::size_t>(dense.numel()),
                                  nccl_type(info.dtype), nccl_comm_, stream),
                "ncclAllGather", info, deadline);
      for (int r = 0; r < size_; ++r) Tensor(targets[r]).copy_(gathered[r]);
      anvil::detail::record_collective(info.device, source.nbytes() * static_cast<std::size_t>(size_));
      return;
    }
    const std::size_t one = source.nbytes(), in_bytes = round_up(one);
    reserve_staging(in_bytes + one * static_cast<std::size_t>(size_));
    Tensor host_in = stage_in(source, 0, true);
    Shape all_shape = source.shape();
    all_shape.insert(0, size_);
    Tensor gathered = host_view(staging_, in_bytes, all_shape, info.dtype);
    post_arrival(info.seq);
    MPI_Request req = MPI_REQUEST_NULL;
    const int n = static_cast<int>(source.numel());
    check_mpi(MPI_Iallgather(data_of(host_in), n, mpi_type(info.dtype), data_of(gathered), n, mpi_type(info.dtype),
                             comm_, &req),
              info, "MPI_Iallgather");
    progress(req, info, deadline);
    for (int r = 0; r < size_; ++r)
      stage_out(targets[r], host_view(staging_, in_bytes + one * r, source.shape(), info.dtype));
    anvil::detail::record_collective(info.device, one * static_cast<std::size_t>(size_));
  });
}

Work MpiGroup::reduce_scatter(Tensor& out, const std::vector<Tensor>& in, ReduceOp op) {
  check_tensor("reduce_scatter", out, "out");
  check_dtype("reduce_scatter", out.dtype(), true, op);
  check_like("reduce_scatter", in, "in", out.dtype(), out.shape(), out.device(), static_cast<std::size_t>(size_));
  check_count("reduce_scatter", out.numel() * size_);
  CollectiveInfo info{CollectiveKind::ReduceScatter, 0, op, 0, out.dtype(), out.shape(), out.device()};
  Tensor target = out;
  std::vector<Tensor> sources = in;
  return submit(std::move(info), [this, target, sources](Task& task) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    const CollectiveInfo& info = task.info;
    if (debug_) check_fingerprints(info, deadline);
    if (use_nccl(info.device)) {
      Shape all_shape = target.shape();
      all_shape.insert(0, size_);
      Tensor packed = empty(all_shape, info.dtype, info.device);
      for (int r = 0; r < size_; ++r) packed[r].copy_(sources[r]);
      Tensor dense = target.is_contiguous() ? target : empty(target.shape(), info.dtype, info.device);
      post_arrival(info.seq);
      void* stream = nccl_stream(info, deadline);
      nccl_call(nccl_->reduce_scatter(data_of(packed), data_of(dense), static_cast<std::size_t>(dense.numel()),
                                      nccl_type(info.dtype), nccl_op(info.op), nccl_comm_, stream),
                "ncclReduceScatter", info, deadline);
      if (!dense.is_same(target)) Tensor(target).copy_(dense);
      anvil::detail::record_collective(info.device, target.nbytes() * static_cast<std::size_t>(size_));
      return;
    }
    const std::size_t one = target.nbytes(), packed_bytes = round_up(one * static_cast<std::size_t>(size_));
    reserve_staging(packed_bytes + one);
    for (int r = 0; r < size_; ++r)
      anvil::detail::transfer_into(host_view(staging_, one * r, target.shape(), info.dtype), sources[r]);
    Tensor host_out = target.device().is_cpu() && target.is_contiguous()
                          ? target
                          : host_view(staging_, packed_bytes, target.shape(), info.dtype);
    post_arrival(info.seq);
    MPI_Request req = MPI_REQUEST_NULL;
    check_mpi(
        MPI_Ireduce_scatter_block(data_of(host_view(staging_, 0, target.shape(), info.dtype)), data_of(host_out),
                                  static_cast<int>(target.numel()), mpi_type(info.dtype), mpi_op(info.op), comm_, &req),
        info, "MPI_Ireduce_scatter_block");
    progress(req, info, deadline);
    if (info.op == ReduceOp::Avg)
      divide_host(data_of(host_out), static_cast<std::size_t>(host_out.numel()), info.dtype, size_);
    stage_out(target, host_out);
    anvil::detail::record_collective(info.device, one * static_cast<std::size_t>(size_));
  });
}

Work MpiGroup::barrier() {
  CollectiveInfo info{CollectiveKind::Barrier, 0, ReduceOp::Sum, 0, DType::U8, Shape{}, cpu()};
  return submit(std::move(info), [this](Task& task) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
    const CollectiveInfo& info = task.info;
    if (debug_) check_fingerprints(info, deadline);
    post_arrival(info.seq);
    MPI_Request req = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(comm_, &req), info, "MPI_Ibarrier");
    progress(req, info, deadline);
  });
}

}  // namespace

std::unique_ptr<ProcessGroup> make_mpi_group(int expected_size, std::function<Device()> world_device) {
  return std::make_unique<MpiGroup>(expected_size, std::move(world_device));
}

void shutdown_mpi_group(ProcessGroup& group) noexcept { static_cast<MpiGroup&>(group).shutdown(); }

}  // namespace anvil::dist::detail
