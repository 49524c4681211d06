// The builds of the CPU kernels per instruction set (Note [One kernel
// source, a build per instruction set] in src/backends/cpu/isa.h): the choice
// follows the CPU and ANVIL_CPU_ISA, and every build this CPU runs gives the
// same bits on the same inputs. ctest runs this file, and the conformance
// suite, once per ANVIL_CPU_ISA value (tests/CMakeLists.txt).
#include <anvil/anvil.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"

namespace {

using namespace anvil;
using cpu_backend::choose_isa;
using cpu_backend::IsaCandidate;

std::vector<IsaCandidate> three(bool avx2, bool avx512) {
  return {{"default", true}, {"avx2", avx2}, {"avx512", avx512}};
}

TEST(CpuIsa, ChoosesTheHighestBuildTheCpuRuns) {
  EXPECT_EQ(choose_isa(three(true, true), nullptr).index, 2u);
  EXPECT_EQ(choose_isa(three(true, false), nullptr).index, 1u);
  EXPECT_EQ(choose_isa(three(false, false), nullptr).index, 0u);
  EXPECT_EQ(choose_isa(three(true, false), "").index, 1u);
  EXPECT_EQ(choose_isa({{"default", true}}, nullptr).index, 0u);
  EXPECT_TRUE(choose_isa(three(true, true), nullptr).reason.empty());
}

TEST(CpuIsa, HonoursARequestTheCpuRuns) {
  for (const char* want : {"default", "avx2", "avx512"}) {
    const auto c = choose_isa(three(true, true), want);
    EXPECT_EQ(three(true, true)[c.index].name, want);
    EXPECT_TRUE(c.reason.empty()) << c.reason;
  }
}

TEST(CpuIsa, FallsBackWithAReason) {
  // AVX-512 asked for on a CPU without it: the highest that runs, and why.
  auto c = choose_isa(three(true, false), "avx512");
  EXPECT_EQ(c.index, 1u);
  EXPECT_NE(c.reason.find("ANVIL_CPU_ISA=avx512: this CPU cannot run the avx512 build"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("running avx2"), std::string::npos) << c.reason;
  // Not compiled (an ANVIL_NATIVE build has the default one only).
  c = choose_isa({{"default", true}}, "avx2");
  EXPECT_EQ(c.index, 0u);
  EXPECT_NE(c.reason.find("has no avx2 build (it has default"), std::string::npos) << c.reason;
  // Not a name at all.
  c = choose_isa(three(true, true), "sse9");
  EXPECT_EQ(c.index, 2u);
  EXPECT_NE(c.reason.find("expected one of default, avx2, avx512"), std::string::npos) << c.reason;
}

bool cpu_has(const std::string& isa) {
  if (isa == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (isa == "avx512")
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return true;
}

// What runs is what ANVIL_CPU_ISA asked for where this CPU runs it, else
// the highest compiled build this CPU has the instructions for, asked here
// through CPUID independently of the library.
TEST(CpuIsa, RunsWhatTheCpuSupports) {
  const CpuKernelIsa running = cpu_kernel_isa();
  ASSERT_FALSE(running.compiled.empty());
  EXPECT_EQ(running.compiled.front(), "default");
  std::string best = "default";
  for (const std::string& name : running.compiled)
    if (cpu_has(name)) best = name;
  const char* requested = std::getenv("ANVIL_CPU_ISA");
  const std::string want = requested ? requested : "";
  bool honoured = false;
  for (const std::string& name : running.compiled) honoured |= name == want && cpu_has(name);
  if (honoured) {
    EXPECT_EQ(running.name, want);
    EXPECT_TRUE(running.reason.empty()) << running.reason;
  } else {
    EXPECT_EQ(running.name, best);
    EXPECT_EQ(running.reason.empty(), want.empty()) << running.reason;
  }
  // anvil-smi's CPU row says it (followed by the pool's wake cost, threads.h).
  const std::string row = properties(cpu()).runtime_version;
  EXPECT_TRUE(row.starts_with("anvil cpu, " + running.name + " kernels")) << row;
  std::printf("running %s of", running.name.c_str());
  for (const auto& n : running.compiled) std::printf(" %s", n.c_str());
  std::printf("\n");
}

// Inputs that reach every branch of the per-element code: special values,
// denormals, and ordinary ones; odd lengths so vector tails run too.
Tensor inputs(DType t, Shape shape, std::uint64_t seed) {
  manual_seed(seed);
  Tensor x = randn(shape, cpu(), f64) * 3.0;
  std::vector<double> v = x.to_vector<double>();
  const double special[] = {std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            0.0,
                            -0.0,
                            1e-40,
                            -1e-310,
                            1.0,
                            -1.0,
                            88.5,
                            -104.0,
                            1e30};
  for (std::size_t i = 0; i < v.size(); i += 7) v[i] = special[(i / 7) % std::size(special)];
  return tensor(v, shape).to(t);
}

Tensor finite_inputs(DType t, Shape shape, std::uint64_t seed) {
  manual_seed(seed);
  return (randn(shape, cpu(), f32) * 2.0).to(t);
}

struct Result {
  DType dtype;
  std::vector<unsigned char> bytes;
  std::string what;  // the op that gave it, for the failure message
};

Result result_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const unsigned char*>(c.raw_data_ptr());
  return {c.dtype(), {p, p + c.nbytes()}, {}};
}

// The largest distance in units in the last place between two results of
// the same floating dtype (NaN equals NaN); -1 when an integer or bool
// result differs at all.
template <typename Bits>
std::int64_t max_ulp(const Result& a, const Result& b, int exponent_mask_shift) {
  std::int64_t worst = 0;
  for (std::size_t i = 0; i + sizeof(Bits) <= a.bytes.size(); i += sizeof(Bits)) {
    Bits x, y;
    std::memcpy(&x, a.bytes.data() + i, sizeof(Bits));
    std::memcpy(&y, b.bytes.data() + i, sizeof(Bits));
    if (x == y) continue;
    const Bits sign = Bits(1) << (sizeof(Bits) * 8 - 1);
    const Bits abs_mask = static_cast<Bits>(~sign),
               inf = static_cast<Bits>(abs_mask >> exponent_mask_shift << exponent_mask_shift);
    if ((x & abs_mask) > inf && (y & abs_mask) > inf) continue;  // both NaN
    // Sign-magnitude to a line of integers, where neighbours differ by 1.
    auto line = [&](Bits v) {
      const auto m = static_cast<std::int64_t>(v & abs_mask);
      return (v & sign) ? -m : m;
    };
    worst = std::max(worst, std::abs(line(x) - line(y)));
  }
  return worst;
}

std::int64_t distance(const Result& a, const Result& b) {
  if (a.bytes == b.bytes) return 0;
  if (a.dtype != b.dtype || a.bytes.size() != b.bytes.size()) return -1;
  if (a.dtype == f32) return max_ulp<std::uint32_t>(a, b, 23);
  if (a.dtype == f64) return max_ulp<std::uint64_t>(a, b, 52);
  if (a.dtype == f16) return max_ulp<std::uint16_t>(a, b, 10);
  if (a.dtype == bf16) return max_ulp<std::uint16_t>(a, b, 7);
  return -1;
}

// Every family the builds hold, in every dtype it takes: elementwise and
// conversions, reductions, the window kernels and batch norm (forward and
// backward), the optimiser steps.
std::vector<Result> run_everything() {
  std::vector<Result> out;
  std::string what;  // the op of the results kept next
  auto keep = [&](const Tensor& t) {
    out.push_back(result_of(t));
    out.back().what = what;
  };
  for (DType t : {f32, f64, f16, bf16}) {
    const Tensor x = inputs(t, {1037}, 1), y = inputs(t, {1037}, 2);
    const Tensor big = inputs(t, {3, 70001}, 3);
    // Every elementwise op of one tensor (anvil/ops.def).
    for (const auto& [name, f] : std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>>{
#define ANVIL_UNARY_OP(Op, name, ...) {#name, [](const Tensor& v) { return anvil::name(v); }},
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"
         }) {
      what = name;
      keep(f(x));
      keep(f(big));
    }
    what = "binary, conversions and reductions";
    keep(x + y);
    keep(x - y);
    keep(x * y);
    keep(x / y);
    keep(pow(x, y));
    keep(maximum(x, y));
    keep(minimum(x, y));
    keep(x * 0.37 + 1.5);
    keep(lt(x, y));
    keep(where(gt(x, y), x, y));
    keep(clamp(x, -1.0, 2.0));
    keep(exp(big) * big);  // unary into binary, where fused
    keep(big + big.slice(1, 0, 1));
    for (DType to : {f32, f64, f16, bf16, i32, i64, u8, boolean}) keep(big.to(to));
    const Tensor fin = finite_inputs(t, {37, 41, 33}, 4);
    for (const Dims& d : {Dims{}, Dims{0}, Dims{1}, Dims{2}, Dims{0, 2}}) {
      keep(sum(fin, d));
      keep(mean(fin, d));
      keep(amax(fin, d));
      keep(amin(fin, d));
      keep(norm(fin, d));
    }
    keep(prod(fin * 0.01 + 1.0, {2}));
    keep(argmax(fin, 1));
    keep(softmax(fin, 2));
    keep(log_softmax(fin, 1));
    // Rows shorter than 32: across vector lanes (Note [Softmax over short rows]).
    keep(softmax(fin.narrow(2, 0, 17), 2));
    keep(log_softmax(fin.narrow(2, 0, 10), 2));
    keep(cumsum(fin, 2));
    keep(sum(big));
  }
  // Window kernels, batch norm and the steps, f32 and f64, with gradients.
  what = "pooling, batch norm, conv2d and optimiser steps";
  for (DType t : {f32, f64}) {
    Tensor x = finite_inputs(t, {8, 3, 17, 19}, 5).requires_grad_();
    Tensor w = finite_inputs(t, {5, 3, 3, 3}, 6).requires_grad_();
    Tensor g = finite_inputs(t, {3}, 7).requires_grad_();
    Tensor b = finite_inputs(t, {3}, 8).requires_grad_();
    Tensor pooled = max_pool2d(x, {2, 2}, {2, 2}, {1, 1});
    Tensor normed = batch_norm(x, {}, {}, g, b, true);
    Tensor conv = conv2d(x, w, {}, {2, 1}, {1, 1});
    Tensor loss = sum(pooled * pooled) + sum(normed * finite_inputs(t, normed.shape(), 9)) + sum(conv * conv);
    loss.backward();
    for (const Tensor& r : {pooled, normed, conv, loss, x.grad(), w.grad(), g.grad(), b.grad()}) keep(r);
    optim::SGD sgd({w}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4});
    sgd.step();
    sgd.step();
    keep(w);
    optim::Adam adam({x}, optim::AdamOptions{.lr = 0.01, .weight_decay = 1e-3});
    adam.step();
    adam.step();
    keep(x);
  }
  return out;
}

// Same bits from every build this CPU runs. Builds compiled with FMA and
// without it (a default build for plain x86-64) may differ where a*b+c
// contracts, so each is compared with the first build of its kind. (The
// avx512 build keeps 256-bit vectors for this: with 512-bit ones its
// `omp simd` reductions added in other lanes, f64 norm 24 ulp away.)
TEST(CpuIsa, EveryBuildGivesTheSameBits) {
  const CpuKernelIsa running = cpu_kernel_isa();
  std::vector<std::string> runnable;
  for (const auto& c : cpu_backend::compiled_isas())
    if (c.runs_here) runnable.push_back(c.name);
  if (runnable.size() < 2) GTEST_SKIP() << "one build of the CPU kernels runs here (" << running.name << ")";
  std::vector<Result> first;
  std::string first_name;
  for (const std::string& name : runnable) {
    ASSERT_TRUE(cpu_backend::use_kernels_for_testing(name));
    ASSERT_EQ(cpu_backend::kernels().name, name);
    if (!cpu_backend::kernels().fma) continue;
    const auto got = run_everything();
    if (first.empty()) {
      first = got;
      first_name = name;
      continue;
    }
    ASSERT_EQ(got.size(), first.size());
    const std::int64_t bound = 0;
    int differing = 0, reported = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const std::int64_t d = distance(got[i], first[i]);
      differing += d != 0;
      if ((d < 0 || d > bound) && ++reported <= 10)
        ADD_FAILURE() << "result " << i << " (" << got[i].what << ", " << to_string(got[i].dtype)
                      << ") differs between the " << first_name << " and " << name << " builds by "
                      << (d < 0 ? std::string("an exact value") : std::to_string(d) + " ulp");
    }
    std::printf("%s against %s: %d of %zu results differ\n", name.c_str(), first_name.c_str(), differing, got.size());
  }
  ASSERT_TRUE(cpu_backend::use_kernels_for_testing(running.name));
  if (first_name.empty()) GTEST_SKIP() << "no build here was compiled with FMA";
}

}  // namespace
