// benchmarks/worker_torch.cpp — times LibTorch for bench_compare (see worker.h).
//
//   bench_worker_torch              LibTorch's defaults (on this 2-core machine:
//                                   1 intra-op thread; its OpenBLAS keeps its own
//                                   pthread pool of 2)
//   bench_worker_torch --threads 2  at::set_num_threads(2) first
//
// Variants: `alloc` — what a user writes (`c = a + b`), a fresh result each
// iteration; `out` — the out= variants into preallocated tensors;
// `inference` — `alloc` under c10::InferenceMode (skips autograd bookkeeping).
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "worker.h"

namespace {

using anvil_bench::Body;
using anvil_bench::CaseId;
using anvil_bench::keep;

Body prepare(const CaseId& id, const std::string& variant) {
  const std::vector<std::int64_t> shape = id.shape;
  if (id.op == "matmul") {
    const auto a = torch::rand(shape);
    const auto b = torch::rand(shape);
    if (variant == "alloc")
      return [a, b](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) keep(torch::matmul(a, b));
      };
    if (variant == "out")
      return [a, b, c = torch::empty(shape)](std::int64_t n) mutable {
        for (std::int64_t i = 0; i < n; ++i) torch::mm_out(c, a, b);
        keep(c);
      };
  }
  if (id.op == "add") {
    const auto a = torch::rand(shape);
    const auto b = torch::rand(shape);
    if (variant == "alloc")
      return [a, b](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) keep(a + b);
      };
    if (variant == "inference")
      return [a, b](std::int64_t n) {
        c10::InferenceMode guard;
        for (std::int64_t i = 0; i < n; ++i) keep(a + b);
      };
    if (variant == "out")
      return [a, b, c = torch::empty(shape)](std::int64_t n) mutable {
        for (std::int64_t i = 0; i < n; ++i) torch::add_out(c, a, b);
        keep(c);
      };
  }
  if (id.op == "exp_mul") {
    const auto a = torch::rand(shape);
    const auto b = torch::rand(shape);
    if (variant == "alloc")
      return [a, b](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) keep(torch::exp(a) * b);
      };
    if (variant == "out")
      return [a, b, t = torch::empty(shape), c = torch::empty(shape)](std::int64_t n) mutable {
        for (std::int64_t i = 0; i < n; ++i) {
          torch::exp_out(t, a);
          torch::mul_out(c, t, b);
        }
        keep(c);
      };
  }
  if (id.op == "matmul_norm_item" && variant == "alloc") {
    const auto a = torch::randn(shape);
    const auto b = torch::randn(shape);
    const auto count = id.count;
    return [a, b, count](std::int64_t n) {
      float total = 0;
      for (std::int64_t i = 0; i < n * count; ++i) total += torch::matmul(a, b).norm().item<float>();
      keep(total);
    };
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  std::string how = "defaults";
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0) {
      at::set_num_threads(std::atoi(argv[i + 1]));
      how = std::string("set_num_threads(") + argv[i + 1] + ")";
    }
  }
  const std::string info = std::string("LibTorch ") + TORCH_VERSION +
                           ", intra-op threads=" + std::to_string(at::get_num_threads()) + " (" + how + ")";
  return anvil_bench::serve(info, prepare);
}
