// Elementwise primitives of the CPU backend: copy (with conversion), unary,
// binary, where. Each row is specialised for the common stride patterns
// (all contiguous; one side broadcast) so the compiler vectorises them; the
// per-element meaning of every op is src/kernels/scalar.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dispatch.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/scalar_ops.h"

namespace anvil::cpu_backend {

using detail::BinaryOp;
using detail::ElementwiseArgs;
using detail::UnaryOp;

namespace {

// A 16-bit float converts through float, from every type (c10::Half's rule).
template <typename O, typename I>
inline O convert(I v) {
  if constexpr (std::is_same_v<O, bool> && detail::is_half_v<I>)
    return static_cast<float>(v) != 0.0f;
  else if constexpr (std::is_same_v<O, bool>)
    return v != I(0);
  else if constexpr (detail::is_half_v<O>)
    return O(static_cast<float>(v));
  else
    return static_cast<O>(v);
}

// What each op computes per element is src/kernels/scalar.h (scalar_ops.h),
// the definition the devices compile too; this file only maps a dtype to
// its compute type and runs the loops. bool computes as u8 holding 0/1 and
// is stored back as != 0, as on the devices; f16 and bf16 compute in float
// and round once, on the store.
template <typename T>
using compute_t =
    std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, std::conditional_t<detail::is_half_v<T>, float, T>>;

// A row with a 16-bit operand runs a block at a time: its inputs widened to
// float, the op's float loop (the one f32 runs, so it vectorises alike), the
// results narrowed back. Widening and narrowing a contiguous run go through
// the bulk conversions of core/half.h (F16C for f16), which is what lets a
// 16-bit op move half the bytes of f32 in about half the time rather than
// paying a scalar conversion per element. 512 floats per buffer: the three
// buffers stay in L1.
constexpr std::int64_t kHalfBlock = 512;

// n elements of x (stride sx, 0 for a broadcast) as compute values.
template <typename I>
inline void load_compute(const I* x, std::int64_t sx, std::int64_t n, compute_t<I>* out) {
  if constexpr (detail::is_half_v<I>) {
    if (sx == 1) return detail::widen_to_f32(x, out, n);
  }
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<compute_t<I>>(x[i * sx]);
}

// n results stored to o (stride so) as O.
template <typename O, typename R>
inline void store_results(const R* r, std::int64_t n, O* o, std::int64_t so) {
  if constexpr (detail::is_half_v<O> && std::is_same_v<R, float>) {
    if (so == 1) return detail::narrow_from_f32(r, o, n);
  }
  for (std::int64_t i = 0; i < n; ++i) o[i * so] = convert<O>(r[i]);
}

template <typename O, typename I, typename F>
void unary_row_blocked(O* o, const I* x, std::int64_t n, std::int64_t so, std::int64_t sx, F f) {
  using C = compute_t<I>;
  using R = std::invoke_result_t<F, C>;
  C xs[kHalfBlock];
  R rs[kHalfBlock];
  for (std::int64_t i = 0; i < n; i += kHalfBlock) {
    const std::int64_t m = std::min(kHalfBlock, n - i);
    load_compute(x + i * sx, sx, m, xs);
    for (std::int64_t j = 0; j < m; ++j) rs[j] = f(xs[j]);
    store_results(rs, m, o + i * so, so);
  }
}

// A block's inputs are read before its results are written, so an in-place
// op (o aliasing a or b at the same index) stays safe.
template <typename O, typename I, typename F>
void binary_row_blocked(O* o, const I* a, const I* b, std::int64_t n, std::int64_t so, std::int64_t sa, std::int64_t sb,
                        F f) {
  using C = compute_t<I>;
  using R = std::invoke_result_t<F, C, C>;
  C as[kHalfBlock], bs[kHalfBlock];
  R rs[kHalfBlock];
  for (std::int64_t i = 0; i < n; i += kHalfBlock) {
    const std::int64_t m = std::min(kHalfBlock, n - i);
    load_compute(a + i * sa, sa, m, as);
    load_compute(b + i * sb, sb, m, bs);
    for (std::int64_t j = 0; j < m; ++j) rs[j] = f(as[j], bs[j]);
    store_results(rs, m, o + i * so, so);
  }
}

// `f` takes and returns compute values (compute_t); the row converts on the
// way in and out.
template <typename O, typename I, typename F>
inline void unary_row(O* __restrict o, const I* __restrict x, std::int64_t n, std::int64_t so, std::int64_t sx, F f) {
  using C = compute_t<I>;
  if constexpr (detail::is_half_v<O> || detail::is_half_v<I>) {
    unary_row_blocked(o, x, n, so, sx, f);
  } else if (so == 1 && sx == 1) {
    for (std::int64_t i = 0; i < n; ++i) o[i] = convert<O>(f(static_cast<C>(x[i])));
  } else if (so == 1 && sx == 0) {
    const O v = convert<O>(f(static_cast<C>(x[0])));
    for (std::int64_t i = 0; i < n; ++i) o[i] = v;
  } else {
    for (std::int64_t i = 0; i < n; ++i) o[i * so] = convert<O>(f(static_cast<C>(x[i * sx])));
  }
}

// In-place ops (a.add_(b)) make `o` alias `a`; the contiguous loops read
// a[i] before writing o[i], so aliasing the same index is safe. They are
// not marked __restrict for that reason.
template <typename O, typename I, typename F>
inline void binary_row(O* o, const I* a, const I* b, std::int64_t n, std::int64_t so, std::int64_t sa, std::int64_t sb,
                       F f) {
  using C = compute_t<I>;
  if constexpr (detail::is_half_v<O> || detail::is_half_v<I>) {
    binary_row_blocked(o, a, b, n, so, sa, sb, f);
  } else if (so == 1 && sa == 1 && sb == 1) {
    for (std::int64_t i = 0; i < n; ++i) o[i] = convert<O>(f(static_cast<C>(a[i]), static_cast<C>(b[i])));
  } else if (so == 1 && sa == 1 && sb == 0) {
    const C bv = static_cast<C>(b[0]);
    for (std::int64_t i = 0; i < n; ++i) o[i] = convert<O>(f(static_cast<C>(a[i]), bv));
  } else if (so == 1 && sa == 0 && sb == 1) {
    const C av = static_cast<C>(a[0]);
    for (std::int64_t i = 0; i < n; ++i) o[i] = convert<O>(f(av, static_cast<C>(b[i])));
  } else {
    for (std::int64_t i = 0; i < n; ++i)
      o[i * so] = convert<O>(f(static_cast<C>(a[i * sa]), static_cast<C>(b[i * sb])));
  }
}

template <typename O, typename I, typename F>
void run_unary(const ElementwiseArgs& a, F f, std::int64_t grain = kParallelGrain) {
  I slot{};
  char* base[2] = {reinterpret_cast<char*>(static_cast<O*>(a.out.data) + a.out.offset),
                   reinterpret_cast<char*>(operand_ptr<I>(a.in[0], &slot))};
  const std::int64_t es[2] = {sizeof(O), sizeof(I)};
  const detail::KernelOperand* ops[2] = {&a.out, &a.in[0]};
  for_each_row<2>(
      a, base, es, ops,
      [&](char* const* p, std::int64_t n, const std::int64_t* st) {
        unary_row(reinterpret_cast<O*>(p[0]), reinterpret_cast<const I*>(p[1]), n, st[0], st[1], f);
      },
      grain);
}

template <typename O, typename I, typename F>
void run_binary(const ElementwiseArgs& a, F f, std::int64_t grain = kParallelGrain) {
  I slot_a{}, slot_b{};
  char* base[3] = {reinterpret_cast<char*>(static_cast<O*>(a.out.data) + a.out.offset),
                   reinterpret_cast<char*>(operand_ptr<I>(a.in[0], &slot_a)),
                   reinterpret_cast<char*>(operand_ptr<I>(a.in[1], &slot_b))};
  const std::int64_t es[3] = {sizeof(O), sizeof(I), sizeof(I)};
  const detail::KernelOperand* ops[3] = {&a.out, &a.in[0], &a.in[1]};
  for_each_row<3>(
      a, base, es, ops,
      [&](char* const* p, std::int64_t n, const std::int64_t* st) {
        binary_row(reinterpret_cast<O*>(p[0]), reinterpret_cast<const I*>(p[1]), reinterpret_cast<const I*>(p[2]), n,
                   st[0], st[1], st[2], f);
      },
      grain);
}

// Clamp's bounds in the compute type, converted as the devices convert them
// (kernels::scalar_arg: saturated to the type's range, NaN to 0 for integers).
template <typename C>
C clamp_bound(double v) {
  if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(v);
  } else {
    if (v != v) return C{0};
    if (v <= static_cast<double>(std::numeric_limits<C>::lowest())) return std::numeric_limits<C>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<C>::max())) return std::numeric_limits<C>::max();
    return static_cast<C>(v);
  }
}

// The least elements worth a thread for an op computed in C (parallel.h):
// f32 exp and sigmoid are vectorised polynomials, the rest of the
// transcendental functions call libm once per element.
template <typename C>
constexpr std::int64_t unary_grain(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp:
    case UnaryOp::Sigmoid:
      return std::is_same_v<C, float> ? kParallelGrainVectorMath : kParallelGrainLibm;
    case UnaryOp::Log:
    case UnaryOp::Sin:
    case UnaryOp::Cos:
    case UnaryOp::Tanh:
    case UnaryOp::Log1p:
    case UnaryOp::Expm1:
    case UnaryOp::Erf:
    case UnaryOp::Gelu:
    case UnaryOp::Softplus:
      return kParallelGrainLibm;
    default:
      return kParallelGrain;
  }
}

template <typename C>
constexpr std::int64_t binary_grain(BinaryOp op) {
  return op == BinaryOp::Pow && std::is_floating_point_v<C> ? kParallelGrainLibm : kParallelGrain;
}

// Each op's lambda is forced inline into the loops, as scalar.h's functions
// are (prelude_cpp.h): no call may stay out of line in a hot loop. Once the
// f32, f16 and bf16 lambdas of an op had the same body (float in, float
// out), GCC kept f32 exp and sigmoid out of line (most likely: identical-code
// folding made them one function with three callers) — a call per element
// and no vectorisation: exp of 16M f32 took 310 ms instead of 24.
#define ANVIL_CPU_INLINE __attribute__((always_inline))

// One case per op: out = fn(x) (or fn(x, y)) through the compute type.
#define ANVIL_CPU_UNARY(Op, fn) \
  case UnaryOp::Op:             \
    return run_unary<T, T>(     \
        a, [](C x) ANVIL_CPU_INLINE { return scalar::anvil_##fn(x); }, unary_grain<C>(UnaryOp::Op))
#define ANVIL_CPU_BINARY(Op, fn) \
  case BinaryOp::Op:             \
    return run_binary<T, T>(     \
        a, [](C x, C y) ANVIL_CPU_INLINE { return scalar::anvil_##fn(x, y); }, binary_grain<C>(BinaryOp::Op))
#define ANVIL_CPU_COMPARE(Op, fn) \
  case BinaryOp::Op:              \
    return run_binary<bool, T>(a, [](C x, C y) ANVIL_CPU_INLINE { return scalar::anvil_##fn(x, y) != 0; })

template <typename T>
void binary_typed(BinaryOp op, const ElementwiseArgs& a) {
  using C = compute_t<T>;
  switch (op) {
    ANVIL_CPU_BINARY(Add, add);
    ANVIL_CPU_BINARY(Sub, sub);
    ANVIL_CPU_BINARY(Mul, mul);
    ANVIL_CPU_BINARY(Div, div);
    ANVIL_CPU_BINARY(Pow, pow);
    ANVIL_CPU_BINARY(Maximum, maximum);
    ANVIL_CPU_BINARY(Minimum, minimum);
    ANVIL_CPU_COMPARE(Eq, eq);
    ANVIL_CPU_COMPARE(Ne, ne);
    ANVIL_CPU_COMPARE(Lt, lt);
    ANVIL_CPU_COMPARE(Le, le);
    ANVIL_CPU_COMPARE(Gt, gt);
    ANVIL_CPU_COMPARE(Ge, ge);
    case BinaryOp::Count:
      break;
  }
  ANVIL_ASSERT(false, "binary op ", detail::name(op), " on ", to_string(cpu_dtype<T>()));
}

template <typename T>
void unary_typed(UnaryOp op, const detail::UnaryParams& prm, const ElementwiseArgs& a) {
  using C = compute_t<T>;
  // The frontend computes these in a float dtype (integers become f32 first).
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      ANVIL_CPU_UNARY(Exp, exp);
      ANVIL_CPU_UNARY(Log, log);
      ANVIL_CPU_UNARY(Sqrt, sqrt);
      ANVIL_CPU_UNARY(Rsqrt, rsqrt);
      ANVIL_CPU_UNARY(Sin, sin);
      ANVIL_CPU_UNARY(Cos, cos);
      ANVIL_CPU_UNARY(Tanh, tanh);
      ANVIL_CPU_UNARY(Sigmoid, sigmoid);
      ANVIL_CPU_UNARY(Reciprocal, reciprocal);
      ANVIL_CPU_UNARY(Log1p, log1p);
      ANVIL_CPU_UNARY(Expm1, expm1);
      ANVIL_CPU_UNARY(Erf, erf);
      ANVIL_CPU_UNARY(Gelu, gelu);
      ANVIL_CPU_UNARY(Softplus, softplus);
      ANVIL_CPU_UNARY(Floor, floor);
      ANVIL_CPU_UNARY(Ceil, ceil);
      ANVIL_CPU_UNARY(Round, round);
      default:
        break;
    }
  }
  switch (op) {
    ANVIL_CPU_UNARY(Neg, neg);
    ANVIL_CPU_UNARY(Abs, abs);
    ANVIL_CPU_UNARY(Relu, relu);
    ANVIL_CPU_UNARY(Sign, sign);
    ANVIL_CPU_UNARY(Square, square);
    ANVIL_CPU_UNARY(LogicalNot, logical_not);
    case UnaryOp::Clamp: {
      const C lo = clamp_bound<C>(prm.lo), hi = clamp_bound<C>(prm.hi);
      return run_unary<T, T>(a, [lo, hi](C x) ANVIL_CPU_INLINE { return scalar::anvil_clamp(x, lo, hi); });
    }
    default:
      break;
  }
  ANVIL_ASSERT(false, "unary op ", detail::name(op), " on ", to_string(cpu_dtype<T>()));
}

#undef ANVIL_CPU_UNARY
#undef ANVIL_CPU_BINARY
#undef ANVIL_CPU_COMPARE

}  // namespace

void CpuBackend::copy(int, const ElementwiseArgs& a) {
  ANVIL_DISPATCH(
      a.out.dtype, O,
      ANVIL_DISPATCH(a.in[0].dtype, I, run_unary<O, I>(a, [](compute_t<I> x) ANVIL_CPU_INLINE { return x; })));
}

void CpuBackend::unary(int, UnaryOp op, const detail::UnaryParams& params, const ElementwiseArgs& a) {
  ANVIL_DISPATCH(a.out.dtype, T, unary_typed<T>(op, params, a));
}

void CpuBackend::binary(int, BinaryOp op, const ElementwiseArgs& a) {
  ANVIL_DISPATCH(a.in[0].dtype, T, binary_typed<T>(op, a));
}

void CpuBackend::where(int, const ElementwiseArgs& a) {
  ANVIL_DISPATCH(a.out.dtype, T, {
    bool slot_c{};
    T slot_a{}, slot_b{};
    char* base[4] = {reinterpret_cast<char*>(static_cast<T*>(a.out.data) + a.out.offset),
                     reinterpret_cast<char*>(operand_ptr<bool>(a.in[0], &slot_c)),
                     reinterpret_cast<char*>(operand_ptr<T>(a.in[1], &slot_a)),
                     reinterpret_cast<char*>(operand_ptr<T>(a.in[2], &slot_b))};
    const std::int64_t es[4] = {sizeof(T), sizeof(bool), sizeof(T), sizeof(T)};
    const detail::KernelOperand* ops[4] = {&a.out, &a.in[0], &a.in[1], &a.in[2]};
    for_each_row<4>(a, base, es, ops, [&](char* const* p, std::int64_t n, const std::int64_t* st) {
      T* o = reinterpret_cast<T*>(p[0]);
      const bool* c = reinterpret_cast<const bool*>(p[1]);
      const T* x = reinterpret_cast<const T*>(p[2]);
      const T* y = reinterpret_cast<const T*>(p[3]);
      for (std::int64_t i = 0; i < n; ++i) o[i * st[0]] = c[i * st[1]] ? x[i * st[2]] : y[i * st[3]];
    });
  });
}

// Note [Unary into binary] (core/backend.h) on the CPU: blocks of
// kFusedBlock elements, each input's unary op written to a buffer that stays
// in L1 and the binary op reading it from there, so memory sees the inputs
// and the output once. The per-op loops are the ones above, so the result is
// the op-by-op one bit for bit.
namespace {
constexpr std::int64_t kFusedBlock = 1024;

template <typename T>
void unary_binary_typed(BinaryOp op, const detail::BinaryPrologue& prologue, const ElementwiseArgs& a) {
  using C = compute_t<T>;
  std::int64_t grain = binary_grain<C>(op);
  for (UnaryOp u : prologue.pre)
    if (u != UnaryOp::Count) grain = std::min(grain, unary_grain<C>(u));
  parallel_for(a.numel, grain, [&](std::int64_t begin, std::int64_t end) {
    alignas(64) T buffer[2][kFusedBlock];
    for (std::int64_t start = begin; start < end; start += kFusedBlock) {
      const std::int64_t n = std::min(kFusedBlock, end - start);
      ElementwiseArgs block = a;
      block.ndim = 1;
      block.shape[0] = block.numel = n;
      block.out.offset += start;
      for (int i = 0; i < 2; ++i) {
        detail::KernelOperand& in = block.in[i];
        if (in.is_scalar) continue;
        in.offset += start;
        if (prologue.pre[i] == UnaryOp::Count) continue;
        ElementwiseArgs pre = block;
        pre.nin = 1;
        pre.in[0] = in;
        pre.out = in;
        pre.out.data = buffer[i];
        pre.out.offset = 0;
        unary_typed<T>(prologue.pre[i], {}, pre);
        in = pre.out;
      }
      binary_typed<T>(op, block);
    }
  });
}
}  // namespace

void CpuBackend::unary_binary(int, BinaryOp op, const detail::BinaryPrologue& prologue, const ElementwiseArgs& a) {
  ANVIL_DISPATCH_FLOAT(a.out.dtype, T, unary_binary_typed<T>(op, prologue, a));
}

}  // namespace anvil::cpu_backend

#undef ANVIL_CPU_INLINE
