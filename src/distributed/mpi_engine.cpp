// The Open MPI engine (engine.h): the world's engine, and the data engine for
// every tensor that NCCL does not take (host memory; the group stages device
// tensors). Its calls use MPI's nonblocking collectives (MPI_Iallreduce, …)
// and drive them with MPI_Test, which lets it notice the deadline; Open MPI's
// blocking calls spin in the same progress loop, so nothing is lost in speed.
// MPI is initialised MPI_THREAD_SERIALIZED: the group makes sure one thread at
// a time calls it (Note [One engine thread], process_group.cpp).
//
// Note [Ring for two ranks]
// Open MPI's nonblocking allreduce (coll/libnbc) reduces to one rank and
// broadcasts back ("binomial") when there are fewer than four ranks, which on
// two ranks moved 1-64 MiB at 0.2-0.6x the speed of the blocking
// MPI_Allreduce (coll/tuned) here; its ring (a reduce-scatter then an
// allgather, the same two steps on two ranks) ran at 0.9-1.05x. So for worlds
// of two or three ranks the engine asks for the ring, unless the user chose an
// algorithm (OMPI_MCA_coll_libnbc_iallreduce_algorithm). From four ranks on,
// libnbc picks the ring for large messages by itself.
//
// Note [Waiting for a late rank]
// Until every rank has announced the collective (Note [Who did not arrive])
// there is nothing for MPI to move, and a spinning worker only takes CPU from
// its own rank's threads and, on a loaded machine, from the late rank.
// sched_yield() alone does not give the core away when nothing else is queued
// on it (a rank that waited 0.6 s for a late peer used 0.31 s of CPU). So
// after kSpinBeforeNap of waiting the worker naps kNap between tests while a
// peer is missing (a late rank costs at most about one nap of latency), and
// spins again once every rank is in, since then each test moves data. On the
// 2-rank MLP of bench_ddp_anvil at load 7 on 2 cores the epoch went from
// 3.95-4.15 s to 3.83-4.00 s; on an idle machine no change beyond noise.

// The C API only: mpi.h would otherwise pull in the C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <thread>

#include "distributed/engine.h"

namespace anvil::dist::detail {

using anvil::detail::cat;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kArriveTag = 1;
constexpr auto kSpinBeforeNap = std::chrono::milliseconds(1);
constexpr auto kNap = std::chrono::microseconds(50);

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

int count_of(const Buffer& b) { return static_cast<int>(b.count); }  // the group checked it fits

class MpiEngine final : public WorldEngine {
 public:
  explicit MpiEngine(int expected_size);

  const char* name() const noexcept override { return "mpi"; }
  Memory memory() const noexcept override { return Memory::Host; }
  bool any_thread() const noexcept override { return true; }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int node_size() const noexcept override { return node_size_; }

  void allreduce(Buffer buf, ReduceOp op, Watch& watch) override;
  void broadcast(Buffer buf, int root, Watch& watch) override;
  void allgather(Buffer in, Buffer out, Watch& watch) override;
  void reduce_scatter(Buffer in, Buffer out, ReduceOp op, Watch& watch) override;
  void barrier(Watch& watch) override;

  void announce(std::uint64_t seq) override;
  const std::vector<std::uint64_t>& heard() override;
  void exchange(const void* mine, std::size_t bytes, void* all, Watch& watch) override;
  bool all_agree(bool mine, const char* what, double timeout_s) override;
  void close() noexcept override;

 private:
  // Tests `req` until it completes, napping while a peer has not arrived
  // (Note [Waiting for a late rank]) and ending at the deadline.
  void progress(MPI_Request& req, Watch& watch);
  void check(int code, Watch& watch, const char* call);

  int rank_ = 0, size_ = 1, node_size_ = 1;
  // The collectives' data, the arrival announcements and the fingerprint
  // exchange each have a communicator, so that they never match each other.
  MPI_Comm comm_ = MPI_COMM_NULL, arrive_comm_ = MPI_COMM_NULL, debug_comm_ = MPI_COMM_NULL;
  std::vector<std::uint64_t> heard_;  // highest sequence number each rank announced
  std::vector<std::uint64_t> arrive_buf_;
  std::vector<MPI_Request> arrive_req_;
  std::deque<std::pair<std::unique_ptr<std::uint64_t>, MPI_Request>> sends_;
};

MpiEngine::MpiEngine(int expected_size) {
  // Note [Ring for two ranks]; setenv before MPI reads its parameters.
  if (expected_size >= 2 && expected_size <= 3)
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
  int provided = 0;
  int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  ANVIL_CHECK(code == MPI_SUCCESS, BackendError, "dist::init: MPI_Init_thread failed: ", mpi_error_string(code));
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
  ANVIL_CHECK(expected_size <= 0 || expected_size == size_, ValueError,
              "dist::init: the launcher's world size and MPI's disagree; expected ", expected_size,
              " processes (WORLD_SIZE), got ", size_,
              " from MPI; launch with mpirun -np N (or a launcher Open MPI understands)");
  heard_.assign(static_cast<std::size_t>(size_), 0);
  arrive_buf_.assign(static_cast<std::size_t>(size_), 0);
  arrive_req_.assign(static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) MPI_Irecv(&arrive_buf_[r], 1, MPI_UINT64_T, r, kArriveTag, arrive_comm_, &arrive_req_[r]);
}

void MpiEngine::close() noexcept {
  for (int r = 0; r < size_; ++r)
    if (arrive_req_[r] != MPI_REQUEST_NULL) {
      MPI_Cancel(&arrive_req_[r]);
      MPI_Wait(&arrive_req_[r], MPI_STATUS_IGNORE);
    }
  for (auto& s : sends_) MPI_Wait(&s.second, MPI_STATUS_IGNORE);
  sends_.clear();
  MPI_Comm_free(&comm_);
  MPI_Comm_free(&arrive_comm_);
  MPI_Comm_free(&debug_comm_);
  MPI_Finalize();
}

// ---- the control channel -------------------------------------------------------------

void MpiEngine::announce(std::uint64_t seq) {
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

const std::vector<std::uint64_t>& MpiEngine::heard() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    for (;;) {
      int flag = 0;
      if (MPI_Test(&arrive_req_[r], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) break;
      heard_[r] = std::max(heard_[r], arrive_buf_[r]);
      MPI_Irecv(&arrive_buf_[r], 1, MPI_UINT64_T, r, kArriveTag, arrive_comm_, &arrive_req_[r]);
    }
  }
  return heard_;
}

void MpiEngine::exchange(const void* mine, std::size_t bytes, void* all, Watch& watch) {
  MPI_Request req = MPI_REQUEST_NULL;
  const int n = static_cast<int>(bytes);
  check(MPI_Iallgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, debug_comm_, &req), watch, "MPI_Iallgather");
  progress(req, watch);
}

bool MpiEngine::all_agree(bool mine, const char* what, double timeout_s) {
  int yes = mine ? 1 : 0, all = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  int code = MPI_Iallreduce(&yes, &all, 1, MPI_INT, MPI_MIN, comm_, &req);
  ANVIL_CHECK(code == MPI_SUCCESS, BackendError, "dist::init: MPI_Iallreduce (", what,
              ") failed: ", mpi_error_string(code));
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (int flag = 0; !flag;) {
    code = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    ANVIL_CHECK(code == MPI_SUCCESS, BackendError, "dist::init: MPI_Test (", what,
                ") failed: ", mpi_error_string(code));
    if (!flag && Clock::now() > deadline)
      throw DistTimeout(cat("dist::init: ", what, " did not complete within ", timeout_s,
                            " s (ANVIL_DIST_TIMEOUT) on rank ", rank_, " of ", size_,
                            "; a rank died or hung while starting"));
    if (!flag) sched_yield();
  }
  return all == 1;
}

// ---- waiting ---------------------------------------------------------------------------

void MpiEngine::check(int code, Watch& watch, const char* call) {
  if (code == MPI_SUCCESS) return;
  // With MPI_ERRORS_RETURN a lost peer (TCP) shows up here; it is the same
  // failure as a timeout, and MPI cannot recover from it either.
  heard();
  throw DistTimeout(cat("dist: ", watch.info().str(), " failed on rank ", rank_, ": ", call, ": ",
                        mpi_error_string(code),
                        " (a rank died?); the group is unusable and this process exits with status 1"));
}

void MpiEngine::progress(MPI_Request& req, Watch& watch) {
  const auto start = Clock::now();
  bool idle = false, all_in = false;
  for (unsigned spins = 1;; ++spins) {
    int flag = 0;
    check(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), watch, "MPI_Test");
    if (flag) return;
    // The clock only every 16th test: reading it each time was 7% of a
    // small allreduce's time.
    const bool napping =
        !all_in && (spins & 15) == 0 && Clock::now() - start > kSpinBeforeNap && !(all_in = watch.peers_arrived());
    if (napping) {
      if (watch.expired()) watch.timed_out();
      std::this_thread::sleep_for(kNap);
      continue;
    }
    if ((spins & 255) == 0) {
      if (watch.expired()) watch.timed_out();
      idle = Clock::now() - start > std::chrono::milliseconds(1);
    }
    if (idle) sched_yield();
  }
}

// ---- the collectives -----------------------------------------------------------------

void MpiEngine::allreduce(Buffer buf, ReduceOp op, Watch& watch) {
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(MPI_IN_PLACE, buf.data, count_of(buf), mpi_type(buf.dtype), mpi_op(op), comm_, &req), watch,
        "MPI_Iallreduce");
  progress(req, watch);
  if (op == ReduceOp::Avg) divide_host(buf.data, buf.count, buf.dtype, size_);
}

void MpiEngine::broadcast(Buffer buf, int root, Watch& watch) {
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibcast(buf.data, count_of(buf), mpi_type(buf.dtype), root, comm_, &req), watch, "MPI_Ibcast");
  progress(req, watch);
}

void MpiEngine::allgather(Buffer in, Buffer out, Watch& watch) {
  MPI_Request req = MPI_REQUEST_NULL;
  const MPI_Datatype type = mpi_type(in.dtype);
  check(MPI_Iallgather(in.data, count_of(in), type, out.data, count_of(in), type, comm_, &req), watch,
        "MPI_Iallgather");
  progress(req, watch);
}

void MpiEngine::reduce_scatter(Buffer in, Buffer out, ReduceOp op, Watch& watch) {
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ireduce_scatter_block(in.data, out.data, count_of(out), mpi_type(out.dtype), mpi_op(op), comm_, &req),
        watch, "MPI_Ireduce_scatter_block");
  progress(req, watch);
  if (op == ReduceOp::Avg) divide_host(out.data, out.count, out.dtype, size_);
}

void MpiEngine::barrier(Watch& watch) {
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm_, &req), watch, "MPI_Ibarrier");
  progress(req, watch);
}

}  // namespace

std::unique_ptr<WorldEngine> start_mpi_engine(int expected_size) { return std::make_unique<MpiEngine>(expected_size); }

}  // namespace anvil::dist::detail
