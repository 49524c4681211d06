// benchmarks/worker_torch.cpp — times LibTorch for bench_compare (see worker.h).
//
//   bench_worker_torch              LibTorch's defaults (on this 2-core machine:
//                                   1 intra-op thread; its OpenBLAS keeps its own
//                                   pthread pool of 2)
//   bench_worker_torch --threads 2  at::set_num_threads(2) first
//   bench_worker_torch --threads 1 --blas-threads 1
//                                   also its OpenBLAS held to 1 thread (the
//                                   equal-threads rows: every library on one)
//
// Variants: `alloc` — what a user writes (`c = a + b`), a fresh result each
// iteration; `out` — the out= variants into preallocated tensors;
// `inference` — `alloc` under c10::InferenceMode (skips autograd bookkeeping).
#include <dlfcn.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "worker.h"

namespace {

using anvil_bench::Body;
using anvil_bench::CaseId;
using anvil_bench::keep;

// The case's dtype; f16 and bf16 inputs are f32 uniforms rounded once (as
// in anvil's worker, and because 1.13's CPU rand has no f16).
torch::Dtype dtype_of(const CaseId& id) {
  if (id.dtype == "f32") return torch::kFloat32;
  if (id.dtype == "f16") return torch::kFloat16;
  if (id.dtype == "bf16") return torch::kBFloat16;
  throw std::invalid_argument("bench_worker_torch: unknown dtype '" + id.dtype + "'; expected f32, f16 or bf16");
}

Body prepare_case(const CaseId& id, const std::string& variant) {
  const std::vector<std::int64_t> shape = id.shape;
  const auto dtype = dtype_of(id);
  if (id.op == "matmul") {
    const auto a = torch::rand(shape).to(dtype);
    const auto b = torch::rand(shape).to(dtype);
    if (variant == "alloc")
      return [a, b](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) keep(torch::matmul(a, b));
      };
    if (variant == "out")
      return [a, b, c = torch::empty(shape, dtype)](std::int64_t n) mutable {
        for (std::int64_t i = 0; i < n; ++i) torch::mm_out(c, a, b);
        keep(c);
      };
  }
  if (id.op == "add") {
    const auto a = torch::rand(shape).to(dtype);
    const auto b = torch::rand(shape).to(dtype);
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
      return [a, b, c = torch::empty(shape, dtype)](std::int64_t n) mutable {
        for (std::int64_t i = 0; i < n; ++i) torch::add_out(c, a, b);
        keep(c);
      };
  }
  if (id.op == "exp_mul") {
    const auto a = torch::rand(shape).to(dtype);
    const auto b = torch::rand(shape).to(dtype);
    if (variant == "alloc")
      return [a, b](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) keep(torch::exp(a) * b);
      };
    if (variant == "out")
      return [a, b, t = torch::empty(shape, dtype), c = torch::empty(shape, dtype)](std::int64_t n) mutable {
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

// LibTorch's own error for what it does not do (1.13 has no f16 matmul on
// the CPU), without the C++ backtrace c10::Error::what() appends, so the
// table can show it on one line.
Body prepare(const CaseId& id, const std::string& variant) {
  try {
    Body body = prepare_case(id, variant);
    if (!body) return body;
    return [body](std::int64_t n) {
      try {
        body(n);
      } catch (const c10::Error& e) {
        throw std::runtime_error(e.what_without_backtrace());
      }
    };
  } catch (const c10::Error& e) {
    throw std::runtime_error(e.what_without_backtrace());
  }
}

// LibTorch's OpenBLAS (the pthread build) is not linked here directly; its
// thread count is set through the symbol the loaded library exports.
std::string set_blas_threads(int n) {
  using SetThreads = void (*)(int);
  auto* set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return ", BLAS threads unchanged (no openblas_set_num_threads)";
  set(n);
  return ", BLAS threads=" + std::to_string(n);
}

}  // namespace

int main(int argc, char** argv) {
  std::string how = "defaults";
  std::string blas;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0) {
      at::set_num_threads(std::atoi(argv[i + 1]));
      how = std::string("set_num_threads(") + argv[i + 1] + ")";
    }
    if (std::strcmp(argv[i], "--blas-threads") == 0) blas = set_blas_threads(std::atoi(argv[i + 1]));
  }
  const std::string info = std::string("LibTorch ") + TORCH_VERSION +
                           ", intra-op threads=" + std::to_string(at::get_num_threads()) + " (" + how + ")" + blas;
  return anvil_bench::serve(info, prepare);
}
