// The C++ prelude of scalar.h, for the CPU backend: the same vocabulary as
// prelude_opencl.h and prelude_cuda.h (ANVIL_FN, the anvil_* fixed-width
// types, ANVIL_HAS_FP64, ANVIL_SCALAR_NAME) plus the math names scalar.h
// calls. Included only by src/backends/cpu/scalar_ops.h, inside its
// namespace and after <cmath>, <cstdint>, <cstring> (so it includes nothing).
//
// Everything is inlined into the CPU's loops, which is what lets GCC
// vectorise them: no call may stay out of line in a hot loop. Scalar libm
// expf caps a loop at ~4 GB/s, so exp(float) is a branch-free polynomial
// that vectorises (given -fno-trapping-math: Note [Vectorised elementwise
// loops] in CMakeLists.txt); the rest is libm.

// Inlined into every loop that calls them, or the loop cannot vectorise: GCC
// otherwise keeps one out-of-line copy for the many kernel instantiations.
#define ANVIL_FN inline __attribute__((always_inline))
#define ANVIL_HAS_FP64 1
// Overloads in C++: anvil_exp(float), anvil_exp(double), anvil_add(std::int32_t, …).
#define ANVIL_SCALAR_NAME(T, op) anvil_##op

typedef std::uint8_t anvil_u8;
typedef std::int32_t anvil_i32;
typedef std::uint32_t anvil_u32;
typedef std::int64_t anvil_i64;
typedef std::uint64_t anvil_u64;
typedef float anvil_f32;
typedef double anvil_f64;

using std::acos;
using std::acosh;
using std::asin;
using std::asinh;
using std::atan;
using std::atan2;
using std::atanh;
using std::ceil;
using std::copysign;
using std::cos;
using std::cosh;
using std::exp2;
using std::expm1;
using std::fabs;
using std::floor;
using std::fmod;
using std::hypot;
using std::log;
using std::log1p;
using std::pow;
using std::rint;
using std::sin;
using std::sinh;
using std::sqrt;

ANVIL_FN float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// c0 x^n + c1 x^(n-1) + ... + cn by Horner's rule, as written out: the
// polynomials below, each step p = p * x + c.
template <typename... C>
ANVIL_FN float horner(float x, float c0, C... rest) {
  float p = c0;
  ((p = p * x + rest), ...);
  return p;
}

// exp(x) for float: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2,
// a degree-6 polynomial for exp(r), and 2^n from the exponent bits.
// Max error ~2 ulp (tests/test_conformance.cpp); exp(+large) = inf,
// exp(x < ln 2^-150) = 0 (exp(-inf) = 0 exactly), exp(nan) = nan.
ANVIL_FN float exp(float x) {
  const float hi = 88.7228391f, lo = -103.972076f;
  const float xc = x > hi ? hi : (x < lo ? lo : x);
  // Round to nearest with the 1.5*2^23 trick: vectorises, unlike nearbyint.
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = horner(r, 1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f,
                   5.0000001201e-1f);
  p = p * r * r + r + 1.0f;
  // 2^n split into two factors so n down to -150 stays representable.
  const std::int32_t ni = static_cast<std::int32_t>(n);
  const std::int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = bits_to_float(static_cast<std::uint32_t>(n1 + 127) << 23);
  const float s2 = bits_to_float(static_cast<std::uint32_t>(n2 + 127) << 23);
  float result = p * s1 * s2;
  result = x > hi ? std::numeric_limits<float>::infinity() : result;
  // Below ln 2^-150 the true value rounds to 0; the clamped polynomial would
  // give the smallest denormal (and logsumexp over -inf a finite -103).
  result = x < lo ? 0.0f : result;
  result = x != x ? x : result;
  return result;
}

ANVIL_FN double exp(double x) { return std::exp(x); }

// tanh(x) for float, branch-free so that loops vectorise: libm's tanhf is a
// call per element (a GRU training step spent 8% of its time in it). Below
// |x| = 0.55 the odd Taylor series to x^19 (within 1.2 ulp); above,
// (1 - e^-2|x|) / (1 + e^-2|x|) with the exp above (within 1.8 ulp with a
// correctly rounded exp, checked against float64 tanh over [-12, 12]; the
// conformance test allows 5). ±inf gives ±1, NaN stays NaN, -0 stays -0.
ANVIL_FN float tanh(float x) {
  const float x2 = x * x;
  const float p =
      horner(x2, -2.3912911424e-04f, 5.9002744095e-04f, -1.4558343871e-03f, 3.5921280366e-03f, -8.8632355299e-03f,
             2.1869488536e-02f, -5.3968253968e-02f, 1.3333333333e-01f, -3.3333333333e-01f);
  const float series = x * (p * x2 + 1.0f);
  const float ax = std::fabs(x);
  const float t = exp(-2.0f * ax);
  const float far = std::copysign((1.0f - t) / (1.0f + t), x);
  return ax < 0.55f ? series : far;  // NaN fails the test and stays NaN in far
}

ANVIL_FN double tanh(double x) { return std::tanh(x); }

// erf(x) for float, branch-free so that loops vectorise: libm's erff is a
// call per element (9.4 ns on the 2-core Xeon, where GELU and its gradient
// took 19% of a ViT step on one thread). Below |x| = 0.921875 the odd Taylor
// series to x^23; above, 1 - erfc(|x|) with erfc(z) = t exp(-z^2 + P(t)),
// t = 1 / (1 + z/2), Numerical Recipes' erfcc (relative error below
// 1.2e-7), with the exp above. Within 3 ulp of float64 erf over [-6, 6] in
// float arithmetic (the conformance test allows 16). ±inf gives ±1, NaN
// stays NaN, -0 stays -0.
ANVIL_FN float erf(float x) {
  const float a = std::fabs(x), x2 = x * x;
  const float p = horner(x2, -1.2290555240e-09f, 1.4807192805e-08f, -1.6365844147e-07f, 1.6462114445e-06f,
                         -1.4925650248e-05f, 1.2055332627e-04f, -8.5483270232e-04f, 5.2239778452e-03f,
                         -2.6866171509e-02f, 1.1283791810e-01f, -3.7612637877e-01f, 1.1283792257e+00f);
  const float small = x * p;
  const float t = 1.0f / (1.0f + 0.5f * a);
  const float q = horner(t, 0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f,
                         0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f);
  const float large = std::copysign(1.0f - t * exp(q - a * a), x);
  return a < 0.921875f ? small : large;
}

ANVIL_FN double erf(double x) { return std::erf(x); }
