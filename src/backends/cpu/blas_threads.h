// OpenBLAS's global thread count, set around each call (threads.h).
#pragma once

#include <cstdint>

namespace anvil::cpu_backend {

// Holds OpenBLAS at `threads` threads (at most omp_get_max_threads()) for
// its lifetime: anvil's BLAS calls at the same count run concurrently, and a
// call that needs another count waits for them and changes it. Inside a
// parallel region it does nothing (OpenBLAS then runs on the calling thread).
class BlasThreads {
 public:
  explicit BlasThreads(int threads);
  ~BlasThreads();
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;
  int threads() const noexcept { return threads_; }  // the count held (1 inside a parallel region)

 private:
  enum class Held { Nothing, Shared, Exclusive };
  Held held_ = Held::Nothing;
  int bound_ = 1;  // this thread's OpenMP thread count, restored at the end
  int threads_ = 1;
};

// OpenBLAS's thread count as its next call would see it (for tests).
int blas_threads() noexcept;

// set_thread_bound's part: OpenBLAS's count set to the new bound, once no
// call runs.
void set_blas_bound(int threads);

}  // namespace anvil::cpu_backend
