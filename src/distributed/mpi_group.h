// The Open MPI engine (DESIGN §8): a ProcessGroup over MPI_COMM_WORLD whose
// collectives run, in the order issued, on one background thread — the only
// thread that calls MPI (initialised MPI_THREAD_SERIALIZED).
#pragma once

#include <functional>
#include <memory>

#include "anvil/dist.h"

namespace anvil::dist::detail {

class Nccl;

// Starts the worker, which initialises MPI; throws BackendError when MPI
// cannot start. `expected_size` > 0: ValueError unless MPI sees that many ranks.
// `world_device` gives this rank's device (dist::device()); it is asked once,
// after MPI started and only when NCCL loads, for the ranks' agreement on
// NCCL (Note [NCCL] in mpi_group.cpp).
std::unique_ptr<ProcessGroup> make_mpi_group(int expected_size, std::function<Device()> world_device);

// Called at exit (see Note [Leaving MPI]): finishes queued collectives,
// finalises MPI within the timeout, or leaves with status 1 when the group
// timed out.
void shutdown_mpi_group(ProcessGroup& group) noexcept;

// Seconds before a collective times out: ANVIL_DIST_TIMEOUT, default 300.
double dist_timeout_seconds();
bool dist_debug();  // ANVIL_DIST_DEBUG=1

}  // namespace anvil::dist::detail
