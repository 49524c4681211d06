// benchmarks/worker_anvil.cpp — times anvil for bench_compare (see worker.h).
//
// anvil runs in its default configuration: no set_num_threads call, no
// environment variable, so the figures are what a user gets; with
// `--threads N` it calls anvil::set_num_threads(N) first (the equal-threads
// rows).
//
// Variants: `alloc` — the allocating API a user writes (`c = a + b`), the
// result dropped each iteration so the allocator's reuse is part of the cost;
// `out` — the same op into a preallocated tensor (`add_out`, `mm_out`).
#include <anvil/anvil.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "worker.h"

namespace {

using anvil_bench::Body;
using anvil_bench::CaseId;
using anvil_bench::keep;

// The case's dtype; f16 and bf16 inputs are f32 uniforms rounded once.
anvil::DType dtype_of(const CaseId& id) {
  for (anvil::DType t : {anvil::f32, anvil::f16, anvil::bf16})
    if (anvil::to_string(t) == id.dtype) return t;
  throw anvil::ValueError("bench_worker_anvil: unknown dtype '" + id.dtype + "'; expected f32, f16 or bf16");
}

Body prepare(const CaseId& id, const std::string& variant) {
  const anvil::Shape shape(id.shape);
  const anvil::DType dtype = dtype_of(id);
  if (id.op == "matmul") {
    const auto a = anvil::rand(shape).to(dtype);
    const auto b = anvil::rand(shape).to(dtype);
    if (variant == "alloc")
      return [a, b](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) keep(anvil::matmul(a, b));
      };
    if (variant == "out")
      return [a, b, c = anvil::empty(shape, anvil::cpu(), dtype)](std::int64_t n) mutable {
        for (std::int64_t i = 0; i < n; ++i) anvil::mm_out(c, a, b);
        keep(c);
      };
  }
  if (id.op == "add") {
    const auto a = anvil::rand(shape).to(dtype);
    const auto b = anvil::rand(shape).to(dtype);
    if (variant == "alloc")
      return [a, b](std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) keep(a + b);
      };
    if (variant == "out")
      return [a, b, c = anvil::empty(shape, anvil::cpu(), dtype)](std::int64_t n) mutable {
        for (std::int64_t i = 0; i < n; ++i) anvil::add_out(c, a, b);
        keep(c);
      };
  }
  if (id.op == "exp_mul" && variant == "alloc") {
    const auto a = anvil::rand(shape).to(dtype);
    const auto b = anvil::rand(shape).to(dtype);
    return [a, b](std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) keep(anvil::exp(a) * b);
    };
  }
  if (id.op == "exp_mul" && variant == "fused") {  // one pass: exp(a) is never stored
    const auto a = anvil::rand(shape).to(dtype);
    const auto b = anvil::rand(shape).to(dtype);
    return [a, b](std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) keep(anvil::lazy(a).exp() * b);
    };
  }
  // The chapter's exercise: products of small matrices, each norm read back
  // to the host as it is produced.
  if (id.op == "matmul_norm_item" && variant == "alloc") {
    const auto a = anvil::randn(shape);
    const auto b = anvil::randn(shape);
    const auto count = id.count;
    return [a, b, count](std::int64_t n) {
      float total = 0;
      for (std::int64_t i = 0; i < n * count; ++i) total += anvil::matmul(a, b).norm().item<float>();
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
      anvil::set_num_threads(std::atoi(argv[i + 1]));
      how = std::string("set_num_threads(") + argv[i + 1] + ")";
    }
  }
  const std::string info =
      std::string("anvil ") + anvil::kVersion + ", threads=" + std::to_string(anvil::num_threads()) + " (" + how + ")";
  return anvil_bench::serve(info, prepare);
}
