// The group of a launched world (DESIGN §8): a ProcessGroup whose
// collectives run, in the order issued, over engines (engine.h): Open MPI,
// which formed the world, and NCCL for cuda:N tensors when every rank can
// use it. See process_group.cpp.
#pragma once

#include <functional>
#include <memory>

#include "anvil/dist.h"

namespace anvil::dist::detail {

// Starts the worker, which starts the world's engine (MPI); throws
// BackendError when it cannot start. `expected_size` > 0: ValueError unless
// the engine sees that many ranks. `world_device` gives this rank's device
// (dist::device()); it is asked once, after the engine started and only
// when NCCL loads, for the ranks' agreement on NCCL (Note [Choosing the
// engine] in process_group.cpp).
std::unique_ptr<ProcessGroup> make_process_group(int expected_size, std::function<Device()> world_device);

// Called at exit (see Note [Leaving MPI]): finishes queued collectives,
// closes the engines within the timeout, or leaves with status 1 when the
// group timed out.
void shutdown_process_group(ProcessGroup& group) noexcept;

// Seconds before a collective times out: ANVIL_DIST_TIMEOUT, default 300.
double dist_timeout_seconds();
bool dist_debug();  // ANVIL_DIST_DEBUG=1

}  // namespace anvil::dist::detail
