/* Philox 4x32-10 and the distributions built on it — written ONCE for the
 * CPU (C++), OpenCL C and CUDA, so the same seed and shape give the same bits
 * on every device (DESIGN §4.10).
 *
 * Note [Bit-identical random numbers]
 * Uniforms are pure integer arithmetic. Normals (Box-Muller) need log, sqrt,
 * sin and cos, whose last bit differs between libms, so they are computed
 * here in double precision from + - * / and sqrt only (all correctly rounded
 * in IEEE 754 and in OpenCL/CUDA double arithmetic) and rounded to the
 * output type at the end. Every backend must compile this without
 * floating-point contraction (no FMA fusion): -ffp-contract=off on the CPU,
 * `#pragma OPENCL FP_CONTRACT OFF`, and --fmad=false for CUDA.
 *
 * Stream layout: element i of a fill at generator offset `off` uses counter
 * off + i/4, lane i%4 (uniform, randint); a normal uses counter off + i/2 and
 * lanes 0,1 (even i: the cosine branch, odd i: the sine branch). A fill of n
 * elements advances the generator offset by ceil(n/4) (normals: ceil(n/2)).
 *
 * Note [Random numbers without fp64]
 * A device without fp64 (most Intel and Apple GPUs) compiles this with
 * ANVIL_RNG_F32 defined: the same code in float. Uniforms and randint stay
 * bit-identical (24-bit uniforms are exact in float; randint is integer
 * arithmetic). Normals differ from the f64 path rounded to f32 by a few f32
 * ulps: the series for log and sin/cos converge to float precision, and the
 * error comes from rounding in them and in sqrt. Measured on PoCL over 2^20
 * normals (test_capabilities, RandomWithoutFp64): at most 4.8e-7 absolute
 * and 3.6e-7 relative for |z| > 0.5; the test asserts 2e-6 absolute.
 * Devices with fp64 keep the f64 path, bit-identical to the CPU.
 *
 * Needs from the including prelude: ANVIL_FN (function qualifier), the types
 * anvil_u32, anvil_u64, anvil_i64, and ANVIL_SQRT_F64(x) (overloaded: it
 * takes a float too).
 */
#ifndef ANVIL_KERNELS_PHILOX_H
#define ANVIL_KERNELS_PHILOX_H

/* The type normals (and uniforms' scaling) are computed in, and its literals. */
#ifdef ANVIL_RNG_F32
#define ANVIL_RNG_REAL float
#define ANVIL_RNG_C(x) x##f
#else
#define ANVIL_RNG_REAL double
#define ANVIL_RNG_C(x) x
#endif

#define ANVIL_PHILOX_M0 0xD2511F53u
#define ANVIL_PHILOX_M1 0xCD9E8D57u
#define ANVIL_PHILOX_W0 0x9E3779B9u
#define ANVIL_PHILOX_W1 0xBB67AE85u

/* All four lanes of Philox4x32-10 at 64-bit counter `ctr` with 64-bit key `seed`. */
ANVIL_FN void anvil_philox4(anvil_u64 ctr, anvil_u64 seed, anvil_u32* out) {
  anvil_u32 c0 = (anvil_u32)ctr, c1 = (anvil_u32)(ctr >> 32), c2 = 0u, c3 = 0u;
  anvil_u32 k0 = (anvil_u32)seed, k1 = (anvil_u32)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    anvil_u64 p0 = (anvil_u64)ANVIL_PHILOX_M0 * (anvil_u64)c0;
    anvil_u64 p1 = (anvil_u64)ANVIL_PHILOX_M1 * (anvil_u64)c2;
    anvil_u32 n0 = (anvil_u32)(p1 >> 32) ^ c1 ^ k0;
    anvil_u32 n1 = (anvil_u32)p1;
    anvil_u32 n2 = (anvil_u32)(p0 >> 32) ^ c3 ^ k1;
    anvil_u32 n3 = (anvil_u32)p0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += ANVIL_PHILOX_W0;
    k1 += ANVIL_PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* Lane `lane` (0..3) of the block at `ctr`. */
ANVIL_FN anvil_u32 anvil_philox_lane(anvil_u64 ctr, anvil_u64 seed, int lane) {
  anvil_u32 lanes[4];
  anvil_philox4(ctr, seed, lanes);
  return lanes[lane];
}

/* [0, 1) with 24 random bits: exact in f32 and f64. */
ANVIL_FN ANVIL_RNG_REAL anvil_u32_to_unit(anvil_u32 x) {
  return (ANVIL_RNG_REAL)(x >> 8) * (ANVIL_RNG_C(1.0) / ANVIL_RNG_C(16777216.0));
}

/* log(x) for x in (0, 1], from + - * / only: x = m * 2^e, m in [sqrt(1/2), sqrt(2)),
 * log(m) = 2 atanh(s), s = (m-1)/(m+1). */
ANVIL_FN ANVIL_RNG_REAL anvil_det_log(ANVIL_RNG_REAL x) {
  int e = 0;
  while (x < ANVIL_RNG_C(0.70710678118654752440)) {
    x = x * ANVIL_RNG_C(2.0);
    e = e - 1;
  }
  ANVIL_RNG_REAL s = (x - ANVIL_RNG_C(1.0)) / (x + ANVIL_RNG_C(1.0));
  ANVIL_RNG_REAL s2 = s * s;
  ANVIL_RNG_REAL term = s, sum = ANVIL_RNG_C(0.0);
  for (int k = 0; k < 14; ++k) {
    sum = sum + term / (ANVIL_RNG_REAL)(2 * k + 1);
    term = term * s2;
  }
  return ANVIL_RNG_C(2.0) * sum + (ANVIL_RNG_REAL)e * ANVIL_RNG_C(0.69314718055994530942);
}

/* sin (which = 1) or cos (which = 0) of 2*pi*u for u in [0, 1): reduce to an
 * octant with exact arithmetic on u, then Taylor series on [-pi/4, pi/4]. */
ANVIL_FN ANVIL_RNG_REAL anvil_det_sincos_2pi(ANVIL_RNG_REAL u, int which) {
  ANVIL_RNG_REAL q = u * ANVIL_RNG_C(4.0);    /* quarter turns, exact */
  int quadrant = (int)(q + ANVIL_RNG_C(0.5)); /* nearest quarter turn: 0..4 */
  ANVIL_RNG_REAL r = (q - (ANVIL_RNG_REAL)quadrant) * ANVIL_RNG_C(1.57079632679489661923); /* in [-pi/4, pi/4] */
  ANVIL_RNG_REAL r2 = r * r;
  ANVIL_RNG_REAL s = r, c = ANVIL_RNG_C(1.0), ts = r, tc = ANVIL_RNG_C(1.0);
  for (int k = 1; k < 11; ++k) {
    ts = -ts * r2 / (ANVIL_RNG_REAL)((2 * k) * (2 * k + 1));
    tc = -tc * r2 / (ANVIL_RNG_REAL)((2 * k - 1) * (2 * k));
    s = s + ts;
    c = c + tc;
  }
  int qd = quadrant & 3;
  /* sin(a + qd*pi/2), cos(a + qd*pi/2) */
  ANVIL_RNG_REAL sin_v = qd == 0 ? s : qd == 1 ? c : qd == 2 ? -s : -c;
  ANVIL_RNG_REAL cos_v = qd == 0 ? c : qd == 1 ? -s : qd == 2 ? -c : s;
  return which ? sin_v : cos_v;
}

/* A standard normal from lanes 0 and 1 of one block (which = 0: cosine branch, 1: sine). */
ANVIL_FN ANVIL_RNG_REAL anvil_normal_from(anvil_u32 a, anvil_u32 b, int which) {
  ANVIL_RNG_REAL u1 = ((ANVIL_RNG_REAL)(a >> 8) + ANVIL_RNG_C(1.0)) *
                      (ANVIL_RNG_C(1.0) / ANVIL_RNG_C(16777216.0)); /* (0, 1]: log is finite */
  ANVIL_RNG_REAL u2 = anvil_u32_to_unit(b);
  ANVIL_RNG_REAL radius = ANVIL_SQRT_F64(ANVIL_RNG_C(-2.0) * anvil_det_log(u1));
  return radius * anvil_det_sincos_2pi(u2, which);
}

/* Element i of a standard-normal fill (see the stream layout above). */
ANVIL_FN ANVIL_RNG_REAL anvil_normal_at(anvil_u64 seed, anvil_u64 offset, anvil_u64 i) {
  anvil_u32 lanes[4];
  anvil_philox4(offset + (i >> 1), seed, lanes);
  return anvil_normal_from(lanes[0], lanes[1], (int)(i & 1));
}

ANVIL_FN ANVIL_RNG_REAL anvil_uniform_at(anvil_u64 seed, anvil_u64 offset, anvil_u64 i) {
  return anvil_u32_to_unit(anvil_philox_lane(offset + (i >> 2), seed, (int)(i & 3)));
}

/* low + (x mod span), span = high - low > 0; spans past 2^32 take 64 bits
 * from lanes i%4 and (i+1)%4 of the same block. */
ANVIL_FN anvil_i64 anvil_randint_from(const anvil_u32* lanes, anvil_u64 i, anvil_i64 low, anvil_i64 high) {
  anvil_u64 span = (anvil_u64)(high - low);
  anvil_u64 x = (anvil_u64)lanes[i & 3];
  if (span > 0xFFFFFFFFul) x = (x << 32) | (anvil_u64)lanes[(i + 1) & 3];
  return low + (anvil_i64)(x % span);
}

ANVIL_FN anvil_i64 anvil_randint_at(anvil_u64 seed, anvil_u64 offset, anvil_u64 i, anvil_i64 low, anvil_i64 high) {
  anvil_u32 lanes[4];
  anvil_philox4(offset + (i >> 2), seed, lanes);
  return anvil_randint_from(lanes, i, low, high);
}

#endif
