// Elementwise primitives of the CPU backend: copy (with conversion), unary,
// binary, where. Each row is specialised for the common stride patterns
// (all contiguous; one side broadcast) so the compiler vectorises them; the
// per-element meaning of every op is src/kernels/scalar.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/dtype_switch.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/scalar_ops.h"
#include "core/half_simd.h"

namespace anvil::cpu_backend {
inline namespace ANVIL_CPU_ISA {

using detail::BinaryOp;
using detail::ElementwiseArgs;
using detail::UnaryOp;

namespace {

// Each op's lambda is forced inline into the loops, as scalar.h's functions
// are (prelude_cpp.h): no call may stay out of line in a hot loop. Once the
// f32, f16 and bf16 lambdas of an op had the same body (float in, float
// out), GCC kept f32 exp and sigmoid out of line (most likely: identical-code
// folding made them one function with three callers) — a call per element
// and no vectorisation: exp of 16M f32 took 310 ms instead of 24.
#define ANVIL_CPU_INLINE __attribute__((always_inline))

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

// A row with a 16-bit operand that the fused rows below do not take (a
// strided operand, a CPU without AVX2 and F16C, a comparison) runs a block
// at a time: its inputs widened to float, the op's float loop (the one f32
// runs, so it vectorises alike), the results narrowed back, each a pass over
// buffers of 512 floats that stay in L1.
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

#ifdef ANVIL_HALF_SIMD
// Note [16-bit rows convert in the loop]
// A contiguous 16-bit row (each operand contiguous or one scalar) converts
// eight elements at a time in registers: load eight halves, widen, the op's
// float loop over those eight, narrow, store; the blocked rows made three
// passes over L1 buffers. On the 2-core EPYC, f16 add of 1M elements went from
// 1.4x f32's time to 0.85-1.2x (docs/measurements.md). Eight lanes holding a
// NaN take the scalar conversions (Note [F16C keeps our meaning except for
// NaN] in core/half.cpp), so the bits match the blocked rows'. Only where
// half_rows_available(), and only for the memory-bound ops of kParallelGrain:
// for exp, sigmoid and libm the blocked rows stayed faster (the 8-lane loop
// reloads the polynomial's constants every group).
inline bool half_rows_available() noexcept { return detail::cpu_has_f16c() && detail::cpu_has_avx2(); }

// A stride the fused rows take: contiguous, or 0 (a scalar or broadcast).
inline bool fused_stride(std::int64_t s) { return s == 0 || s == 1; }

template <typename H, typename F>
ANVIL_TARGET_HALF_ROWS void unary_row_fused(H* o, const H* x, std::int64_t n, F f) {
  alignas(32) float xs[8], rs[8];
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (detail::load8_exact(x + i, xs)) {
      for (int j = 0; j < 8; ++j) rs[j] = f(xs[j]);
      if (detail::store8_exact(rs, o + i)) continue;
    }
    for (std::int64_t j = i; j < i + 8; ++j) o[j] = H(f(static_cast<float>(x[j])));
  }
  for (; i < n; ++i) o[i] = H(f(static_cast<float>(x[i])));
}

// Reads all eight of a group before writing any, so an in-place op (o the
// same elements as a or b) stays safe; nothing is written for a group that
// falls back to the scalar conversions, which then read the inputs again.
template <typename H, typename F>
ANVIL_TARGET_HALF_ROWS void binary_row_fused(H* o, const H* a, const H* b, std::int64_t n, std::int64_t sa,
                                             std::int64_t sb, F f) {
  // A scalar operand is read as eight copies of itself, again each time:
  // the loop stays one loop, and its lanes stay in registers.
  H a8[8], b8[8];
  std::fill(a8, a8 + 8, a[0]);
  std::fill(b8, b8 + 8, b[0]);
  const std::int64_t step_a = sa * 8, step_b = sb * 8;
  const H* a_at = sa == 0 ? a8 : a;
  const H* b_at = sb == 0 ? b8 : b;
  alignas(32) float as[8], bs[8], rs[8];
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8, a_at += step_a, b_at += step_b) {
    if (detail::load8_exact(a_at, as) && detail::load8_exact(b_at, bs)) {
      for (int j = 0; j < 8; ++j) rs[j] = f(as[j], bs[j]);
      if (detail::store8_exact(rs, o + i)) continue;
    }
    for (std::int64_t j = i; j < i + 8; ++j) o[j] = H(f(static_cast<float>(a[j * sa]), static_cast<float>(b[j * sb])));
  }
  for (; i < n; ++i) o[i] = H(f(static_cast<float>(a[i * sa]), static_cast<float>(b[i * sb])));
}
#endif

// `f` takes and returns compute values (compute_t); the row converts on the
// way in and out.
template <typename O, typename I, typename F>
inline void unary_row(O* __restrict o, const I* __restrict x, std::int64_t n, std::int64_t so, std::int64_t sx, F f,
                      bool memory_bound = true) {
  using C = compute_t<I>;
  if constexpr (detail::is_half_v<O> || detail::is_half_v<I>) {
#ifdef ANVIL_HALF_SIMD
    if constexpr (std::is_same_v<O, I>) {
      if (memory_bound && so == 1 && sx == 1 && half_rows_available()) return unary_row_fused(o, x, n, f);
    }
#endif
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
                       F f, bool memory_bound) {
  using C = compute_t<I>;
  if constexpr (detail::is_half_v<O> || detail::is_half_v<I>) {
#ifdef ANVIL_HALF_SIMD
    if constexpr (std::is_same_v<O, I>) {
      if (memory_bound && so == 1 && fused_stride(sa) && fused_stride(sb) && half_rows_available())
        return binary_row_fused(o, a, b, n, sa, sb, f);
    }
#endif
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

// row(o, x, n, so, sx) over every row of a one-input op.
template <typename O, typename I, typename Row>
void for_each_unary_row(const ElementwiseArgs& a, Row row, std::int64_t grain) {
  I slot{};
  char* base[2] = {reinterpret_cast<char*>(static_cast<O*>(a.out.data) + a.out.offset),
                   reinterpret_cast<char*>(operand_ptr<I>(a.in[0], &slot))};
  const std::int64_t es[2] = {sizeof(O), sizeof(I)};
  const detail::KernelOperand* ops[2] = {&a.out, &a.in[0]};
  for_each_row<2>(
      a, base, es, ops,
      [&](char* const* p, std::int64_t n, const std::int64_t* st) {
        row(reinterpret_cast<O*>(p[0]), reinterpret_cast<const I*>(p[1]), n, st[0], st[1]);
      },
      grain);
}

template <typename O, typename I, typename F>
void run_unary(const ElementwiseArgs& a, F f, std::int64_t grain = kParallelGrain) {
  for_each_unary_row<O, I>(
      a,
      [f, memory_bound = grain == kParallelGrain](O* o, const I* x, std::int64_t n, std::int64_t so, std::int64_t sx) {
        unary_row(o, x, n, so, sx, f, memory_bound);
      },
      grain);
}

// A copy (to(dtype), contiguous(), clone()) within one 16-bit type copies
// the bits: every 16-bit value, NaN included, comes back unchanged through
// f32, so that is the conversion's answer. Between a 16-bit type and f32, a
// contiguous row is one bulk conversion (core/half.h) straight into the
// output.
template <typename O, typename I>
void copy_row(O* o, const I* x, std::int64_t n, std::int64_t so, std::int64_t sx) {
  if constexpr (std::is_same_v<O, I> && detail::is_half_v<I>) {
    if (so == 1 && sx == 1) {
      std::copy_n(x, n, o);
    } else {
      for (std::int64_t i = 0; i < n; ++i) o[i * so] = x[i * sx];
    }
    return;
  } else if constexpr (detail::is_half_v<I> && std::is_same_v<O, float>) {
    if (so == 1 && sx == 1) return detail::widen_to_f32(x, o, n);
  } else if constexpr (std::is_same_v<I, float> && detail::is_half_v<O>) {
    if (so == 1 && sx == 1) return detail::narrow_from_f32(x, o, n);
  }
  unary_row(o, x, n, so, sx, [](compute_t<I> v) ANVIL_CPU_INLINE { return v; });
}

template <typename O, typename I, typename F>
void run_binary(const ElementwiseArgs& a, F f, std::int64_t grain = kParallelGrain) {
  I slot_a{}, slot_b{};
  char* base[3] = {reinterpret_cast<char*>(static_cast<O*>(a.out.data) + a.out.offset),
                   reinterpret_cast<char*>(operand_ptr<I>(a.in[0], &slot_a)),
                   reinterpret_cast<char*>(operand_ptr<I>(a.in[1], &slot_b))};
  const std::int64_t es[3] = {sizeof(O), sizeof(I), sizeof(I)};
  const detail::KernelOperand* ops[3] = {&a.out, &a.in[0], &a.in[1]};
  // See Note [16-bit rows convert in the loop]: the ops of a load's cost.
  const bool memory_bound = grain == kParallelGrain;
  for_each_row<3>(
      a, base, es, ops,
      [&](char* const* p, std::int64_t n, const std::int64_t* st) {
        binary_row(reinterpret_cast<O*>(p[0]), reinterpret_cast<const I*>(p[1]), reinterpret_cast<const I*>(p[2]), n,
                   st[0], st[1], st[2], f, memory_bound);
      },
      grain);
}

// Clamp's bounds in the compute type, converted as the devices convert them
// (device_common::scalar_arg: saturated to the type's range, NaN to 0 for integers).
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

// The least elements worth a thread for an op computed in C (parallel.h), by
// the op's cost class (anvil/ops.def): f32 exp, sigmoid and tanh are
// vectorised polynomials, the other transcendental functions call libm once
// per element.
template <typename C>
constexpr std::int64_t grain_of(detail::CostClass cost) {
  switch (cost) {
    case detail::CostClass::VectorMath:
      return std::is_same_v<C, float> ? kParallelGrainVectorMath : kParallelGrainLibm;
    case detail::CostClass::Libm:
      return std::is_floating_point_v<C> ? kParallelGrainLibm : kParallelGrain;
    case detail::CostClass::Load:
      break;
  }
  return kParallelGrain;
}
template <typename C>
constexpr std::int64_t unary_grain(UnaryOp op) {
  return grain_of<C>(detail::row(op).cost);
}
template <typename C>
constexpr std::int64_t binary_grain(BinaryOp op) {
  return grain_of<C>(detail::row(op).cost);
}

// Whether an op's loop exists for compute type C: the float-only ops have no
// integer function in scalar.h, the bitwise ones no float function.
template <typename C>
constexpr bool runs_on(UnaryOp op) {
  return std::is_floating_point_v<C> || !detail::is_float_only(op);
}
template <typename C>
constexpr bool runs_on(BinaryOp op) {
  return std::is_floating_point_v<C> ? !detail::is_bitwise(op) : !detail::is_float_only(op);
}

// One case per row of anvil/ops.def: out = anvil_<name>(x) (or (x, y)) of
// scalar.h through the compute type; comparisons write bool.
template <typename T>
void binary_typed(BinaryOp op, const ElementwiseArgs& a) {
  using C = compute_t<T>;
  switch (op) {
#define ANVIL_BINARY_OP(Op, fn, ...)                                                                               \
  case BinaryOp::Op:                                                                                               \
    if constexpr (runs_on<C>(BinaryOp::Op)) {                                                                      \
      if constexpr (detail::is_comparison(BinaryOp::Op))                                                           \
        return run_binary<bool, T>(a, [](C x, C y) ANVIL_CPU_INLINE { return scalar::anvil_##fn(x, y) != 0; });    \
      else                                                                                                         \
        return run_binary<T, T>(                                                                                   \
            a, [](C x, C y) ANVIL_CPU_INLINE { return scalar::anvil_##fn(x, y); }, binary_grain<C>(BinaryOp::Op)); \
    }                                                                                                              \
    break;
#include "anvil/ops.def"
    case BinaryOp::Count:
      break;
  }
  ANVIL_ASSERT(false, "binary op ", detail::name(op), " on ", to_string(cpu_dtype<T>()));
}

template <typename T>
void unary_typed(UnaryOp op, const detail::UnaryParams& prm, const ElementwiseArgs& a) {
  using C = compute_t<T>;
  switch (op) {
#define ANVIL_UNARY_OP(Op, fn, ...)                                                                    \
  case UnaryOp::Op:                                                                                    \
    if constexpr (runs_on<C>(UnaryOp::Op))                                                             \
      return run_unary<T, T>(                                                                          \
          a, [](C x) ANVIL_CPU_INLINE { return scalar::anvil_##fn(x); }, unary_grain<C>(UnaryOp::Op)); \
    break;
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"
    case UnaryOp::Clamp: {
      const C lo = clamp_bound<C>(prm.lo), hi = clamp_bound<C>(prm.hi);
      return run_unary<T, T>(a, [lo, hi](C x) ANVIL_CPU_INLINE { return scalar::anvil_clamp(x, lo, hi); });
    }
    case UnaryOp::Count:
      break;
  }
  ANVIL_ASSERT(false, "unary op ", detail::name(op), " on ", to_string(cpu_dtype<T>()));
}

// The ops with a bool result (anvil/ops.def's ToBool rows) read any dtype.
template <typename T>
void to_bool_typed(UnaryOp op, const ElementwiseArgs& a) {
  using C = compute_t<T>;
  switch (op) {
#define ANVIL_UNARY_OP(Op, fn, rule, ...)                                                            \
  case UnaryOp::Op:                                                                                  \
    if constexpr (detail::UnaryRule::rule == detail::UnaryRule::ToBool)                              \
      return run_unary<bool, T>(a, [](C x) ANVIL_CPU_INLINE { return scalar::anvil_##fn(x) != 0; }); \
    break;
#include "anvil/ops.def"
    default:
      break;
  }
  ANVIL_ASSERT(false, "unary op ", detail::name(op), " has no bool result");
}

}  // namespace

void copy(const ElementwiseArgs& a) {
  ANVIL_DISPATCH(a.out.dtype, O,
                 ANVIL_DISPATCH(a.in[0].dtype, I, for_each_unary_row<O, I>(a, copy_row<O, I>, kParallelGrain)));
}

void unary(UnaryOp op, const detail::UnaryParams& params, const ElementwiseArgs& a) {
  if (detail::row(op).rule == detail::UnaryRule::ToBool) {
    ANVIL_DISPATCH(a.in[0].dtype, T, to_bool_typed<T>(op, a));
  } else {
    ANVIL_DISPATCH(a.out.dtype, T, unary_typed<T>(op, params, a));
  }
}

void binary(BinaryOp op, const ElementwiseArgs& a) { ANVIL_DISPATCH(a.in[0].dtype, T, binary_typed<T>(op, a)); }

namespace {
// out[i] = cond[i] ? x[i] : y[i], with x or y a scalar where its step is 0.
// Written so that GCC vectorises it as a blend: the scalar loaded once (a
// store to out could alias it otherwise), both values read unconditionally,
// and the condition read as a byte (a bool load did not vectorise). A
// branch instead mispredicts on every other element of ReLU's backward.
template <bool XDense, bool YDense, typename T>
void select_row(T* out, const bool* cond, const T* x, const T* y, std::int64_t n) {
  if (n <= 0) return;
  const T x0 = *x, y0 = *y;
  for (std::int64_t i = 0; i < n; ++i) {
    const T xi = XDense ? x[i] : x0, yi = YDense ? y[i] : y0;
    unsigned char c;
    std::memcpy(&c, cond + i, 1);
    out[i] = c ? xi : yi;
  }
}
}  // namespace

void where(const ElementwiseArgs& a) {
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
      if (st[0] == 1 && st[1] == 1) {
        // Dense rows with each value dense or a scalar (ReLU's backward is
        // where(y > 0, g, 0)): compile-time strides let the loop vectorise.
        if (st[2] == 1 && st[3] == 1) return select_row<true, true>(o, c, x, y, n);
        if (st[2] == 1 && st[3] == 0) return select_row<true, false>(o, c, x, y, n);
        if (st[2] == 0 && st[3] == 1) return select_row<false, true>(o, c, x, y, n);
      }
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

void unary_binary(BinaryOp op, const detail::BinaryPrologue& prologue, const ElementwiseArgs& a) {
  ANVIL_DISPATCH_FLOAT(a.out.dtype, T, unary_binary_typed<T>(op, prologue, a));
}

}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend

#undef ANVIL_CPU_INLINE
