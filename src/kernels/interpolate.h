/* Where interpolate reads (Note [Interpolation], src/core/backend.h): the
 * source taps of one output index along one dim, the ONE definition for the
 * CPU (src/backends/cpu/cpu_interpolate.cpp) and every device
 * (interpolate.kern). Written in what OpenCL C, CUDA and C++ share (see
 * scalar.h): the prelude's types, ANVIL_FN, ANVIL_CAT, no templates.
 *
 *   anvil_interp_taps_anvil_f32(o, in, out, scale, bilinear, align_corners, &i0, &i1, &l);
 *
 * Output index o of `out` reads input indices i0 <= i1 <= i0 + 1 of `in`
 * with weights 1 - l and l. i0 never decreases as o grows, which is what
 * lets the backward find the outputs that read an input by bisection.
 * Nearest computes in f32 whatever T is (PyTorch's nearest_idx); src >= 0,
 * so the casts to anvil_i64 are floor. */
#ifndef ANVIL_KERNELS_INTERPOLATE_H
#define ANVIL_KERNELS_INTERPOLATE_H

#define ANVIL_INTERP_TAPS(T)                                                                                      \
  ANVIL_FN void ANVIL_CAT(anvil_interp_taps_, T)(anvil_i64 o, anvil_i64 in, anvil_i64 out, T scale, int bilinear, \
                                                 int align_corners, anvil_i64* i0, anvil_i64* i1, T* l) {         \
    *l = (T)0;                                                                                                    \
    if (out == in) {                                                                                              \
      *i0 = o;                                                                                                    \
      *i1 = o;                                                                                                    \
      return;                                                                                                     \
    }                                                                                                             \
    if (!bilinear) {                                                                                              \
      anvil_i64 i = out == 2 * in ? o >> 1 : (anvil_i64)((anvil_f32)o * (anvil_f32)scale);                        \
      *i0 = i < in - 1 ? i : in - 1;                                                                              \
      *i1 = *i0;                                                                                                  \
      return;                                                                                                     \
    }                                                                                                             \
    T src = align_corners ? scale * (T)o : scale * ((T)o + (T)0.5) - (T)0.5;                                      \
    if (src < (T)0) src = (T)0;                                                                                   \
    anvil_i64 i = (anvil_i64)src;                                                                                 \
    *i0 = i;                                                                                                      \
    *i1 = i < in - 1 ? i + 1 : i;                                                                                 \
    *l = src - (T)i;                                                                                              \
  }

/* The first output index whose i0 is at least `target` (out when none):
 * bisection over the non-decreasing i0. */
#define ANVIL_INTERP_FIRST(T)                                                                                  \
  ANVIL_FN anvil_i64 ANVIL_CAT(anvil_interp_first_, T)(anvil_i64 target, anvil_i64 in, anvil_i64 out, T scale, \
                                                       int bilinear, int align_corners) {                      \
    anvil_i64 lo = 0, hi = out;                                                                                \
    while (lo < hi) {                                                                                          \
      anvil_i64 mid = lo + (hi - lo) / 2, i0, i1;                                                              \
      T l;                                                                                                     \
      ANVIL_CAT(anvil_interp_taps_, T)(mid, in, out, scale, bilinear, align_corners, &i0, &i1, &l);            \
      if (i0 < target)                                                                                         \
        lo = mid + 1;                                                                                          \
      else                                                                                                     \
        hi = mid;                                                                                              \
    }                                                                                                          \
    return lo;                                                                                                 \
  }

ANVIL_INTERP_TAPS(anvil_f32)
ANVIL_INTERP_FIRST(anvil_f32)
#ifdef ANVIL_HAS_FP64
ANVIL_INTERP_TAPS(anvil_f64)
ANVIL_INTERP_FIRST(anvil_f64)
#endif

#endif
