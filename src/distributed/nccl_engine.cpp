// The NCCL engine (engine.h) for cuda:N tensors, over the library that
// nccl.cpp loads at run time. Which collectives come here is the group's
// decision, the same on every rank (Note [Choosing the engine],
// process_group.cpp).
//
// Note [NCCL]
// NCCL's communicator is made at the group's first CUDA collective from a
// unique id rank 0 broadcasts over MPI, nonblocking (ncclCommInitRankConfig,
// blocking = 0): the engine polls it with ncclCommGetAsyncError against the
// collective's deadline and past it aborts (ncclCommAbort) and raises
// DistTimeout, so a rank that never joins cannot hang the others in NCCL's
// init. Any call may then return ncclInProgress: every call is polled the
// same way. Every NCCL call is made by the group's worker thread, in issue
// order, on the device's own stream (Backend::native_stream), and its Work
// completes once enqueued: the result is queued ahead of later work. The
// watchdog covers the id's broadcast, the init and the enqueueing, not the
// kernels: a rank missing from an NCCL collective shows at the next sync.
#include <sched.h>

#include <string>

#include "core/backend.h"
#include "distributed/engine.h"
#include "distributed/nccl.h"

namespace anvil::dist::detail {

using anvil::detail::cat;

namespace {

int nccl_type(DType t) {
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

int nccl_op(ReduceOp op) {
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

class NcclEngine final : public Engine {
 public:
  NcclEngine(const NcclApi& api, WorldEngine& world) : nccl_(api), world_(world) {}

  const char* name() const noexcept override { return "nccl"; }
  Memory memory() const noexcept override { return Memory::Device; }
  bool any_thread() const noexcept override { return false; }  // Note [NCCL]

  void allreduce(Buffer buf, ReduceOp op, Watch& watch) override {
    void* stream = stream_for(watch);
    call(nccl_.all_reduce(buf.data, buf.data, buf.count, nccl_type(buf.dtype), nccl_op(op), comm_, stream),
         "ncclAllReduce", watch);
  }
  void broadcast(Buffer buf, int root, Watch& watch) override {
    void* stream = stream_for(watch);
    call(nccl_.broadcast(buf.data, buf.data, buf.count, nccl_type(buf.dtype), root, comm_, stream), "ncclBroadcast",
         watch);
  }
  void allgather(Buffer in, Buffer out, Watch& watch) override {
    void* stream = stream_for(watch);
    call(nccl_.all_gather(in.data, out.data, in.count, nccl_type(in.dtype), comm_, stream), "ncclAllGather", watch);
  }
  void reduce_scatter(Buffer in, Buffer out, ReduceOp op, Watch& watch) override {
    void* stream = stream_for(watch);
    call(nccl_.reduce_scatter(in.data, out.data, out.count, nccl_type(out.dtype), nccl_op(op), comm_, stream),
         "ncclReduceScatter", watch);
  }

  // Before MPI goes (Note [Leaving MPI], world.cpp).
  void close() noexcept override {
    if (comm_ != nullptr) nccl_.comm_destroy(comm_);
    comm_ = nullptr;
  }

 private:
  // The stream to enqueue on, the communicator made first when needed.
  void* stream_for(Watch& watch);
  // Checks what NCCL's `name` returned; on ncclInProgress waits, until the
  // deadline, for the communicator to be ready again.
  void call(int code, const char* name, Watch& watch);
  // Aborts the communicator (if any); later calls fail with `why`.
  void abort(const std::string& why) noexcept;

  const NcclApi& nccl_;
  WorldEngine& world_;
  NcclApi::Comm comm_ = nullptr;
  int device_ = -1;
  std::string failed_;  // why the communicator was aborted; "" while usable
};

void NcclEngine::abort(const std::string& why) noexcept {
  if (comm_ != nullptr) nccl_.comm_abort(comm_);
  comm_ = nullptr;
  failed_ = why;
}

void NcclEngine::call(int code, const char* name, Watch& watch) {
  if (code != NcclApi::kInProgress) {
    nccl_.check(code, name);
    return;
  }
  // A nonblocking communicator is busy until its state is ncclSuccess;
  // nothing else may be enqueued before. An error state leaves the
  // communicator unusable: it is aborted.
  for (unsigned spins = 1;; ++spins) {
    int state = NcclApi::kInProgress;
    const int query = nccl_.comm_get_async_error(comm_, &state);
    const int failure = query != 0 ? query : state != NcclApi::kInProgress ? state : 0;
    if (query == 0 && state == 0) return;
    if (failure != 0) {
      const char* what = query != 0 ? "ncclCommGetAsyncError" : name;
      abort(cat(what, " failed at ", watch.info().str(), ": ", nccl_.get_error_string(failure)));
      nccl_.check(failure, what);
    }
    if ((spins & 255) == 0 && watch.expired()) {
      abort(cat(name, " timed out at ", watch.info().str()));
      watch.timed_out(name);
    }
    sched_yield();
  }
}

void* NcclEngine::stream_for(Watch& watch) {
  const CollectiveInfo& info = watch.info();
  anvil::detail::Backend& backend = anvil::detail::backend_checked(info.device, detail::name(info.kind));
  ANVIL_CHECK(failed_.empty(), BackendError, "dist (nccl): ", info.str(),
              " not run: this group's NCCL communicator was aborted after an earlier error (", failed_, ")");
  if (comm_ == nullptr) {
    // Rank 0 sends its ncclGetUniqueId status with the id, so that every
    // rank fails alike when it failed.
    struct {
      NcclApi::UniqueId id;
      std::int32_t status;
    } unique{};
    if (world_.rank() == 0) unique.status = nccl_.get_unique_id(&unique.id);
    world_.broadcast(Buffer{&unique, sizeof unique, DType::U8}, 0, watch);
    if (unique.status != 0) {
      abort(cat("ncclGetUniqueId failed on rank 0: ", nccl_.get_error_string(unique.status)));
      throw BackendError(cat("dist (nccl): ", info.str(), ": ", failed_, " (ncclResult_t ", unique.status, ")"));
    }
    // native_stream also makes the device current, which NCCL's init needs.
    ANVIL_CHECK(backend.native_stream(info.device.index()) != nullptr, BackendError, detail::name(info.kind), ": ",
                info.device.str(), " has no stream for NCCL");
    NcclApi::Config config;
    config.blocking = 0;  // polled against the deadline (call)
    const int code = nccl_.comm_init_rank_config(&comm_, world_.size(), unique.id, world_.rank(), &config);
    device_ = info.device.index();
    if (code != NcclApi::kInProgress && code != 0) {
      comm_ = nullptr;  // failing at once, NCCL frees the communicator itself: nothing to abort
      abort(cat("ncclCommInitRankConfig failed at ", info.str(), ": ", nccl_.get_error_string(code)));
      nccl_.check(code, "ncclCommInitRankConfig");
    }
    call(code, "ncclCommInitRankConfig", watch);
  }
  ANVIL_CHECK(info.device.index() == device_, ValueError, detail::name(info.kind),
              ": this group's NCCL communicator is on cuda:", device_, "; expected tensors on it, got ",
              info.device.str(), "; each rank uses one GPU (anvil::dist::device())");
  void* stream = backend.native_stream(info.device.index());  // also makes the device current
  ANVIL_CHECK(stream != nullptr, BackendError, detail::name(info.kind), ": ", info.device.str(),
              " has no stream for NCCL");
  return stream;
}

}  // namespace

std::unique_ptr<Engine> make_nccl_engine(WorldEngine& world) {
  const NcclApi* api = load_nccl(nullptr);
  if (api == nullptr) return nullptr;
  return std::make_unique<NcclEngine>(*api, world);
}

}  // namespace anvil::dist::detail
