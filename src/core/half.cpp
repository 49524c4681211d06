// Bulk 16-bit conversions (half.h). The scalar functions of
// src/kernels/half.h are the meaning; these only make whole runs fast.
//
// Note [F16C keeps our meaning except for NaN]
// vcvtph2ps (f16 -> f32) is exact, subnormals included, and vcvtps2ph with
// round-to-nearest-even (imm 0) rounds finite values, overflow to inf and
// subnormal results exactly as anvil_f32_to_f16 does. They differ on NaN
// only: both set the quiet bit of a signalling NaN, which the one meaning
// keeps as it is (NumPy's rule). So a block of 8 that holds a NaN takes the
// scalar path; NaNs are rare, and the answer stays the same bits on every
// CPU. An f32 denormal input turns to a signed zero either way (it is far
// below f16's smallest subnormal), so MXCSR's DAZ cannot change a result.
// tests/test_core_half.cpp holds this path to the scalar one.
#include "core/half.h"

#include "core/half_simd.h"

#ifdef ANVIL_HALF_SIMD
#include <cpuid.h>
#endif

namespace anvil::detail {

#ifdef ANVIL_HALF_SIMD
// CPUID leaf 1, ECX bit 29: GCC's __builtin_cpu_supports knows "f16c", clang
// 14's (the fuzz build) does not.
bool cpu_has_f16c() noexcept {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return has;
}

bool cpu_has_avx2() noexcept {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

namespace {

#ifdef ANVIL_HALF_SIMD
// bf16 -> f32 is a shift: GCC vectorises the portable loop well, so it
// needs no path of its own. f32 -> bf16 it vectorises too, but with a slow
// pack (0.7 ns per element against 0.15 here, measured on the 2-core EPYC):
// round to nearest even on 16 lanes, pack, and leave blocks with a NaN to the
// scalar rule (which keeps the payload's top bits and never makes inf).
__attribute__((target("avx2"))) void narrow_bf16_avx2(const float* __restrict src, BFloat16* __restrict dst,
                                                      std::int64_t n) noexcept {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 f0 = _mm256_loadu_ps(src + i), f1 = _mm256_loadu_ps(src + i + 8);
    // unordered: lane i of f0 or of f1 is a NaN, so one test covers all 16
    if (_mm256_movemask_ps(_mm256_cmp_ps(f0, f1, _CMP_UNORD_Q)) != 0) {
      for (std::int64_t j = i; j < i + 16; ++j) dst[j].bits = BF16Tag::from_f32(src[j]);
      continue;
    }
    // packus interleaves the 128-bit halves; the permute puts them in order
    const __m256i packed =
        _mm256_packus_epi32(round_to_bf16_bits(_mm256_castps_si256(f0)), round_to_bf16_bits(_mm256_castps_si256(f1)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_permute4x64_epi64(packed, 0xd8));
  }
  for (; i < n; ++i) dst[i].bits = BF16Tag::from_f32(src[i]);
}

// See Note [F16C keeps our meaning except for NaN].
__attribute__((target("avx,f16c"))) void widen_f16_f16c(const Half* __restrict src, float* __restrict dst,
                                                        std::int64_t n) noexcept {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    if (f16x8_has_nan(h)) {
      for (std::int64_t j = i; j < i + 8; ++j) dst[j] = F16Tag::to_f32(src[j].bits);
      continue;
    }
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = F16Tag::to_f32(src[i].bits);
}

__attribute__((target("avx,f16c"))) void narrow_f16_f16c(const float* __restrict src, Half* __restrict dst,
                                                         std::int64_t n) noexcept {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_loadu_ps(src + i);
    if (f32x8_has_nan(f)) {
      for (std::int64_t j = i; j < i + 8; ++j) dst[j].bits = F16Tag::from_f32(src[j]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i].bits = F16Tag::from_f32(src[i]);
}
#endif

}  // namespace

void widen_to_f32_portable(const BFloat16* src, float* dst, std::int64_t n) noexcept {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = BF16Tag::to_f32(src[i].bits);
}

void narrow_from_f32_portable(const float* src, BFloat16* dst, std::int64_t n) noexcept {
  for (std::int64_t i = 0; i < n; ++i) dst[i].bits = BF16Tag::from_f32(src[i]);
}

void widen_to_f32_portable(const Half* src, float* dst, std::int64_t n) noexcept {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = F16Tag::to_f32(src[i].bits);
}

void narrow_from_f32_portable(const float* src, Half* dst, std::int64_t n) noexcept {
  for (std::int64_t i = 0; i < n; ++i) dst[i].bits = F16Tag::from_f32(src[i]);
}

void widen_to_f32(const Half* src, float* dst, std::int64_t n) noexcept {
#ifdef ANVIL_HALF_SIMD
  if (cpu_has_f16c()) return widen_f16_f16c(src, dst, n);
#endif
  widen_to_f32_portable(src, dst, n);
}

void narrow_from_f32(const float* src, Half* dst, std::int64_t n) noexcept {
#ifdef ANVIL_HALF_SIMD
  if (cpu_has_f16c()) return narrow_f16_f16c(src, dst, n);
#endif
  narrow_from_f32_portable(src, dst, n);
}

void widen_to_f32(const BFloat16* src, float* dst, std::int64_t n) noexcept { widen_to_f32_portable(src, dst, n); }

void narrow_from_f32(const float* src, BFloat16* dst, std::int64_t n) noexcept {
#ifdef ANVIL_HALF_SIMD
  if (cpu_has_avx2()) return narrow_bf16_avx2(src, dst, n);
#endif
  narrow_from_f32_portable(src, dst, n);
}

const char* half_conversion_path() noexcept {
#ifdef ANVIL_HALF_SIMD
  if (cpu_has_f16c() && cpu_has_avx2()) return "f16: f16c, bf16: avx2";
  if (cpu_has_f16c()) return "f16: f16c, bf16: portable";
  if (cpu_has_avx2()) return "f16: portable, bf16: avx2";
#endif
  return "portable";
}

}  // namespace anvil::detail
