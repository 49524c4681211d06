// The engines of a launched group (DESIGN §8): an engine makes the raw
// collective calls on contiguous buffers it is given, and nothing else.
// Everything else in a collective's life is the group's, written once in
// process_group.cpp: validation, the sequence number, the fingerprint check,
// the deadline and the watchdog, the arrival announcement, staging through
// host buffers, the ledger's record and the Work. What a new engine writes:
// docs/distributed-training.md, "Adding an engine".
//
// Two kinds:
// - a data engine (`Engine`) moves tensors' data: NCCL for cuda:N tensors
//   (nccl_engine.cpp);
// - the world's engine (`WorldEngine`) formed the world when the process
//   started and also carries what every collective needs besides its data:
//   the ranks, the arrival announcements, the fingerprint exchange, the
//   ranks' agreement at start, the barrier. Open MPI (mpi_engine.cpp) is
//   the one world engine, and the data engine for every tensor that no other
//   engine takes.
//
// Every call is made by one thread at a time, in the order the collectives
// were issued (the group orders them); a call returns when its collective is
// done on this rank, or, for an engine on a device's stream, enqueued there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/collective.h"

namespace anvil::dist::detail {

// Contiguous memory that a raw call reads or writes: `count` elements of
// `dtype` (f32, f64, i32, i64, u8 or bool), on the host for an engine whose
// memory() is Host, else on the collective's device.
struct Buffer {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::U8;
};

// The collective that a raw call is part of, and its watchdog. An engine
// whose call does not complete at once tests it in a loop and asks, between
// tests, whether to go on.
class Watch {
 public:
  virtual const CollectiveInfo& info() const = 0;
  // Whether every other rank has announced this collective (Note [Who did
  // not arrive], process_group.cpp): until then nothing can move.
  virtual bool peers_arrived() = 0;
  // Whether the collective's deadline (ANVIL_DIST_TIMEOUT) has passed.
  virtual bool expired() = 0;
  // Throws DistTimeout naming the collective and the ranks that did not
  // arrive; `waiting_for` names the call the engine waited in when it is
  // not the collective's own (an init, say).
  [[noreturn]] virtual void timed_out(const char* waiting_for = nullptr) = 0;

 protected:
  ~Watch() = default;
};

class Engine {
 public:
  enum class Memory : std::uint8_t { Host, Device };

  virtual ~Engine() = default;
  // "mpi", "nccl": what ProcessGroup::engine_for() says.
  virtual const char* name() const noexcept = 0;
  // Where its buffers are. Host: the group stages other devices' tensors
  // through host buffers (Note [Staging]); Device: on the tensors' device,
  // made contiguous there.
  virtual Memory memory() const noexcept = 0;
  // Whether its calls may come from any thread (one at a time): then a
  // thread waiting for a collective that nobody has started runs it itself
  // (Note [The waiter runs its collective]). False: only from the group's
  // worker thread, where the engine was set up.
  virtual bool any_thread() const noexcept = 0;

  // In place: every rank's `buf` = op over every rank's. Avg is the sum
  // divided by the group's size (integers truncate towards zero).
  virtual void allreduce(Buffer buf, ReduceOp op, Watch& watch) = 0;
  // In place: every rank's `buf` = root's.
  virtual void broadcast(Buffer buf, int root, Watch& watch) = 0;
  // `out` holds size() blocks of in.count elements: rank r's `in` at block r.
  virtual void allgather(Buffer in, Buffer out, Watch& watch) = 0;
  // `in` holds size() blocks of out.count elements: out = op over every
  // rank's block rank() (Avg as for allreduce).
  virtual void reduce_scatter(Buffer in, Buffer out, ReduceOp op, Watch& watch) = 0;

  // Leaves cleanly, on the worker thread when the group shuts down (data
  // engines first, the world's last). Not called once a failure broke the
  // group: a peer may be gone, and leaving would wait for it.
  virtual void close() noexcept = 0;
};

class WorldEngine : public Engine {
 public:
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual int node_size() const noexcept = 0;  // the ranks on this machine

  // Note [Who did not arrive]: tells every other rank that this one has
  // reached collective #seq, on a channel of its own.
  virtual void announce(std::uint64_t seq) = 0;
  // The highest sequence number announced by each rank (this one's own
  // included), after taking in what has come.
  virtual const std::vector<std::uint64_t>& heard() = 0;
  // Every rank's `bytes` at `mine` into `all` (rank r's at r * bytes), on a
  // channel apart from the collectives' data: the fingerprint check.
  virtual void exchange(const void* mine, std::size_t bytes, void* all, Watch& watch) = 0;
  // Whether every rank says yes, while the group starts (a DistTimeout
  // after `timeout_s`); `what` names the question in errors.
  virtual bool all_agree(bool mine, const char* what, double timeout_s) = 0;
  virtual void barrier(Watch& watch) = 0;
};

// Open MPI (mpi_engine.cpp), initialised on the calling thread, which makes
// every later call. `expected_size` > 0: ValueError unless MPI sees that
// many ranks. Throws BackendError when MPI cannot start.
std::unique_ptr<WorldEngine> start_mpi_engine(int expected_size);

// NCCL (nccl_engine.cpp) for cuda:N tensors, or null when libnccl does not
// load here: its communicator is made at the first call, bootstrapped over
// `world` (Note [NCCL]).
std::unique_ptr<Engine> make_nccl_engine(WorldEngine& world);

}  // namespace anvil::dist::detail
