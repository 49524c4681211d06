// anvil's own CPU kernels built once per instruction set, and the one
// running build, chosen at start. See Note [One kernel source, a build per
// instruction set].
//
//   kernels().unary(op, params, args);  // through the running build
//   ANVIL_CPU_ISA=avx2 ./prog           // asks for one; anvil::cpu_kernel_isa() says which runs
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"

// The namespace this translation unit's kernels and the kernel headers'
// inline code live in: isa_default for the library's own flags, isa_avx2
// and isa_avx512 for the builds CMake adds (ANVIL_CPU_ISAS).
#ifndef ANVIL_CPU_ISA
#define ANVIL_CPU_ISA isa_default
#endif

// Note [One kernel source, a build per instruction set]
// The kernel sources (ANVIL_CPU_KERNEL_SOURCES, cmake/CpuKernels.cmake)
// compile with the library's flags ("default") and, in a portable build,
// again per ANVIL_CPU_ISAS entry (avx2: -march=x86-64-v3, avx512: x86-64-v4);
// kernels() runs the highest the CPU has, or ANVIL_CPU_ISA's. The trap is the
// ODR: an inline function compiled for AVX-512, merged by the linker with its
// AVX2 twin, runs on a CPU without AVX-512. So the kernel sources and their
// headers (parallel.h, loops.h, dtype_switch.h, scalar_ops.h) put all their code
// in `inline namespace ANVIL_CPU_ISA`: each build's symbols have their own
// names. What remains shared (libstdc++'s and core/half.h's inline code) the
// linker takes from the first object, the library's own: the builds link
// last, lowest first. test_cpu_isa_symbols checks the result: no AVX-512
// instruction outside isa_avx512 (and libxsmm, which dispatches itself).

namespace anvil::cpu_backend {

// One build of the kernels: the CpuBackend methods of the same names call
// through the running one.
struct KernelTable {
  const char* name;  // "default", "avx2", "avx512"
  // Compiled with FMA: a*b+c may round once. Builds that differ in it may
  // differ in such an op's last bit; builds that agree give the same bits.
  bool fma;
  void (*copy)(const detail::ElementwiseArgs&);
  void (*unary)(detail::UnaryOp, const detail::UnaryParams&, const detail::ElementwiseArgs&);
  void (*binary)(detail::BinaryOp, const detail::ElementwiseArgs&);
  void (*where)(const detail::ElementwiseArgs&);
  void (*unary_binary)(detail::BinaryOp, const detail::BinaryPrologue&, const detail::ElementwiseArgs&);
  void (*reduce)(detail::ReduceOp, const detail::ReduceArgs&);
  void (*im2col)(const detail::Im2colArgs&);
  void (*col2im)(const detail::Im2colArgs&);
  void (*max_pool2d)(const detail::Pool2dArgs&);
  void (*max_pool2d_backward)(const detail::Pool2dArgs&);
  void (*batch_norm)(const detail::BatchNormArgs&);
  void (*batch_norm_backward)(const detail::BatchNormArgs&);
  void (*softmax)(const detail::SoftmaxArgs&);
  void (*softmax_backward)(const detail::SoftmaxArgs&);
  void (*layer_norm)(const detail::LayerNormArgs&);
  void (*layer_norm_backward)(const detail::LayerNormArgs&);
  void (*optimizer_step)(const detail::OptimizerStepArgs&);
  void (*optimizer_step_list)(const detail::OptimizerStepListArgs&);
};

inline namespace ANVIL_CPU_ISA {
// This build's kernels (cpu_elementwise.cpp, cpu_reduce.cpp, cpu_window.cpp,
// cpu_norm.cpp, cpu_optim.cpp) and its table (cpu_kernel_table.cpp).
void copy(const detail::ElementwiseArgs& a);
void unary(detail::UnaryOp op, const detail::UnaryParams& params, const detail::ElementwiseArgs& a);
void binary(detail::BinaryOp op, const detail::ElementwiseArgs& a);
void where(const detail::ElementwiseArgs& a);
void unary_binary(detail::BinaryOp op, const detail::BinaryPrologue& prologue, const detail::ElementwiseArgs& a);
void reduce(detail::ReduceOp op, const detail::ReduceArgs& a);
void im2col(const detail::Im2colArgs& a);
void col2im(const detail::Im2colArgs& a);
void max_pool2d(const detail::Pool2dArgs& a);
void max_pool2d_backward(const detail::Pool2dArgs& a);
void batch_norm(const detail::BatchNormArgs& a);
void batch_norm_backward(const detail::BatchNormArgs& a);
void softmax(const detail::SoftmaxArgs& a);
void softmax_backward(const detail::SoftmaxArgs& a);
void layer_norm(const detail::LayerNormArgs& a);
void layer_norm_backward(const detail::LayerNormArgs& a);
void optimizer_step(const detail::OptimizerStepArgs& a);
void optimizer_step_list(const detail::OptimizerStepListArgs& a);
const KernelTable& kernel_table() noexcept;
}  // namespace ANVIL_CPU_ISA

// The running build, chosen on first use (cpu_isa.cpp).
const KernelTable& kernels() noexcept;

// A build as the choice sees it: its name and whether this CPU runs it.
struct IsaCandidate {
  std::string name;
  bool runs_here = false;
};
struct IsaChoice {
  std::size_t index = 0;  // into the candidates
  std::string reason;     // why a request was not honoured; empty when it was
};
// candidates: the compiled builds, lowest first, the first one "default"
// (which runs wherever the library does). requested: ANVIL_CPU_ISA's value
// or null: "default", "avx2", "avx512"; anything else, a build not compiled
// or one this CPU cannot run falls back to the highest that runs, with the
// reason.
IsaChoice choose_isa(const std::vector<IsaCandidate>& candidates, const char* requested);

// The builds compiled into this library, lowest first (for tests).
std::vector<IsaCandidate> compiled_isas();
// Runs `name`'s build from now on; false when it is not compiled or this
// CPU cannot run it. For tests that compare the builds in one process.
bool use_kernels_for_testing(const std::string& name) noexcept;

}  // namespace anvil::cpu_backend
