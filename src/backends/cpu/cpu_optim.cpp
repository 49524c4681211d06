// Fused optimiser steps (backend.h, OptimizerStepArgs): SGD and Adam as one
// pass over each parameter. The composite update reads and writes every
// element four to ten times; here each element of param, grad and state is
// loaded once and stored once, in chunks on the shared pool.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/parallel.h"

namespace anvil::cpu_backend {
inline namespace ANVIL_CPU_ISA {

using detail::OptimizerKind;
using detail::OptimizerStepArgs;

namespace {

// The scalars of a step, cast to T as the composite's are.
template <typename T>
struct SgdScalars {
  T lr, wd, mom, keep;
};
template <typename T>
struct AdamScalars {
  T wd, b1, b2, k1, k2, c2, eps, step, pkeep;
};

// One chunk, through restrict-qualified pointers so the compiler may
// vectorise (a lambda's captured pointers may alias); the flags are loop
// invariant, so each combination becomes its own loop. Without momentum
// there is no buffer (buf is null), and that loop is written out on its
// own: GCC 12 once compiled the shared loop, inlined into optimizer_step,
// into AVX-512 loads of buf masked off by the momentum flag, and masked
// loads from an unmapped page take a microcode assist per vector on AMD
// Zen: an SGD step over 200,704 floats took 1,020 us instead of 13.
template <typename T>
void sgd_chunk(T* __restrict p, const T* __restrict g, T* __restrict buf, std::int64_t n, SgdScalars<T> s, bool decay,
               bool momentum, bool nesterov, bool first) {
  if (!momentum) {
    for (std::int64_t i = 0; i < n; ++i) p[i] -= (decay ? g[i] + p[i] * s.wd : g[i]) * s.lr;
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    T d = decay ? g[i] + p[i] * s.wd : g[i];
    const T b = first ? d : buf[i] * s.mom + d * s.keep;
    buf[i] = b;
    d = nesterov ? d + b * s.mom : b;
    p[i] -= d * s.lr;
  }
}

// AdamW's decoupled decay scales the parameter first (pkeep = 1 - lr * wd).
template <typename T>
void adam_chunk(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, std::int64_t n,
                AdamScalars<T> s, bool decay, bool decoupled) {
  for (std::int64_t i = 0; i < n; ++i) {
    const T pi = decoupled ? p[i] * s.pkeep : p[i];
    const T gi = decay ? g[i] + pi * s.wd : g[i];
    const T mi = m[i] * s.b1 + gi * s.k1;
    const T vi = v[i] * s.b2 + (gi * gi) * s.k2;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - mi / (std::sqrt(vi / s.c2) + s.eps) * s.step;
  }
}

template <typename T>
SgdScalars<T> sgd_scalars(const OptimizerStepArgs& a) {
  return {static_cast<T>(a.lr), static_cast<T>(a.weight_decay), static_cast<T>(a.momentum),
          static_cast<T>(1 - a.dampening)};
}
template <typename T>
AdamScalars<T> adam_scalars(const OptimizerStepArgs& a) {
  return {static_cast<T>(a.weight_decay),
          static_cast<T>(a.beta1),
          static_cast<T>(a.beta2),
          static_cast<T>(1 - a.beta1),
          static_cast<T>(1 - a.beta2),
          static_cast<T>(a.bias_correction2),
          static_cast<T>(a.eps),
          static_cast<T>(a.lr / a.bias_correction1),
          static_cast<T>(1 - a.lr * a.weight_decay)};
}

// Elements [begin, end) of the one-tensor step `a`: the loops of both paths.
template <typename T>
void step_range(const OptimizerStepArgs& a, std::int64_t begin, std::int64_t end) {
  T* p = elements<T>(a.param) + begin;
  const T* g = elements<T>(a.grad) + begin;
  const bool decay = a.weight_decay != 0;
  if (a.kind == OptimizerKind::Sgd) {
    const bool momentum = a.momentum != 0;
    sgd_chunk<T>(p, g, momentum ? elements<T>(a.state0) + begin : nullptr, end - begin, sgd_scalars<T>(a), decay,
                 momentum, a.nesterov, a.first);
  } else {
    adam_chunk<T>(p, g, elements<T>(a.state0) + begin, elements<T>(a.state1) + begin, end - begin, adam_scalars<T>(a),
                  decay && !a.decoupled, decay && a.decoupled);
  }
}

// sqrt and a division per element: Adam takes a quarter of the grain of add or mul.
std::int64_t step_grain(OptimizerKind k) { return k == OptimizerKind::Sgd ? kParallelGrain : kParallelGrain / 4; }

template <typename T>
void one_step(const OptimizerStepArgs& a) {
  parallel_for(a.numel, step_grain(a.kind),
               [&](std::int64_t begin, std::int64_t end) { step_range<T>(a, begin, end); });
}

// Every tensor of the list in one parallel region over their concatenated
// elements; each chunk runs the one-tensor loops over its pieces.
template <typename T>
void list_step(const detail::OptimizerStepListArgs& a) {
  std::vector<OptimizerStepArgs> steps(a.tensors.size());
  std::vector<std::int64_t> start(a.tensors.size() + 1, 0);
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    steps[i] = a.one(i);
    start[i + 1] = start[i] + a.tensors[i].numel;
  }
  parallel_for(start.back(), step_grain(a.step.kind), [&](std::int64_t begin, std::int64_t end) {
    std::size_t i = static_cast<std::size_t>(std::upper_bound(start.begin(), start.end(), begin) - start.begin()) - 1;
    for (; begin < end; ++i) {
      const std::int64_t stop = std::min(end, start[i + 1]);
      if (stop > begin) step_range<T>(steps[i], begin - start[i], stop - start[i]);
      begin = std::max(begin, stop);
    }
  });
}

}  // namespace

void optimizer_step(const OptimizerStepArgs& a) {
  // f32 and f64 only (supports_optimizer_step): halves take the composite.
  a.dtype == DType::F64 ? one_step<double>(a) : one_step<float>(a);
}

void optimizer_step_list(const detail::OptimizerStepListArgs& a) {
  a.step.dtype == DType::F64 ? list_step<double>(a) : list_step<float>(a);
}

}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend
