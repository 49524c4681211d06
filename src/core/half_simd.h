// Eight 16-bit floats at a time on x86 (F16C for f16, AVX2 for bf16), inline
// so that a loop can convert in registers: the bulk conversions of half.cpp
// and the CPU's fused 16-bit elementwise rows (cpu_elementwise.cpp) are built
// from these. Bit for bit the scalar conversions of src/kernels/half.h except
// where a lane is NaN: each function says so and reports it, and the caller
// converts those eight with the scalar rule (Note [F16C keeps our meaning
// except for NaN] in half.cpp).
//
// The functions carry a target attribute, so a caller must carry one that
// includes it (ANVIL_TARGET_HALF_ROWS includes both) and must check at run
// time that the CPU has it (cpu_has_f16c(), cpu_has_avx2()). Intrinsics go in
// plain functions, never in lambdas: clang 14 gives a lambda no target
// attribute of its enclosing function.
//
//   #ifdef ANVIL_HALF_SIMD
//   ANVIL_TARGET_HALF_ROWS void row(const Half* h, ...) {  // called where cpu_has_f16c()
//     alignas(32) float x[8];
//     if (load8_exact(h, x)) { ... } else { /* the scalar conversion of these 8 */ }
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#define ANVIL_HALF_SIMD 1

#include <immintrin.h>

#include "core/half.h"

#define ANVIL_TARGET_AVX __attribute__((target("avx"), always_inline))
#define ANVIL_TARGET_F16C __attribute__((target("avx,f16c"), always_inline))
#define ANVIL_TARGET_AVX2 __attribute__((target("avx2"), always_inline))
// Both: the fused elementwise rows, which convert f16 or bf16 and run the
// op's float loop between (vectorised with AVX2 there).
#define ANVIL_TARGET_HALF_ROWS __attribute__((target("avx2,f16c")))

namespace anvil::detail {

// What this CPU has, asked once through CPUID (half.cpp).
bool cpu_has_f16c() noexcept;
bool cpu_has_avx2() noexcept;

// |h| > inf on eight f16 lanes (signed 16-bit compare: both sides are below
// 0x8000): a lane is a NaN, which vcvtph2ps would quieten.
ANVIL_TARGET_F16C inline bool f16x8_has_nan(__m128i h) noexcept {
  const __m128i magnitude = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
  return _mm_movemask_epi8(_mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7c00))) != 0;
}

ANVIL_TARGET_AVX inline bool f32x8_has_nan(__m256 f) noexcept {
  return _mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)) != 0;
}

// The top 16 bits of 8 f32 lanes, rounded to nearest even (not for NaN: the
// scalar rule keeps the payload's top bits and never makes inf).
ANVIL_TARGET_AVX2 inline __m256i round_to_bf16_bits(__m256i u) noexcept {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
}

// Eight values from src widened into dst (32-byte aligned). False, with dst
// untouched, when one is a NaN: F16C would set a signalling NaN's quiet bit.
ANVIL_TARGET_F16C inline bool load8_exact(const Half* src, float* dst) noexcept {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  if (f16x8_has_nan(h)) return false;
  _mm256_store_ps(dst, _mm256_cvtph_ps(h));
  return true;
}

// bf16 -> f32 is a shift, exact for every pattern: never false.
ANVIL_TARGET_AVX2 inline bool load8_exact(const BFloat16* src, float* dst) noexcept {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  _mm256_store_ps(dst, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  return true;
}

// Eight floats from src (32-byte aligned) rounded to nearest even into dst.
// False, with dst untouched, when one is a NaN (the scalar rule's payload).
ANVIL_TARGET_F16C inline bool store8_exact(const float* src, Half* dst) noexcept {
  const __m256 f = _mm256_load_ps(src);
  if (f32x8_has_nan(f)) return false;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  return true;
}

ANVIL_TARGET_AVX2 inline bool store8_exact(const float* src, BFloat16* dst) noexcept {
  const __m256 f = _mm256_load_ps(src);
  if (f32x8_has_nan(f)) return false;
  const __m256i r = round_to_bf16_bits(_mm256_castps_si256(f));
  // every lane is below 0x10000, so the unsigned saturating pack only packs
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
  return true;
}

}  // namespace anvil::detail

#endif
