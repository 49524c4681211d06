/* f16 and bf16 <-> f32: the ONE definition of the 16-bit floats, for the CPU
 * (through src/core/half.h) and every device (through scalar.kern).
 *
 * A 16-bit value is held as its bit pattern (anvil_u16) and computed in f32:
 * PoCL has no half arithmetic and bf16 has none anywhere in OpenCL C, so a
 * kernel loads as f32, computes in f32 and stores back with these.
 * Written in integer arithmetic only: a GPU that flushes f32 denormals to
 * zero still converts subnormal halves exactly, and the rounding does not
 * depend on the device's float rounding mode.
 *
 * The meaning, NumPy's float16 (npy_floatbits_to_halfbits), bit for bit:
 *  - f32 -> 16 bits rounds to nearest, ties to even; above the largest
 *    finite value it rounds to inf (f16: |x| >= 65520, bf16: past 0x7f7f8000);
 *    subnormal results are rounded correctly (f16: below 2^-14), and
 *    |x| <= 2^-25 gives a signed zero (2^-25 itself is a tie, to even 0);
 *  - ±inf and ±0 are kept;
 *  - NaN stays NaN with its sign and the payload's top bits (so every
 *    16-bit NaN survives 16 -> 32 -> 16 unchanged); a payload whose kept
 *    bits are all zero becomes 1 rather than turning into inf. A signalling
 *    NaN is not quietened, as in NumPy (F16C's vcvtps2ph would set the
 *    quiet bit, which is why the CPU does not use it: one meaning).
 *  - 16 bits -> f32 is exact (bf16: the bits shifted up by 16).
 * PyTorch rounds finite values the same way; for NaN it writes a canonical
 * quiet NaN (0x7e00 / 0x7fc0) instead of keeping the payload.
 *
 * The prelude supplies ANVIL_FN, anvil_u16, anvil_u32, anvil_f32 and the bit
 * casts ANVIL_AS_U32(float) and ANVIL_AS_F32(uint).
 */
#ifndef ANVIL_KERNELS_HALF_H
#define ANVIL_KERNELS_HALF_H

ANVIL_FN anvil_f32 anvil_f16_to_f32(anvil_u16 h) {
  anvil_u32 sign = ((anvil_u32)h & 0x8000u) << 16;
  anvil_u32 e = ((anvil_u32)h >> 10) & 0x1fu;
  anvil_u32 m = (anvil_u32)h & 0x3ffu;
  if (e == 0x1fu) return ANVIL_AS_F32(sign | 0x7f800000u | (m << 13)); /* inf, NaN with its payload */
  if (e != 0u) return ANVIL_AS_F32(sign | ((e + 112u) << 23) | (m << 13));
  /* zero or subnormal m * 2^-24: exact in f32, whose result is normal */
  return ANVIL_AS_F32(sign | ANVIL_AS_U32((anvil_f32)m * ANVIL_AS_F32(0x33800000u)));
}

ANVIL_FN anvil_u16 anvil_f32_to_f16(anvil_f32 f) {
  anvil_u32 u = ANVIL_AS_U32(f);
  anvil_u32 sign = (u >> 16) & 0x8000u;
  anvil_u32 a = u & 0x7fffffffu;
  anvil_u32 r;
  if (a > 0x7f800000u) {
    r = 0x7c00u | ((a >> 13) & 0x3ffu);
    if (r == 0x7c00u) r = 0x7c01u;
  } else if (a >= 0x477ff000u) {
    r = 0x7c00u; /* >= 65520 (a tie that goes to the even inf) and inf */
  } else if (a >= 0x38800000u) {
    /* normal: rebias the exponent (127 - 15 = 112) and round 13 bits away;
     * a carry out of the mantissa bumps the exponent, as it should */
    r = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  } else if (a > 0x33000000u) {
    /* subnormal: round (1.m * 2^(e-127)) / 2^-24 = (1m) >> (126 - e) */
    anvil_u32 mant = (a & 0x7fffffu) | 0x800000u;
    anvil_u32 shift = 126u - (a >> 23);
    anvil_u32 rem = mant & ((1u << shift) - 1u);
    anvil_u32 halfway = 1u << (shift - 1u);
    r = mant >> shift;
    if (rem > halfway || (rem == halfway && (r & 1u) != 0u)) r += 1u;
  } else {
    r = 0u; /* |x| <= 2^-25 */
  }
  return (anvil_u16)(sign | r);
}

ANVIL_FN anvil_f32 anvil_bf16_to_f32(anvil_u16 h) { return ANVIL_AS_F32((anvil_u32)h << 16); }

ANVIL_FN anvil_u16 anvil_f32_to_bf16(anvil_f32 f) {
  anvil_u32 u = ANVIL_AS_U32(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    anvil_u32 r = u >> 16;
    return (anvil_u16)((r & 0x7fu) == 0u ? r | 1u : r);
  }
  return (anvil_u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif
