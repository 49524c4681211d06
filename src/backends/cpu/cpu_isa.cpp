// Which build of the CPU kernels runs, chosen once, and the CpuBackend
// methods that call through it. See Note [One kernel source, a build per
// instruction set] in isa.h.
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "anvil/runtime.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/isa.h"

namespace anvil::cpu_backend {

// The other builds' tables, by their namespaces' names (CMake defines
// ANVIL_CPU_HAS_<ISA> for each build it adds).
#ifdef ANVIL_CPU_HAS_AVX2
namespace isa_avx2 {
const KernelTable& kernel_table() noexcept;
}
#endif
#ifdef ANVIL_CPU_HAS_AVX512
namespace isa_avx512 {
const KernelTable& kernel_table() noexcept;
}
#endif

namespace {

// What each build was compiled for (CMakeLists.txt: -march=x86-64-v3 and
// x86-64-v4), asked through CPUID.
[[maybe_unused]] bool cpu_runs_avx2() noexcept {
#if defined(__GNUC__) && !defined(__clang__)
  return __builtin_cpu_supports("x86-64-v3");
#else
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#endif
}
[[maybe_unused]] bool cpu_runs_avx512() noexcept {
#if defined(__GNUC__) && !defined(__clang__)
  return __builtin_cpu_supports("x86-64-v4");
#else
  return cpu_runs_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
}

struct Build {
  const KernelTable& table;
  bool runs_here;
};

// Lowest first; "default" is the library's own flags and runs wherever it does.
std::vector<Build> builds() {
  std::vector<Build> b{{isa_default::kernel_table(), true}};
#ifdef ANVIL_CPU_HAS_AVX2
  b.push_back({isa_avx2::kernel_table(), cpu_runs_avx2()});
#endif
#ifdef ANVIL_CPU_HAS_AVX512
  b.push_back({isa_avx512::kernel_table(), cpu_runs_avx512()});
#endif
  return b;
}

std::atomic<const KernelTable*> g_running{nullptr};

struct Chosen {
  const KernelTable* table;
  std::string reason;
};

const Chosen& first_choice() {
  static const Chosen chosen = [] {
    const std::vector<Build> b = builds();
    std::vector<IsaCandidate> candidates;
    for (const Build& x : b) candidates.push_back({x.table.name, x.runs_here});
    const char* requested = std::getenv("ANVIL_CPU_ISA");
    IsaChoice c = choose_isa(candidates, requested);
    // A request that cannot be honoured still runs (the library never
    // fails at start), and says so once.
    if (!c.reason.empty()) std::fprintf(stderr, "anvil: %s\n", c.reason.c_str());
    Chosen out{&b[c.index].table, std::move(c.reason)};
    g_running.store(out.table, std::memory_order_release);
    return out;
  }();
  return chosen;
}

}  // namespace

IsaChoice choose_isa(const std::vector<IsaCandidate>& candidates, const char* requested) {
  std::size_t best = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].runs_here) best = i;
  if (requested == nullptr || *requested == '\0') return {best, ""};
  const std::string want = requested;
  std::string names;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    names += (i ? ", " : "") + candidates[i].name;
    if (candidates[i].name != want) continue;
    if (candidates[i].runs_here) return {i, ""};
    return {best, "ANVIL_CPU_ISA=" + want + ": this CPU cannot run the " + want + " build (" +
                      (want == "avx512" ? "it needs avx512f, avx512bw, avx512dq and avx512vl"
                                        : "it needs avx2, fma, bmi2 and f16c") +
                      "); running " + candidates[best].name};
  }
  const bool known = want == "default" || want == "avx2" || want == "avx512";
  return {best, "ANVIL_CPU_ISA=" + want + ": " +
                    (known ? "this library has no " + want + " build (it has " + names +
                                 "; ANVIL_NATIVE=ON builds only the default one)"
                           : "expected one of default, avx2, avx512") +
                    "; running " + candidates[best].name};
}

const KernelTable& kernels() noexcept {
  const KernelTable* t = g_running.load(std::memory_order_acquire);
  return t != nullptr ? *t : *first_choice().table;
}

std::vector<IsaCandidate> compiled_isas() {
  std::vector<IsaCandidate> out;
  for (const Build& b : builds()) out.push_back({b.table.name, b.runs_here});
  return out;
}

bool use_kernels_for_testing(const std::string& name) noexcept {
  (void)first_choice();
  for (const Build& b : builds())
    if (name == b.table.name && b.runs_here) {
      g_running.store(&b.table, std::memory_order_release);
      return true;
    }
  return false;
}

// ---- the CpuBackend methods of the kernels above -------------------------

void CpuBackend::copy(int, const detail::ElementwiseArgs& a) {
  count(detail::traffic(a));
  kernels().copy(a);
}
void CpuBackend::unary(int, detail::UnaryOp op, const detail::UnaryParams& params, const detail::ElementwiseArgs& a) {
  count(detail::traffic(a));
  kernels().unary(op, params, a);
}
void CpuBackend::binary(int, detail::BinaryOp op, const detail::ElementwiseArgs& a) {
  count(detail::traffic(a));
  kernels().binary(op, a);
}
void CpuBackend::where(int, const detail::ElementwiseArgs& a) {
  count(detail::traffic(a));
  kernels().where(a);
}
void CpuBackend::unary_binary(int, detail::BinaryOp op, const detail::BinaryPrologue& prologue,
                              const detail::ElementwiseArgs& a) {
  count(detail::traffic(a));
  kernels().unary_binary(op, prologue, a);
}
void CpuBackend::reduce(int, detail::ReduceOp op, const detail::ReduceArgs& a) {
  count(detail::traffic(a));
  kernels().reduce(op, a);
}
void CpuBackend::im2col(int, const detail::Im2colArgs& a) {
  count(detail::traffic(a, false));
  kernels().im2col(a);
}
void CpuBackend::col2im(int, const detail::Im2colArgs& a) {
  count(detail::traffic(a, true));
  kernels().col2im(a);
}
void CpuBackend::max_pool2d(int, const detail::Pool2dArgs& a) {
  count(detail::traffic(a, false));
  kernels().max_pool2d(a);
}
void CpuBackend::max_pool2d_backward(int, const detail::Pool2dArgs& a) {
  count(detail::traffic(a, true));
  kernels().max_pool2d_backward(a);
}
void CpuBackend::batch_norm(int, const detail::BatchNormArgs& a) {
  count(detail::traffic(a, false));
  kernels().batch_norm(a);
}
void CpuBackend::batch_norm_backward(int, const detail::BatchNormArgs& a) {
  count(detail::traffic(a, true));
  kernels().batch_norm_backward(a);
}
void CpuBackend::layer_norm(int, const detail::LayerNormArgs& a) {
  count(detail::traffic(a, false));
  kernels().layer_norm(a);
}
void CpuBackend::layer_norm_backward(int, const detail::LayerNormArgs& a) {
  count(detail::traffic(a, true));
  kernels().layer_norm_backward(a);
}
void CpuBackend::softmax(int, const detail::SoftmaxArgs& a) {
  count(detail::traffic(a, false));
  kernels().softmax(a);
}
void CpuBackend::softmax_backward(int, const detail::SoftmaxArgs& a) {
  count(detail::traffic(a, true));
  kernels().softmax_backward(a);
}
void CpuBackend::optimizer_step(int, const detail::OptimizerStepArgs& a) {
  count(detail::traffic(a));
  kernels().optimizer_step(a);
}
void CpuBackend::optimizer_step_list(int, const detail::OptimizerStepListArgs& a) {
  count(detail::traffic(a));
  kernels().optimizer_step_list(a);
}

bool CpuBackend::supports_fused(detail::FusedOp op, DType t, int) noexcept {
  if (detail::is_window_kernel(op) || op == detail::FusedOp::UnaryBinary || op == detail::FusedOp::Interpolate ||
      op == detail::FusedOp::InterpolateBackward)
    return is_floating(t);
  if (op == detail::FusedOp::BatchNorm || op == detail::FusedOp::BatchNormBackward || op == detail::FusedOp::Softmax ||
      op == detail::FusedOp::SoftmaxBackward || op == detail::FusedOp::GemmBias)
    return is_floating(t);
  if (op == detail::FusedOp::LayerNorm || op == detail::FusedOp::LayerNormBackward)
    return t == DType::F32 || t == DType::F64;
  // oneDNN's 4-D matmul or the loops over the batch (cpu_gemm.cpp).
  if (op == detail::FusedOp::GemmTwoLevelBatch) return is_floating(t);
  // The Conv2d family (cpu_conv.cpp; bf16 only on CPUs with bf16
  // instructions, which supports_fused_conv2d checks).
  return t == DType::F32 || t == DType::BF16;
}

bool CpuBackend::supports_optimizer_step(detail::OptimizerKind, DType t, int) noexcept {
  return t == DType::F32 || t == DType::F64;
}
bool CpuBackend::supports_optimizer_step_list(detail::OptimizerKind, DType t, int) noexcept {
  return t == DType::F32 || t == DType::F64;
}

}  // namespace anvil::cpu_backend

namespace anvil {

CpuKernelIsa cpu_kernel_isa() {
  const cpu_backend::KernelTable& running = cpu_backend::kernels();
  CpuKernelIsa out{running.name, {}, cpu_backend::first_choice().reason};
  for (const cpu_backend::IsaCandidate& c : cpu_backend::compiled_isas()) out.compiled.push_back(c.name);
  return out;
}

}  // namespace anvil
