// dist::init() and the world group (DESIGN §8 "Launch").
//
// Note [Leaving MPI]
// The world group is created once and never destroyed by a static
// destructor (its worker thread and MPI must outlive every other static
// that may still issue a collective). An atexit handler, registered right
// after MPI started, drains the queue and calls MPI_Finalize on the worker
// thread, bounded by the timeout; a group broken by a timeout skips
// MPI_Finalize (it would wait for the rank that is gone) and leaves with
// status 1. A process that ends without exit() (abort, a signal) leaves it
// to mpirun to end the job.
#include <cstdlib>
#include <mutex>
#include <string>

#include "distributed/collective.h"
#include "distributed/process_group.h"
#include "distributed/single_group.h"

namespace anvil::dist {

namespace {

struct World {
  std::once_flag once;
  ProcessGroup* group = nullptr;  // leaked on purpose: Note [Leaving MPI]
  bool is_mpi = false;
  int local_rank = 0;
};

World& the_world() {
  static World* w = new World();  // never destroyed: Note [Leaving MPI]
  return *w;
}

// The integer in `name`, or `fallback` when it is not set.
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  ANVIL_CHECK(end != v && *end == '\0' && n >= 0 && n < (1L << 30), ValueError, "dist::init: ", name,
              " must be a non-negative integer; expected e.g. 0, got \"", v, "\"");
  return static_cast<int>(n);
}

void leave_mpi() { detail::shutdown_process_group(*the_world().group); }

// dist::device() for a process of local rank `local`.
Device device_of(int local) {
  const char* spec = std::getenv("ANVIL_DIST_DEVICE");
  if (spec != nullptr && *spec != '\0') return Device(spec);
  return try_gpu(local);
}

}  // namespace

ProcessGroup& init() {
  World& w = the_world();
  std::call_once(w.once, [&] {
    const int ompi_size = env_int("OMPI_COMM_WORLD_SIZE", 0);
    const int world_size = env_int("WORLD_SIZE", 0);
    w.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("LOCAL_RANK", 0));
    if (ompi_size > 0 || world_size > 1) {
      // Launched by mpirun (or a launcher that MPI understands and that sets
      // RANK/WORLD_SIZE): MPI forms the world and must agree on its size.
      const int local = w.local_rank;
      auto g = detail::make_process_group(ompi_size > 0 ? ompi_size : world_size, [local] { return device_of(local); });
      w.group = g.release();
      w.is_mpi = true;
      std::atexit(leave_mpi);
    } else {
      w.group = detail::make_single_group().release();
    }
  });
  ANVIL_CHECK(w.group != nullptr, ValueError, "dist::init: an earlier init() failed; see its error");
  return *w.group;
}

bool is_initialized() noexcept { return the_world().group != nullptr; }

ProcessGroup& world() {
  ANVIL_CHECK(is_initialized(), ValueError,
              "dist::world: the world group does not exist yet; expected a call to anvil::dist::init() first");
  return *the_world().group;
}

int rank() { return world().rank(); }
int world_size() { return world().size(); }
int local_rank() {
  world();
  return the_world().local_rank;
}

Device device() { return device_of(local_rank()); }

}  // namespace anvil::dist
