// benchmarks/worker_openblas.cpp — the baselines without a tensor library:
// OpenBLAS's cblas_sgemm called directly, and a STREAM-style triad for the
// machine's memory bandwidth (see worker.h for the protocol).
//
// This links the same OpenBLAS build as anvil (OpenMP), in its defaults: one
// thread per core. It does not link anvil, so nothing anvil does at start-up
// or between calls can change OpenBLAS's configuration here.
#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <string>

#include "worker.h"

namespace {

using anvil_bench::Body;
using anvil_bench::CaseId;
using anvil_bench::keep;

struct FreeDeleter {
  void operator()(float* p) const noexcept { std::free(p); }
};
using Buffer = std::shared_ptr<float>;

// 64-byte aligned, first touched by the threads that will use each part (as
// STREAM does), filled with values in [0, 1).
Buffer make_buffer(std::int64_t n, unsigned seed) {
  const auto bytes = static_cast<std::size_t>((n * 4 + 63) / 64 * 64);
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) throw std::bad_alloc();
#pragma omp parallel
  {
    std::minstd_rand rng(seed + static_cast<unsigned>(omp_get_thread_num()));
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) p[i] = u(rng);
  }
  return Buffer(p, FreeDeleter{});
}

Body prepare(const CaseId& id, const std::string& variant) {
  if (id.op == "matmul" && variant == "sgemm" && id.shape.size() == 2) {
    const auto m = static_cast<int>(id.shape[0]);
    const auto k = static_cast<int>(id.shape[1]);
    auto a = make_buffer(std::int64_t{m} * k, 1);
    auto b = make_buffer(std::int64_t{k} * k, 2);
    auto c = make_buffer(std::int64_t{m} * k, 3);
    return [a, b, c, m, k](std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, k, 1.0f, a.get(), k, b.get(), k, 0.0f, c.get(), k);
      keep(c.get()[0]);
    };
  }
  // STREAM triad, a[i] = b[i] + s * c[i], preallocated: what the memory
  // system gives a simple parallel loop. 3 arrays cross the bus per pass.
  if (id.op == "stream_triad" && variant == "triad") {
    const auto size = id.numel();
    auto a = make_buffer(size, 4);
    auto b = make_buffer(size, 5);
    auto c = make_buffer(size, 6);
    return [a, b, c, size](std::int64_t n) {
      float* __restrict pa = a.get();
      const float* __restrict pb = b.get();
      const float* __restrict pc = c.get();
      const float s = 3.0f;
      for (std::int64_t r = 0; r < n; ++r) {
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < size; ++i) pa[i] = pb[i] + s * pc[i];
      }
      keep(pa[0]);
    };
  }
  return {};
}

}  // namespace

int main() {
  std::string config = openblas_get_config();
  while (!config.empty() && config.back() == ' ') config.pop_back();
  const std::string info = config + ", threads=" + std::to_string(openblas_get_num_threads()) +
                           "; triad: OpenMP threads=" + std::to_string(omp_get_max_threads());
  return anvil_bench::serve(info, prepare);
}
