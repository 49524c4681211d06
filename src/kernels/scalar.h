/* What every elementwise op (UnaryOp, BinaryOp in src/core/backend.h) means,
 * per element: the ONE definition, for the CPU and every device.
 *
 * Compiled three ways, after a prelude that supplies the vocabulary:
 *   OpenCL C and CUDA (NVRTC): prelude_opencl.h / prelude_cuda.h, then
 *     scalar.kern binds the kernels' op names to these functions;
 *   C++ (the CPU backend): prelude_cpp.h, through src/backends/cpu/scalar_ops.h.
 * So it is written in what the three share: no templates, no headers, no
 * overloading of its own names, the prelude's fixed-width types, and math
 * through the overloaded names exp, log, sqrt, sin, cos, tanh, pow, fabs,
 * log1p, expm1, erf, floor, ceil, rint, atan, asin, acos, atan2, copysign, sinh,
 * cosh, asinh, acosh, atanh, hypot, fmod.
 * The prelude also names the functions: ANVIL_SCALAR_NAME(anvil_f32, exp)
 * is anvil_f32_exp on the devices and the overload anvil_exp(float) in C++.
 *
 * Compute types: anvil_f32, anvil_f64 (where the prelude defines
 * ANVIL_HAS_FP64), anvil_i32, anvil_i64, anvil_u8 (also bool, held as 0/1).
 * Comparisons and logical_not return int 0/1.
 *
 * The meaning, PyTorch 1.13's wherever it defines one (tests/test_conformance.cpp
 * holds the CPU to PyTorch and every device to the CPU):
 *  - floats follow IEEE 754: NaN in gives NaN out, except sign(NaN) = 0,
 *    logical_not(NaN) = 0 and pow's C99 cases (pow(NaN, 0) = pow(1, NaN) = 1);
 *    -0 and denormals are kept (relu(-0) = -0, abs(-0) = +0, sign(±0) = +0);
 *  - maximum/minimum propagate NaN; on equal operands (+0 and -0) they return
 *    b, as PyTorch's vectorised CPU loop does;
 *  - clamp(x, lo, hi) = minimum(maximum(x, lo), hi): a NaN x or bound gives
 *    NaN, lo > hi gives hi (torch.clamp's vectorised CPU loop; its scalar
 *    tail and clamp_min alone ignore a NaN bound);
 *  - relu(x) = x < 0 ? 0 : x, so relu(NaN) = NaN; relu_backward(g, y) =
 *    y <= 0 ? 0 : g, so a NaN y passes g (threshold_backward);
 *  - integer add, sub, mul, neg, abs, square and pow wrap around modulo 2^bits
 *    (computed in the unsigned type: signed overflow is undefined in C, C++
 *    and OpenCL C); abs(INT_MIN) = INT_MIN, as in PyTorch;
 *  - integer pow: b >= 0 by squaring; b < 0 gives 1 for a = 1, ±1 for a = -1
 *    (by b's parity) and 0 otherwise (PyTorch's tensor ** tensor);
 *  - integer div truncates; x / 0 = 0 and INT_MIN / -1 = INT_MIN (PyTorch
 *    raises ZeroDivisionError; a kernel cannot). The frontend never reaches
 *    it: true division of integers computes in f32, as in PyTorch.
 *  - transcendental functions are the platform's (prelude), within the ulp
 *    bounds stated in tests/test_conformance.cpp; their special values
 *    (exp(-inf) = 0, log(0) = -inf, sqrt(-0) = -0, log1p(-1) = -inf,
 *    expm1(-inf) = -1, erf(±inf) = ±1, atan(±inf) = ±pi/2 rounded,
 *    asin(±0) = ±0, asin and acos of |x| > 1 = NaN, sinh(±0) = asinh(±0) = ±0,
 *    cosh(±inf) = inf, acosh(1) = 0, acosh(x < 1) = NaN, atanh(±1) = ±inf,
 *    atanh of |x| > 1 = NaN, sinh and cosh overflow to ±inf, …) are exact;
 *  - atan2(a, b) is the platform's, with C99's special values: the signs of
 *    zeros and infinities pick the quadrant (atan2(±0, -0) = ±pi,
 *    atan2(±inf, -inf) = ±3pi/4), as NumPy and PyTorch;
 *  - copysign(a, b) is |a| with the sign bit of b, a NaN b's included
 *    (the array API's signbit reads it there);
 *  - bitwise_and/or/xor: integers and bool; shifts: integers, with NumPy's
 *    and PyTorch 2's meaning for every count (1.13 left it to the CPU):
 *    a << b and a >> b are 0 for b >= bits or b < 0, except that >> of a
 *    negative a gives -1 there; >> is arithmetic (rounds towards -inf);
 *    << wraps modulo 2^bits;
 *  - isnan, isinf, isfinite test by arithmetic (x - x is 0 exactly when x is
 *    finite), as no dialect here runs with fast math; integers are finite;
 *  - hypot is the platform's (no overflow in the squares: hypot(±inf, NaN) =
 *    inf); logaddexp(a, b) = max + log1p(exp(-|a - b|)), a + log 2 on equal
 *    operands (so inf and -inf pairs give themselves, not NaN); logaddexp2
 *    the same in base 2 (a + 1 on equal operands);
 *  - floor_divide and remainder are Python's // and % (the array API's): the
 *    remainder takes the divisor's sign, a zero remainder is a zero of the
 *    divisor's sign, a finite a % ±inf is a or ±inf; floor_divide where an
 *    operand is not finite or b = 0 is floor(a / b). Integers: b = 0 gives 0
 *    for both (PyTorch raises; a kernel cannot), INT_MIN // -1 = INT_MIN;
 *  - floor, ceil and round (half to even) keep ±0, ±inf and NaN; on integer
 *    tensors they are the identity, decided in the frontend (no integer
 *    kernel), as in PyTorch.
 */
#ifndef ANVIL_KERNELS_SCALAR_H
#define ANVIL_KERNELS_SCALAR_H

/* ANVIL_SCALAR_FN(T, op): the function for type T; T may itself be a macro (TC). */
#define ANVIL_SCALAR_FN(T, op) ANVIL_SCALAR_NAME(T, op)

/* 1/sqrt(2), for gelu (a literal: M_SQRT1_2 is not in every dialect) */
#define ANVIL_SQRT1_2 0.70710678118654752440
/* 1/sqrt(2 pi), the normal density at 0, for gelu's derivative */
#define ANVIL_1_SQRT_2PI 0.39894228040143267794

/* ---- ops every type shares (T the type) ---- */
#define ANVIL_SCALAR_COMMON(T)                                              \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, logical_not)(T x) { return x == (T)0; } \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, eq)(T a, T b) { return a == b; }        \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, ne)(T a, T b) { return a != b; }        \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, lt)(T a, T b) { return a < b; }         \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, le)(T a, T b) { return a <= b; }        \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, gt)(T a, T b) { return a > b; }         \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, ge)(T a, T b) { return a >= b; }

/* clamp(x, lo, hi) = minimum(maximum(x, lo), hi), after maximum/minimum */
#define ANVIL_SCALAR_CLAMP(T)                                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, clamp)(T x, T lo, T hi) {                         \
    return ANVIL_SCALAR_NAME(T, minimum)(ANVIL_SCALAR_NAME(T, maximum)(x, lo), hi); \
  }

/* relu of a signed type; unsigned types have relu(x) = x */
#define ANVIL_SCALAR_RELU(T) \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, relu)(T x) { return x < (T)0 ? (T)0 : x; }

/* The activations' backward passes, g the incoming gradient: ATen's
 * threshold_backward(g, y, 0), sigmoid_backward(g, y), tanh_backward(g, y)
 * of the output y; gelu_backward(g, x) (exact) and softplus_backward(g, x,
 * 1, 20) of the input x, in ATen's order of operations. */
#define ANVIL_SCALAR_ACTIVATION_BACKWARD(T)                                                  \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, relu_backward)(T g, T y) { return y <= (T)0 ? (T)0 : g; }  \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sigmoid_backward)(T g, T y) { return g * ((T)1 - y) * y; } \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, tanh_backward)(T g, T y) { return g * ((T)1 - y * y); }    \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, gelu_backward)(T g, T x) {                                 \
    T cdf = (T)0.5 * ((T)1 + erf(x * (T)ANVIL_SQRT1_2));                                     \
    T pdf = (T)ANVIL_1_SQRT_2PI * exp(x * x * (T)(-0.5));                                    \
    return g * (cdf + x * pdf);                                                              \
  }                                                                                          \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, softplus_backward)(T g, T x) {                             \
    T z = exp(x);                                                                            \
    return x > (T)20 ? g : g * z / (z + (T)1);                                               \
  }

/* ---- floating point ---- */
#define ANVIL_SCALAR_FLOAT(T)                                                                            \
  ANVIL_SCALAR_COMMON(T)                                                                                 \
  ANVIL_SCALAR_RELU(T)                                                                                   \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, neg)(T x) { return -x; }                                               \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, abs)(T x) { return fabs(x); }                                          \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, exp)(T x) { return exp(x); }                                           \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, log)(T x) { return log(x); }                                           \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sqrt)(T x) { return sqrt(x); }                                         \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, rsqrt)(T x) { return (T)1 / sqrt(x); }                                 \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sin)(T x) { return sin(x); }                                           \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, cos)(T x) { return cos(x); }                                           \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, tanh)(T x) { return tanh(x); }                                         \
  /* exp(-x) = inf for x < -88 (f32) gives 1 / inf = 0, PyTorch's value */                               \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sigmoid)(T x) { return (T)1 / ((T)1 + exp(-x)); }                      \
  /* (x > 0) - (x < 0): 0 for NaN and +0 for both zeros, as torch.sign */                                \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sign)(T x) { return (T)((x > (T)0) - (x < (T)0)); }                    \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, square)(T x) { return x * x; }                                         \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, reciprocal)(T x) { return (T)1 / x; }                                  \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, log1p)(T x) { return log1p(x); }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, expm1)(T x) { return expm1(x); }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, erf)(T x) { return erf(x); }                                           \
  /* x/2 (1 + erf(x/sqrt 2)) as ATen: gelu(-0) = -0, gelu(-inf) = NaN */                                 \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, gelu)(T x) { return x * (T)0.5 * ((T)1 + erf(x * (T)ANVIL_SQRT1_2)); } \
  /* beta 1, threshold 20, as F.softplus: x above 20, else log1p(exp(x)) */                              \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, softplus)(T x) { return x > (T)20 ? x : log1p(exp(x)); }               \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, floor)(T x) { return floor(x); }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, ceil)(T x) { return ceil(x); }                                         \
  /* rint: half to even in the default rounding mode, as torch.round */                                  \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, round)(T x) { return rint(x); }                                        \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, atan)(T x) { return atan(x); }                                         \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, asin)(T x) { return asin(x); }                                         \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, acos)(T x) { return acos(x); }                                         \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sinh)(T x) { return sinh(x); }                                         \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, cosh)(T x) { return cosh(x); }                                         \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, asinh)(T x) { return asinh(x); }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, acosh)(T x) { return acosh(x); }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, atanh)(T x) { return atanh(x); }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, add)(T a, T b) { return a + b; }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sub)(T a, T b) { return a - b; }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, mul)(T a, T b) { return a * b; }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, div)(T a, T b) { return a / b; }                                       \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, pow)(T a, T b) { return pow(a, b); }                                   \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, atan2)(T a, T b) { return atan2(a, b); }                               \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, copysign)(T a, T b) { return copysign(a, b); }                         \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, isnan)(T x) { return x != x; }                                       \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, isinf)(T x) { return x == x && x - x != (T)0; }                      \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, isfinite)(T x) { return x - x == (T)0; }                             \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, hypot)(T a, T b) { return hypot(a, b); }                               \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, logaddexp)(T a, T b) {                                                 \
    if (a == b) return a + (T)0.69314718055994530942;                                                    \
    T hi = a != a || b != b ? a + b : a > b ? a : b;                                                     \
    return hi + log1p(exp(-fabs(a - b)));                                                                \
  }                                                                                                      \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, logaddexp2)(T a, T b) {                                                \
    if (a == b) return a + (T)1;                                                                         \
    T hi = a != a || b != b ? a + b : a > b ? a : b;                                                     \
    return hi + log1p(exp2(-fabs(a - b))) * (T)1.44269504088896340736;                                   \
  }                                                                                                      \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, remainder)(T a, T b) {                                                 \
    T m = fmod(a, b);                                                                                    \
    if (m == (T)0) return copysign((T)0, b);                                                             \
    return (b < (T)0) != (m < (T)0) ? m + b : m;                                                         \
  }                                                                                                      \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, floor_divide)(T a, T b) {                                              \
    T q = a / b;                                                                                         \
    if (b == (T)0 || a - a != (T)0 || b - b != (T)0) return floor(q);                                    \
    T m = fmod(a, b);                                                                                    \
    T d = (a - m) / b;                                                                                   \
    if (m != (T)0 && (b < (T)0) != (m < (T)0)) d -= (T)1;                                                \
    if (d == (T)0) return copysign((T)0, q);                                                             \
    T f = floor(d);                                                                                      \
    return d - f > (T)0.5 ? f + (T)1 : f;                                                                \
  }                                                                                                      \
  /* x != x is the NaN test of every dialect (no isnan overload needed) */                               \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, maximum)(T a, T b) { return a != a ? a : b != b ? b : a > b ? a : b; } \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, minimum)(T a, T b) { return a != a ? a : b != b ? b : a < b ? a : b; } \
  ANVIL_SCALAR_CLAMP(T)                                                                                  \
  ANVIL_SCALAR_ACTIVATION_BACKWARD(T)

/* ---- integers: T the type, UT its unsigned twin (wrap-around arithmetic) ---- */
#define ANVIL_SCALAR_INT(T, UT)                                                 \
  ANVIL_SCALAR_COMMON(T)                                                        \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, add)(T a, T b) { return (T)((UT)a + (UT)b); } \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sub)(T a, T b) { return (T)((UT)a - (UT)b); } \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, mul)(T a, T b) { return (T)((UT)a * (UT)b); } \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, neg)(T x) { return (T)((UT)0 - (UT)x); }      \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, square)(T x) { return (T)((UT)x * (UT)x); }   \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, maximum)(T a, T b) { return a > b ? a : b; }  \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, minimum)(T a, T b) { return a < b ? a : b; }  \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, bitwise_and)(T a, T b) { return (T)(a & b); } \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, bitwise_or)(T a, T b) { return (T)(a | b); }  \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, bitwise_xor)(T a, T b) { return (T)(a ^ b); } \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, isnan)(T x) { return (void)x, 0; }          \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, isinf)(T x) { return (void)x, 0; }          \
  ANVIL_FN int ANVIL_SCALAR_NAME(T, isfinite)(T x) { return (void)x, 1; }       \
  ANVIL_SCALAR_CLAMP(T)                                                         \
  /* b >= 0: square and multiply, wrapping */                                   \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, pow_nonneg)(T a, T b) {                       \
    UT r = (UT)1, x = (UT)a;                                                    \
    while (b != (T)0) {                                                         \
      if ((b & (T)1) != (T)0) r = (UT)(r * x);                                  \
      b = (T)(b >> 1);                                                          \
      x = (UT)(x * x);                                                          \
    }                                                                           \
    return (T)r;                                                                \
  }

/* signed integers: T, its unsigned twin UT */
#define ANVIL_SCALAR_SIGNED(T, UT)                                                                  \
  ANVIL_SCALAR_INT(T, UT)                                                                           \
  ANVIL_SCALAR_RELU(T)                                                                              \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, abs)(T x) { return x < (T)0 ? ANVIL_SCALAR_NAME(T, neg)(x) : x; } \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sign)(T x) { return (T)((x > (T)0) - (x < (T)0)); }               \
  /* b == -1 negates: INT_MIN / -1 traps on x86 */                                                  \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, div)(T a, T b) {                                                  \
    return b == (T)0 ? (T)0 : b == (T)(-1) ? ANVIL_SCALAR_NAME(T, neg)(a) : (T)(a / b);             \
  }                                                                                                 \
  /* Python's // and %: the quotient rounded down, the remainder the divisor's sign */              \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, floor_divide)(T a, T b) {                                         \
    if (b == (T)0) return (T)0;                                                                     \
    if (b == (T)(-1)) return ANVIL_SCALAR_NAME(T, neg)(a);                                          \
    T q = (T)(a / b);                                                                               \
    return (T)(a % b) != (T)0 && (a < (T)0) != (b < (T)0) ? (T)(q - (T)1) : q;                      \
  }                                                                                                 \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, remainder)(T a, T b) {                                            \
    if (b == (T)0 || b == (T)(-1)) return (T)0;                                                     \
    T r = (T)(a % b);                                                                               \
    return r != (T)0 && (r < (T)0) != (b < (T)0) ? (T)(r + b) : r;                                  \
  }                                                                                                 \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, pow)(T a, T b) {                                                  \
    if (b >= (T)0) return ANVIL_SCALAR_NAME(T, pow_nonneg)(a, b);                                   \
    if (a == (T)1) return (T)1;                                                                     \
    if (a == (T)(-1)) return (b & (T)1) != (T)0 ? (T)(-1) : (T)1;                                   \
    return (T)0;                                                                                    \
  }                                                                                                 \
  /* a count outside [0, bits): 0, and the sign (0 or -1) for >>; >> of a */                        \
  /* negative a as ~(~a >> b), so no signed value is shifted */                                     \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, bitwise_left_shift)(T a, T b) {                                   \
    return b < (T)0 || b >= (T)(sizeof(T) * 8) ? (T)0 : (T)((UT)a << b);                            \
  }                                                                                                 \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, bitwise_right_shift)(T a, T b) {                                  \
    T s = b < (T)0 || b >= (T)(sizeof(T) * 8) ? (T)(sizeof(T) * 8 - 1) : b;                         \
    return a < (T)0 ? (T) ~(~a >> s) : (T)(a >> s);                                                 \
  }

/* unsigned integers (u8, and bool held as u8 0/1) */
#define ANVIL_SCALAR_UNSIGNED(T)                                                                    \
  ANVIL_SCALAR_INT(T, T)                                                                            \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, abs)(T x) { return x; }                                           \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, relu)(T x) { return x; }                                          \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, sign)(T x) { return (T)(x != (T)0); }                             \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, div)(T a, T b) { return b == (T)0 ? (T)0 : (T)(a / b); }          \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, floor_divide)(T a, T b) { return b == (T)0 ? (T)0 : (T)(a / b); } \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, remainder)(T a, T b) { return b == (T)0 ? (T)0 : (T)(a % b); }    \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, pow)(T a, T b) { return ANVIL_SCALAR_NAME(T, pow_nonneg)(a, b); } \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, bitwise_left_shift)(T a, T b) {                                   \
    return b >= (T)(sizeof(T) * 8) ? (T)0 : (T)(a << b);                                            \
  }                                                                                                 \
  ANVIL_FN T ANVIL_SCALAR_NAME(T, bitwise_right_shift)(T a, T b) {                                  \
    return b >= (T)(sizeof(T) * 8) ? (T)0 : (T)(a >> b);                                            \
  }

ANVIL_SCALAR_FLOAT(anvil_f32)
#ifdef ANVIL_HAS_FP64
ANVIL_SCALAR_FLOAT(anvil_f64)
#endif
ANVIL_SCALAR_SIGNED(anvil_i32, anvil_u32)
ANVIL_SCALAR_SIGNED(anvil_i64, anvil_u64)
ANVIL_SCALAR_UNSIGNED(anvil_u8)

#endif
