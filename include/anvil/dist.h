// anvil/dist.h — collectives across processes, machines and devices (DESIGN §8).
//
//   auto& world = anvil::dist::init();           // mpirun's environment, or a world of one
//   anvil::Device d = anvil::dist::device();     // try_gpu(local_rank)
//   auto g = anvil::ones({1024}, d);
//   world.allreduce(g, anvil::dist::ReduceOp::Avg).wait();   // in place, on d
//
//   anvil::dist::LocalGroup local({anvil::gpu(0), anvil::gpu(1)});   // one process, two devices
//   std::vector<anvil::Tensor> parts = {a_on_gpu0, b_on_gpu1};
//   local.allreduce(parts).wait();                // every part now holds a + b, on its device
//
// Every collective validates its arguments like an op (defined, one device for
// all its tensors, dtype — f32, f64, i32, i64, u8, and bool for max/min,
// broadcast and allgather — and shape) and throws the usual typed errors
// before anything is sent. Non-contiguous tensors are made contiguous and the
// result written back. Tensors stay on their devices: staging through host
// buffers, where the engine needs it, is the engine's business and shows in
// the ledger (copies, and per device the collectives and their bytes).
// ReduceOp::Avg is the sum divided by the group's size; integers truncate
// towards zero.
//
// Collectives on one group are issued in the same order on every rank; each
// has a sequence number (#1, #2, …). A watchdog (ANVIL_DIST_TIMEOUT seconds,
// default 300) turns a hang into DistTimeout naming the collective, its
// sequence number, size, dtype and device, and the ranks that did not arrive.
// MPI cannot recover from that: the group is then unusable (later
// collectives fail at once with DistTimeout) and the process ends with
// status 1 — when it exits, or 10 s after the error if it is still running
// then (the error is printed to stderr first). ANVIL_DIST_DEBUG=1 first
// compares every collective's op, sequence number, dtype, shape and device
// type (cpu, opencl, cuda) across ranks and raises CollectiveMismatch
// naming both ranks and the field.
//
// Engines: Open MPI between processes ("mpi"; one background thread per
// group runs the collectives in issue order and is the only thread that
// calls MPI), NCCL for cuda:N tensors (see below), a world of one without a
// launcher ("single"), and LocalGroup in one process.
//
// NCCL: libnccl.so.2 (2.14 or newer) is loaded at run time; ANVIL_DIST_NCCL=0
// turns it off, and nccl_available() says whether it loaded and why not. An
// MPI group uses NCCL only when, at its creation, every rank's device()
// is a CUDA device and NCCL loaded on every rank; then its collectives on
// cuda:N tensors go to NCCL (engine_for() says "nccl"), and every rank must
// pass CUDA tensors to the same collectives (ANVIL_DIST_DEBUG=1 checks the
// device type too). Otherwise CUDA tensors are staged through the host like
// OpenCL ones. NCCL's communicator is made at the group's first CUDA
// collective without blocking, bounded by ANVIL_DIST_TIMEOUT like any
// collective (DistTimeout); an NCCL collective's Work completes once it is
// enqueued on the device's stream, and the watchdog does not cover its
// kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "anvil/device.h"
#include "anvil/error.h"
#include "anvil/tensor.h"

namespace anvil::dist {

enum class ReduceOp : std::uint8_t { Sum, Avg, Max, Min, Prod };
const char* to_string(ReduceOp op) noexcept;  // "sum", …

struct WorkState;  // src/distributed

// A collective in flight. wait() blocks until it is done on this rank (the
// result is then in the output tensors, or queued on their device's queue
// ahead of anything enqueued later) and rethrows the collective's error.
// A Work that is never waited for is waited for by its destructor, which
// swallows the error (wait() to see it). The tensors of a collective must
// not be used until its wait() returns.
class Work {
 public:
  Work() = default;  // already complete
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}
  Work(const Work&) = default;
  Work(Work&&) noexcept = default;
  Work& operator=(const Work& other);
  Work& operator=(Work&& other) noexcept;
  ~Work();
  void wait();
  bool is_completed() const;

 private:
  void wait_quietly() noexcept;
  std::shared_ptr<WorkState> state_;
};

// A group of processes (ranks). Each collective returns at once with a Work;
// the collective runs in the group's background thread in the order issued.
// (Where every rank is on one machine and their threads already fill its
// cores, a CPU tensor's collective waits in the queue until wait(),
// is_completed() or the Work's destructor asks for it: a background thread
// would only take a core from the ranks. src/distributed/process_group.cpp, Note [When
// the worker starts a collective].)
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual std::string engine() const = 0;  // "mpi", "single"
  // The engine that runs this group's collectives on `d`'s tensors: "nccl"
  // for cuda:N tensors of an MPI group that uses NCCL (see above), else engine().
  virtual std::string engine_for(Device d) const {
    (void)d;
    return engine();
  }

  // In place on every rank: t = op over every rank's t.
  virtual Work allreduce(Tensor& t, ReduceOp op = ReduceOp::Sum) = 0;
  // In place: every rank's t = root's t.
  virtual Work broadcast(Tensor& t, int root = 0) = 0;
  // out[r] = rank r's `in`; `out` has size() tensors of in's shape, dtype and device.
  virtual Work allgather(std::vector<Tensor>& out, const Tensor& in) = 0;
  // out = op over every rank's in[rank()]; `in` has size() tensors of out's shape.
  virtual Work reduce_scatter(Tensor& out, const std::vector<Tensor>& in, ReduceOp op = ReduceOp::Sum) = 0;
  virtual Work barrier() = 0;
};

// The same collectives in one process over a list of distinct devices (the
// book's allreduce across GPUs in one program): each call takes one tensor
// per device, in the group's device order, and leaves each result on its own
// device (device-to-device copies where the backend has them, through the
// host otherwise). The work is enqueued on the devices' queues by the call
// itself, so the returned Work is already complete.
class LocalGroup {
 public:
  explicit LocalGroup(std::vector<Device> devices);
  const std::vector<Device>& devices() const noexcept { return devices_; }
  int size() const noexcept { return static_cast<int>(devices_.size()); }

  Work allreduce(std::vector<Tensor>& per_device, ReduceOp op = ReduceOp::Sum);
  Work broadcast(std::vector<Tensor>& per_device, int root = 0);
  // out[i][j] = per_device[j], on device i.
  Work allgather(std::vector<std::vector<Tensor>>& out, const std::vector<Tensor>& per_device);
  // out[i] = op over j of in[j][i], on device i.
  Work reduce_scatter(std::vector<Tensor>& out, const std::vector<std::vector<Tensor>>& in,
                      ReduceOp op = ReduceOp::Sum);

 private:
  std::vector<Device> devices_;
};

// ---- the world ----------------------------------------------------------------------

// Reads the launcher's environment (Open MPI's OMPI_COMM_WORLD_RANK/SIZE/
// LOCAL_RANK, or RANK/WORLD_SIZE/LOCAL_RANK) once and returns the world
// group: Open MPI between processes (NCCL for cuda:N tensors where the
// library loads), or a world of one when the program was not launched by a
// launcher. Later calls return the same group, which lives until the
// process exits; MPI is finalised at exit (bounded by the timeout).
// Under mpirun as root or in a container Open MPI needs
// OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 and
// OMPI_MCA_btl_vader_single_copy_mechanism=none (see tests/CMakeLists.txt).
ProcessGroup& init();
bool is_initialized() noexcept;
ProcessGroup& world();  // init() must have been called: ValueError otherwise
int rank();             // world().rank()
int world_size();
int local_rank();  // this process's index among the ranks of its machine
// This process's device: try_gpu(local_rank()) unless ANVIL_DIST_DEVICE
// names one ("opencl:1").
Device device();

// Whether NCCL loaded in this process (libnccl.so.2, 2.14 or newer, at run
// time; not turned off by ANVIL_DIST_NCCL=0). When it did not, *why (if
// given) says why; loading is tried once per process. Needs no GPU.
bool nccl_available(std::string* why = nullptr);

// Raised on every surviving rank when a collective does not complete in
// time (a rank died, hung, or skipped the collective).
class DistTimeout : public Error {
 public:
  using Error::Error;
};
// ANVIL_DIST_DEBUG=1: the ranks disagree on a collective (op, sequence
// number, dtype, shape or device type); names both ranks and the field.
class CollectiveMismatch : public Error {
 public:
  using Error::Error;
};

}  // namespace anvil::dist
