// Allreduce bandwidth: anvil::dist against raw MPI_Allreduce on the same
// buffers, in one run, 4 KiB to 64 MiB of f32 on the CPU.
//
//   mpirun -np 2 --bind-to none allreduce_bench [--min-ms 100] [--samples 7]
//
// On a machine with fewer cores than ranks x 2 (each rank has its main thread
// and anvil's worker) add `--mca mpi_yield_when_idle 1`: raw MPI then waits
// the way anvil's worker does (it yields the core after a millisecond), and
// a spinning rank does not starve the other.
//
// For each size the two are timed alternately, sample by sample (a sample is
// as many calls as fill --min-ms), after a barrier, and the median sample of
// each is reported. Rank 0 prints one row per size: bytes, the time per call
// of MPI_Allreduce, of MPI_Iallreduce + MPI_Wait (the nonblocking collective
// anvil's worker drives, to tell MPI's algorithms from anvil's overhead) and
// of anvil, their algorithm bandwidth (bytes / time), and anvil's speed as a
// ratio of MPI_Allreduce's (its time / anvil's; 1.00 = as fast). The raw calls are made
// from the main thread while anvil's worker is idle, which
// MPI_THREAD_SERIALIZED allows (anvil initialised MPI).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../../examples/d2l_flags.h"
#include "anvil/anvil.h"
#include "anvil/dist.h"
#include "timing.h"

using anvil::bench::host_seconds;
using anvil::bench::median;

int main(int argc, char** argv) {
  double min_ms = 100;
  int samples = 7;
  try {
    d2l::Flags::plain("allreduce_bench").add("--min-ms", min_ms).add("--samples", samples).parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 2;
  }
  auto& world = anvil::dist::init();
  const int rank = world.rank();
  if (rank == 0)
    std::printf(
        "allreduce (sum, f32, cpu), %d ranks, engine %s, median of %d samples\n%10s %10s %10s %10s %9s %9s %9s %7s\n",
        world.size(), world.engine().c_str(), samples, "bytes", "mpi us", "mpi-nb us", "anvil us", "mpi GB/s",
        "nb GB/s", "anv GB/s", "ratio");
  for (std::int64_t bytes = 4096; bytes <= (64 << 20); bytes *= 4) {
    const std::int64_t n = bytes / 4;
    anvil::Tensor t = anvil::ones({n}, anvil::cpu());
    float* p = t.data_ptr<float>();
    // Calls per sample: enough to fill min_ms, agreed on by every rank.
    const double both = host_seconds([&] {
      MPI_Allreduce(MPI_IN_PLACE, p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      world.allreduce(t).wait();
    });
    double one = both / 2;
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const int calls = std::max(1, static_cast<int>(min_ms / 1e3 / one));
    // Seconds per call of `call`, timed over `calls` calls.
    auto per_call = [&](auto&& call) {
      const double seconds = host_seconds([&] {
        for (int c = 0; c < calls; ++c) call();
      });
      return seconds / calls;
    };
    std::vector<double> raw, nb, ours;
    for (int s = 0; s < samples; ++s) {
      MPI_Barrier(MPI_COMM_WORLD);
      raw.push_back(
          per_call([&] { MPI_Allreduce(MPI_IN_PLACE, p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }));
      MPI_Barrier(MPI_COMM_WORLD);
      nb.push_back(per_call([&] {
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, p, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
      }));
      MPI_Barrier(MPI_COMM_WORLD);
      ours.push_back(per_call([&] { world.allreduce(t).wait(); }));
    }
    const double r = median(raw), b = median(nb), o = median(ours);
    if (rank == 0)
      std::printf("%10lld %10.1f %10.1f %10.1f %9.2f %9.2f %9.2f %7.2f\n", static_cast<long long>(bytes), r * 1e6,
                  b * 1e6, o * 1e6, bytes / r / 1e9, bytes / b / 1e9, bytes / o / 1e9, r / o);
  }
  return 0;
}
