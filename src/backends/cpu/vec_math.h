// Transcendental functions written so that GCC vectorises loops calling them
// (branch-free, no libm calls). Scalar libm expf caps a loop at ~4 GB/s;
// these run at memory speed.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// Inlined into every loop that calls them, or the loop cannot vectorise: GCC
// otherwise keeps one out-of-line copy for the many kernel instantiations.
#define ANVIL_VEC_INLINE inline __attribute__((always_inline))

namespace anvil::cpu_backend {

ANVIL_VEC_INLINE float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// exp(x) for float: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2,
// a degree-6 polynomial for exp(r), and 2^n from the exponent bits.
// Max error ~2 ulp; exp(+large) = inf, exp(-large) = 0, exp(nan) = nan.
ANVIL_VEC_INLINE float fast_exp(float x) {
  const float hi = 88.7228391f, lo = -103.972076f;
  const float xc = x > hi ? hi : (x < lo ? lo : x);
  // Round to nearest with the 1.5*2^23 trick: vectorises, unlike nearbyint.
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n split into two factors so n down to -150 stays representable.
  const std::int32_t ni = static_cast<std::int32_t>(n);
  const std::int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = bits_to_float(static_cast<std::uint32_t>(n1 + 127) << 23);
  const float s2 = bits_to_float(static_cast<std::uint32_t>(n2 + 127) << 23);
  float result = p * s1 * s2;
  result = x > hi ? std::numeric_limits<float>::infinity() : result;
  result = x != x ? x : result;
  return result;
}

ANVIL_VEC_INLINE double fast_exp(double x) { return std::exp(x); }

ANVIL_VEC_INLINE float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }
ANVIL_VEC_INLINE double fast_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace anvil::cpu_backend
