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
 * Everything here is double precision, so a device without fp64 cannot
 * produce these streams: its backend reports rand/randn/randint unsupported.
 *
 * Needs from the including prelude: ANVIL_FN (function qualifier), the types
 * anvil_u32, anvil_u64, anvil_i64, and ANVIL_SQRT_F64(x).
 */
#ifndef ANVIL_KERNELS_PHILOX_H
#define ANVIL_KERNELS_PHILOX_H

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
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += ANVIL_PHILOX_W0;
    k1 += ANVIL_PHILOX_W1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Lane `lane` (0..3) of the block at `ctr`. */
ANVIL_FN anvil_u32 anvil_philox_lane(anvil_u64 ctr, anvil_u64 seed, int lane) {
  anvil_u32 lanes[4];
  anvil_philox4(ctr, seed, lanes);
  return lanes[lane];
}

/* [0, 1) with 24 random bits: exact in f32 and f64. */
ANVIL_FN double anvil_u32_to_unit(anvil_u32 x) { return (double)(x >> 8) * (1.0 / 16777216.0); }

/* log(x) for x in (0, 1], from + - * / only: x = m * 2^e, m in [sqrt(1/2), sqrt(2)),
 * log(m) = 2 atanh(s), s = (m-1)/(m+1). */
ANVIL_FN double anvil_det_log(double x) {
  int e = 0;
  while (x < 0.70710678118654752440) { x = x * 2.0; e = e - 1; }
  double s = (x - 1.0) / (x + 1.0);
  double s2 = s * s;
  double term = s, sum = 0.0;
  for (int k = 0; k < 14; ++k) {
    sum = sum + term / (double)(2 * k + 1);
    term = term * s2;
  }
  return 2.0 * sum + (double)e * 0.69314718055994530942;
}

/* sin (which = 1) or cos (which = 0) of 2*pi*u for u in [0, 1): reduce to an
 * octant with exact arithmetic on u, then Taylor series on [-pi/4, pi/4]. */
ANVIL_FN double anvil_det_sincos_2pi(double u, int which) {
  double q = u * 4.0;                 /* quarter turns, exact */
  int quadrant = (int)(q + 0.5);      /* nearest quarter turn: 0..4 */
  double r = (q - (double)quadrant) * 1.57079632679489661923; /* in [-pi/4, pi/4] */
  double r2 = r * r;
  double s = r, c = 1.0, ts = r, tc = 1.0;
  for (int k = 1; k < 11; ++k) {
    ts = -ts * r2 / (double)((2 * k) * (2 * k + 1));
    tc = -tc * r2 / (double)((2 * k - 1) * (2 * k));
    s = s + ts;
    c = c + tc;
  }
  int qd = quadrant & 3;
  /* sin(a + qd*pi/2), cos(a + qd*pi/2) */
  double sin_v = qd == 0 ? s : qd == 1 ? c : qd == 2 ? -s : -c;
  double cos_v = qd == 0 ? c : qd == 1 ? -s : qd == 2 ? -c : s;
  return which ? sin_v : cos_v;
}

/* A standard normal from lanes 0 and 1 of one block (which = 0: cosine branch, 1: sine). */
ANVIL_FN double anvil_normal_from(anvil_u32 a, anvil_u32 b, int which) {
  double u1 = ((double)(a >> 8) + 1.0) * (1.0 / 16777216.0); /* (0, 1]: log is finite */
  double u2 = anvil_u32_to_unit(b);
  double radius = ANVIL_SQRT_F64(-2.0 * anvil_det_log(u1));
  return radius * anvil_det_sincos_2pi(u2, which);
}

/* Element i of a standard-normal fill (see the stream layout above). */
ANVIL_FN double anvil_normal_at(anvil_u64 seed, anvil_u64 offset, anvil_u64 i) {
  anvil_u32 lanes[4];
  anvil_philox4(offset + (i >> 1), seed, lanes);
  return anvil_normal_from(lanes[0], lanes[1], (int)(i & 1));
}

ANVIL_FN double anvil_uniform_at(anvil_u64 seed, anvil_u64 offset, anvil_u64 i) {
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

ANVIL_FN anvil_i64 anvil_randint_at(anvil_u64 seed, anvil_u64 offset, anvil_u64 i, anvil_i64 low,
                                    anvil_i64 high) {
  anvil_u32 lanes[4];
  anvil_philox4(offset + (i >> 2), seed, lanes);
  return anvil_randint_from(lanes, i, low, high);
}

#endif
