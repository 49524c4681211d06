// A process that ends right after waiting for collectives that the MPI
// worker ran must exit cleanly, under `mpirun -np 2` (tests/CMakeLists.txt).
// Its tensors are made after dist::init(), so the CPU allocator is made after
// the world's atexit handler and is destroyed before it: the worker must have
// let go of a collective's tensors before its wait() returns (it once freed
// them a moment later, into a destroyed allocator, and the process crashed
// at exit about half the time).
#include "anvil/anvil.h"
#include "anvil/dist.h"

int main() {
  using namespace anvil;
  auto& w = dist::init();
  Tensor a = ones({1024}, cpu()), b = ones({1024}, cpu());
  // The second waits behind the first, so the worker runs both (a waiter
  // runs only a collective that is first in the queue); the process then
  // ends while the worker is finishing.
  dist::Work first = w.allreduce(a);
  dist::Work second = w.allreduce(b);
  second.wait();
  first.wait();
  return a.sum().item<double>() == b.sum().item<double>() ? 0 : 3;
}
