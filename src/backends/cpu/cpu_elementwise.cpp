// Elementwise primitives of the CPU backend: copy (with conversion), unary,
// binary, where. Each row is specialised for the common stride patterns
// (all contiguous; one side broadcast) so the compiler vectorises them.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dispatch.h"
#include "backends/cpu/loops.h"
#include "backends/cpu/vec_math.h"

namespace anvil::cpu_backend {

using detail::BinaryOp;
using detail::ElementwiseArgs;
using detail::UnaryOp;

namespace {

template <typename O, typename I>
inline O convert(I v) {
  if constexpr (std::is_same_v<O, bool>) return v != I(0);
  else return static_cast<O>(v);
}

template <typename O, typename I, typename F>
inline void unary_row(O* __restrict o, const I* __restrict x, std::int64_t n, std::int64_t so, std::int64_t sx,
                      F f) {
  if (so == 1 && sx == 1) {
    for (std::int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
  } else if (so == 1 && sx == 0) {
    const O v = f(x[0]);
    for (std::int64_t i = 0; i < n; ++i) o[i] = v;
  } else {
    for (std::int64_t i = 0; i < n; ++i) o[i * so] = f(x[i * sx]);
  }
}

// In-place ops (a.add_(b)) make `o` alias `a`; the contiguous loops read
// a[i] before writing o[i], so aliasing the same index is safe. They are
// not marked __restrict for that reason.
template <typename O, typename I, typename F>
inline void binary_row(O* o, const I* a, const I* b, std::int64_t n, std::int64_t so, std::int64_t sa,
                       std::int64_t sb, F f) {
  if (so == 1 && sa == 1 && sb == 1) {
    for (std::int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (so == 1 && sa == 1 && sb == 0) {
    const I bv = b[0];
    for (std::int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else if (so == 1 && sa == 0 && sb == 1) {
    const I av = a[0];
    for (std::int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) o[i * so] = f(a[i * sa], b[i * sb]);
  }
}

template <typename O, typename I, typename F>
void run_unary(const ElementwiseArgs& a, F f) {
  I slot{};
  char* base[2] = {reinterpret_cast<char*>(static_cast<O*>(a.out.data) + a.out.offset),
                   reinterpret_cast<char*>(operand_ptr<I>(a.in[0], &slot))};
  const std::int64_t es[2] = {sizeof(O), sizeof(I)};
  const detail::KernelOperand* ops[2] = {&a.out, &a.in[0]};
  for_each_row<2>(a, base, es, ops, [&](char* const* p, std::int64_t n, const std::int64_t* st) {
    unary_row(reinterpret_cast<O*>(p[0]), reinterpret_cast<const I*>(p[1]), n, st[0], st[1], f);
  });
}

template <typename O, typename I, typename F>
void run_binary(const ElementwiseArgs& a, F f) {
  I slot_a{}, slot_b{};
  char* base[3] = {reinterpret_cast<char*>(static_cast<O*>(a.out.data) + a.out.offset),
                   reinterpret_cast<char*>(operand_ptr<I>(a.in[0], &slot_a)),
                   reinterpret_cast<char*>(operand_ptr<I>(a.in[1], &slot_b))};
  const std::int64_t es[3] = {sizeof(O), sizeof(I), sizeof(I)};
  const detail::KernelOperand* ops[3] = {&a.out, &a.in[0], &a.in[1]};
  for_each_row<3>(a, base, es, ops, [&](char* const* p, std::int64_t n, const std::int64_t* st) {
    binary_row(reinterpret_cast<O*>(p[0]), reinterpret_cast<const I*>(p[1]), reinterpret_cast<const I*>(p[2]), n,
               st[0], st[1], st[2], f);
  });
}

// Integer arithmetic wraps on overflow, as in PyTorch: computed in the
// unsigned type (signed overflow is undefined behaviour in C++).
template <typename T>
T wrap(T a, T b, char op) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    const U x = static_cast<U>(a), y = static_cast<U>(b);
    return static_cast<T>(op == '+' ? x + y : op == '-' ? x - y : static_cast<U>(x * y));
  } else {
    return static_cast<T>(op == '+' ? a + b : op == '-' ? a - b : a * b);
  }
}

template <typename T>
T int_pow(T base, T exp) {
  if constexpr (std::is_same_v<T, bool>) {
    return exp ? base : true;
  } else {
    if (exp < 0) return base == 1 ? T(1) : (base == T(-1) ? (exp % 2 ? T(-1) : T(1)) : T(0));
    T result = 1;
    while (exp) {
      if (exp & 1) result = wrap(result, base, '*');
      base = wrap(base, base, '*');
      exp >>= 1;
    }
    return result;
  }
}

template <typename T>
void binary_typed(BinaryOp op, const ElementwiseArgs& a) {
  switch (op) {
    case BinaryOp::Add: return run_binary<T, T>(a, [](T x, T y) { return wrap(x, y, '+'); });
    case BinaryOp::Sub: return run_binary<T, T>(a, [](T x, T y) { return wrap(x, y, '-'); });
    case BinaryOp::Mul: return run_binary<T, T>(a, [](T x, T y) { return wrap(x, y, '*'); });
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<T>) return run_binary<T, T>(a, [](T x, T y) { return x / y; });
      else break;
    case BinaryOp::Pow:
      if constexpr (std::is_floating_point_v<T>) return run_binary<T, T>(a, [](T x, T y) { return std::pow(x, y); });
      else return run_binary<T, T>(a, [](T x, T y) { return int_pow(x, y); });
    case BinaryOp::Maximum:
      return run_binary<T, T>(a, [](T x, T y) { return x != x ? x : (y != y ? y : (x > y ? x : y)); });
    case BinaryOp::Minimum:
      return run_binary<T, T>(a, [](T x, T y) { return x != x ? x : (y != y ? y : (x < y ? x : y)); });
    case BinaryOp::Eq: return run_binary<bool, T>(a, [](T x, T y) { return x == y; });
    case BinaryOp::Ne: return run_binary<bool, T>(a, [](T x, T y) { return x != y; });
    case BinaryOp::Lt: return run_binary<bool, T>(a, [](T x, T y) { return x < y; });
    case BinaryOp::Le: return run_binary<bool, T>(a, [](T x, T y) { return x <= y; });
    case BinaryOp::Gt: return run_binary<bool, T>(a, [](T x, T y) { return x > y; });
    case BinaryOp::Ge: return run_binary<bool, T>(a, [](T x, T y) { return x >= y; });
    case BinaryOp::Count: break;
  }
  ANVIL_ASSERT(false, "binary op ", detail::name(op), " on ", to_string(dtype_v<T>));
}

template <typename T>
void unary_typed(UnaryOp op, const detail::UnaryParams& prm, const ElementwiseArgs& a) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::Exp: return run_unary<T, T>(a, [](T x) { return fast_exp(x); });
      case UnaryOp::Log: return run_unary<T, T>(a, [](T x) { return std::log(x); });
      case UnaryOp::Sqrt: return run_unary<T, T>(a, [](T x) { return std::sqrt(x); });
      case UnaryOp::Rsqrt: return run_unary<T, T>(a, [](T x) { return T(1) / std::sqrt(x); });
      case UnaryOp::Sin: return run_unary<T, T>(a, [](T x) { return std::sin(x); });
      case UnaryOp::Cos: return run_unary<T, T>(a, [](T x) { return std::cos(x); });
      case UnaryOp::Tanh: return run_unary<T, T>(a, [](T x) { return std::tanh(x); });
      case UnaryOp::Sigmoid: return run_unary<T, T>(a, [](T x) { return fast_sigmoid(x); });
      case UnaryOp::Reciprocal: return run_unary<T, T>(a, [](T x) { return T(1) / x; });
      default: break;
    }
  }
  switch (op) {
    case UnaryOp::Neg:
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
        return run_unary<T, T>(a, [](T x) { return wrap(T(0), x, '-'); });
      else if constexpr (!std::is_same_v<T, bool>) return run_unary<T, T>(a, [](T x) { return static_cast<T>(-x); });
      break;
    case UnaryOp::Abs:
      if constexpr (std::is_signed_v<T>) return run_unary<T, T>(a, [](T x) { return x < 0 ? wrap(T(0), x, '-') : x; });
      else return run_unary<T, T>(a, [](T x) { return x; });
    case UnaryOp::Relu: return run_unary<T, T>(a, [](T x) { return x < T(0) ? T(0) : x; });
    case UnaryOp::Sign:
      return run_unary<T, T>(a, [](T x) { return static_cast<T>((T(0) < x) - (x < T(0))); });
    case UnaryOp::Square: return run_unary<T, T>(a, [](T x) { return wrap(x, x, '*'); });
    case UnaryOp::LogicalNot: return run_unary<T, T>(a, [](T x) { return static_cast<T>(x == T(0)); });
    case UnaryOp::Clamp: {
      const double lo = prm.lo, hi = prm.hi;
      return run_unary<T, T>(a, [lo, hi](T x) {
        const double v = static_cast<double>(x);
        return v < lo ? static_cast<T>(lo) : (v > hi ? static_cast<T>(hi) : x);
      });
    }
    default: break;
  }
  ANVIL_ASSERT(false, "unary op ", detail::name(op), " on ", to_string(dtype_v<T>));
}

}  // namespace

void CpuBackend::copy(int, const ElementwiseArgs& a) {
  ANVIL_DISPATCH(a.out.dtype, O, ANVIL_DISPATCH(a.in[0].dtype, I, run_unary<O, I>(a, [](I x) {
                   return convert<O>(x);
                 })));
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

}  // namespace anvil::cpu_backend
