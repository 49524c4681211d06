/* The OpenCL prelude of the shared kernels (DESIGN §2 "Kernels written once").
 *
 * Every .kern file in src/kernels is compiled as: this prelude, then the .kern text,
 * with `#include "x"` lines resolved from the embedded sources (see
 * src/backends/common/kernel_sources.cpp). prelude_cuda.h defines the same
 * vocabulary, so keep kernels to it:
 *   ANVIL_KERNEL, ANVIL_GLOBAL, ANVIL_SHARED, ANVIL_BARRIER(), ANVIL_FN,
 *   ANVIL_RESTRICT, ANVIL_UNROLL (before a loop of constant trip count),
 *   ANVIL_GID(d), ANVIL_LID(d), ANVIL_GROUP(d), ANVIL_LSIZE(d), ANVIL_GSIZE(d),
 *   ANVIL_NGROUPS(d), the anvil_* fixed-width types, ANVIL_INF, ANVIL_CAT(),
 *   ANVIL_HAS_FP64 (where anvil_f64 exists), ANVIL_SCALAR_NAME(T, op) (scalar.h),
 *   ANVIL_AS_U32/ANVIL_AS_F32 (bit casts, half.h), anvil_v1..anvil_v16 (chunks).
 * Math uses the overloaded names (exp, fabs, pow), never expf/fmaxf.
 * Kernel arguments: no size_t, no bool (use anvil_i64 and int).
 */
#ifndef ANVIL_PRELUDE_OPENCL_H
#define ANVIL_PRELUDE_OPENCL_H

/* Note [Bit-identical random numbers] in philox.h: no FMA contraction. */
#pragma OPENCL FP_CONTRACT OFF
#ifdef ANVIL_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define ANVIL_KERNEL __kernel
#define ANVIL_GLOBAL __global
#define ANVIL_SHARED __local
#define ANVIL_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define ANVIL_FN static inline
#define ANVIL_RESTRICT restrict
#define ANVIL_UNROLL _Pragma("unroll")

#define ANVIL_GID(d) ((anvil_i64)get_global_id(d))
#define ANVIL_GSIZE(d) ((anvil_i64)get_global_size(d))
#define ANVIL_LID(d) ((int)get_local_id(d))
#define ANVIL_LSIZE(d) ((int)get_local_size(d))
#define ANVIL_GROUP(d) ((anvil_i64)get_group_id(d))
#define ANVIL_NGROUPS(d) ((anvil_i64)get_num_groups(d))

typedef uchar anvil_u8;
typedef ushort anvil_u16;
typedef int anvil_i32;
typedef uint anvil_u32;
typedef long anvil_i64;
typedef ulong anvil_u64;
typedef float anvil_f32;
/* f16 and bf16 are stored as their bits and computed in f32 (half.h) */
typedef ushort anvil_f16;
typedef ushort anvil_bf16;
/* Chunks of 1..16 bytes, each aligned to its size: the dense kernels' vector
 * loads and stores (dense.kern). */
typedef uchar anvil_v1;
typedef ushort anvil_v2;
typedef uint anvil_v4;
typedef uint2 anvil_v8;
typedef uint4 anvil_v16;
#define ANVIL_AS_U32(f) as_uint(f)
#define ANVIL_AS_F32(u) as_float(u)
#ifdef ANVIL_HAS_FP64
typedef double anvil_f64;
#else
/* Without fp64 any double is an error here, as it is on such a GPU, even on
 * drivers that would accept it (PoCL with ANVIL_OPENCL_NO_FP64=1). */
#define double anvil_this_device_has_no_fp64
#endif

#define ANVIL_INF INFINITY
#define ANVIL_I64_MIN (-9223372036854775807L - 1L)
#define ANVIL_I64_MAX 9223372036854775807L
#define ANVIL_SQRT_F64(x) sqrt(x)

#define ANVIL_CAT_(a, b) a##b
#define ANVIL_CAT(a, b) ANVIL_CAT_(a, b)
/* scalar.h's functions are named per type (no overloading in OpenCL C): anvil_f32_exp */
#define ANVIL_SCALAR_NAME(T, op) ANVIL_CAT(ANVIL_CAT(T, _), op)

#endif
