/* The CUDA prelude of the shared kernels (DESIGN §2 "Kernels written once").
 *
 * The same vocabulary as prelude_opencl.h, for NVRTC (src/backends/cuda/
 * nvrtc_compile.cpp): every .kern file is compiled as this prelude, then the
 * file, with the same defines as on OpenCL. Kernels are extern "C" so their
 * symbols are the names the host asks for. Work-item numbering follows
 * OpenCL: ANVIL_GID(d) = group * group size + local id in dimension d.
 */
#ifndef ANVIL_PRELUDE_CUDA_H
#define ANVIL_PRELUDE_CUDA_H

/* Note [Bit-identical random numbers] in philox.h: NVRTC runs with
 * --fmad=false, so no FMA contraction. */

#define ANVIL_KERNEL extern "C" __global__
#define ANVIL_GLOBAL
#define ANVIL_SHARED __shared__
#define ANVIL_BARRIER() __syncthreads()
#define ANVIL_FN static __device__ __forceinline__
#define ANVIL_RESTRICT __restrict__
#define ANVIL_UNROLL _Pragma("unroll")

#define ANVIL_CUDA_DIM(v, d) ((d) == 0 ? (v).x : (d) == 1 ? (v).y : (v).z)
#define ANVIL_GID(d)                                                                 \
  ((anvil_i64)ANVIL_CUDA_DIM(blockIdx, d) * (anvil_i64)ANVIL_CUDA_DIM(blockDim, d) + \
   (anvil_i64)ANVIL_CUDA_DIM(threadIdx, d))
#define ANVIL_LID(d) ((int)ANVIL_CUDA_DIM(threadIdx, d))
#define ANVIL_LSIZE(d) ((int)ANVIL_CUDA_DIM(blockDim, d))
#define ANVIL_GROUP(d) ((anvil_i64)ANVIL_CUDA_DIM(blockIdx, d))
#define ANVIL_NGROUPS(d) ((anvil_i64)ANVIL_CUDA_DIM(gridDim, d))
#define ANVIL_GSIZE(d) (ANVIL_NGROUPS(d) * (anvil_i64)ANVIL_LSIZE(d))

typedef unsigned char anvil_u8;
typedef unsigned short anvil_u16;
typedef int anvil_i32;
typedef unsigned int anvil_u32;
typedef long long anvil_i64;
typedef unsigned long long anvil_u64;
typedef float anvil_f32;
typedef double anvil_f64;
/* f16 and bf16 are stored as their bits and computed in f32 by half.h's
 * integer code, not cuda_fp16.h, whose __float2half writes a canonical NaN:
 * every device rounds as the CPU does. */
typedef unsigned short anvil_f16;
typedef unsigned short anvil_bf16;
/* Chunks of 1..16 bytes, each aligned to its size: the dense kernels' vector
 * loads and stores (dense.kern). */
typedef unsigned char anvil_v1;
typedef unsigned short anvil_v2;
typedef unsigned int anvil_v4;
typedef uint2 anvil_v8;
typedef uint4 anvil_v16;
#define ANVIL_AS_U32(f) __float_as_uint(f)
#define ANVIL_AS_F32(u) __uint_as_float(u)
#define ANVIL_HAS_FP64 1 /* every GPU NVRTC targets has fp64 */

#define ANVIL_INF __int_as_float(0x7f800000)
#define ANVIL_I64_MIN (-9223372036854775807LL - 1LL)
#define ANVIL_I64_MAX 9223372036854775807LL
#define ANVIL_SQRT_F64(x) sqrt(x)

#define ANVIL_CAT_(a, b) a##b
#define ANVIL_CAT(a, b) ANVIL_CAT_(a, b)
/* scalar.h's functions are named per type (no overloading in OpenCL C): anvil_f32_exp */
#define ANVIL_SCALAR_NAME(T, op) ANVIL_CAT(ANVIL_CAT(T, _), op)

#endif
