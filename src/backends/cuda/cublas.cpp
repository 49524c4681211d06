// The CUDA BLAS hook: cuBLAS GEMM for f32/f64 (f32 in TF32 only where
// set_float32_matmul_precision allows it), and cublasGemmEx with f32
// compute for f16/bf16, when the operands are BLAS-shaped. The shared
// backend runs our tiled kernel
// (src/kernels/gemm.kern) when this returns false: integer dtypes and odd
// strides.
#include <climits>
#include <cstdint>

#include "anvil/error.h"
#include "backends/cuda/runtime.h"
#include "core/backend_settings.h"

namespace anvil::cuda {

// Row-major C = op(A) @ op(B) is column-major C^T = op(B)^T @ op(A)^T, and a
// row-major matrix with leading dimension ld is its transpose in column-major
// order with the same ld: so cuBLAS gets B first, with the same transposes.
bool Queue::gemm_blas(const detail::GemmArgs& a, detail::CachingAllocator& allocator) {
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  if (!device_common::blas_ld(a.a, a.m, a.k, lda) || !device_common::blas_ld(a.b, a.k, a.n, ldb) ||
      !device_common::blas_ld(a.c, a.m, a.n, ldc))
    return false;
  if (a.a.batch_stride < 0 || a.b.batch_stride < 0 || a.c.batch_stride < 0) return false;
  for (std::int64_t v : {a.m, a.n, a.k, lda, ldb, ldc, a.batch})
    if (v > INT_MAX) return false;
  cublasHandle_t h = blas(allocator);
  if (a.dtype == DType::F32) {
    // TF32 only where asked (set_float32_matmul_precision "high"/"medium",
    // anvil::backends::cuda::matmul::set_allow_tf32): PyTorch's default is
    // strict f32. The mode is the handle's, set when the switch changed.
    const bool tf32 =
        detail::vendor_settings().matmul_precision.load(std::memory_order_relaxed) != detail::MatmulPrecision::Highest;
    if (tf32 != blas_tf32_) {
      const cublasStatus_t mode = cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
      ANVIL_CHECK(mode == CUBLAS_STATUS_SUCCESS, BackendError, "matmul: cublasSetMathMode failed with ",
                  cublasGetStatusName(mode), " on ", label_);
      blas_tf32_ = tf32;
    }
  }
  const cublasOperation_t ta = a.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = a.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
  auto call = [&](auto alpha, auto beta, auto* A, auto* B, auto* C, auto gemm, auto gemm_batched) {
    A += a.a.offset;
    B += a.b.offset;
    C += a.c.offset;
    if (a.batch == 1)
      return gemm(h, tb, ta, n, m, k, &alpha, B, static_cast<int>(ldb), A, static_cast<int>(lda), &beta, C,
                  static_cast<int>(ldc));
    return gemm_batched(h, tb, ta, n, m, k, &alpha, B, static_cast<int>(ldb), a.b.batch_stride, A,
                        static_cast<int>(lda), a.a.batch_stride, &beta, C, static_cast<int>(ldc), a.c.batch_stride,
                        static_cast<int>(a.batch));
  };
  cublasStatus_t st;
  if (is_half(a.dtype)) {
    // 16-bit storage, f32 accumulation and scalars (CUBLAS_COMPUTE_32F):
    // the meaning of f16/bf16 matmul on every device (DESIGN §4.2).
    const cudaDataType_t t = a.dtype == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
    const float alpha = static_cast<float>(a.alpha), beta = static_cast<float>(a.beta);
    const auto* A = static_cast<const std::uint16_t*>(a.a.data) + a.a.offset;
    const auto* B = static_cast<const std::uint16_t*>(a.b.data) + a.b.offset;
    auto* C = static_cast<std::uint16_t*>(a.c.data) + a.c.offset;
    if (a.batch == 1)
      st = cublasGemmEx(h, tb, ta, n, m, k, &alpha, B, t, static_cast<int>(ldb), A, t, static_cast<int>(lda), &beta, C,
                        t, static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else
      st = cublasGemmStridedBatchedEx(h, tb, ta, n, m, k, &alpha, B, t, static_cast<int>(ldb), a.b.batch_stride, A, t,
                                      static_cast<int>(lda), a.a.batch_stride, &beta, C, t, static_cast<int>(ldc),
                                      a.c.batch_stride, static_cast<int>(a.batch), CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT);
  } else if (a.dtype == DType::F32)
    st = call(static_cast<float>(a.alpha), static_cast<float>(a.beta), static_cast<const float*>(a.a.data),
              static_cast<const float*>(a.b.data), static_cast<float*>(a.c.data), cublasSgemm,
              cublasSgemmStridedBatched);
  else
    st = call(a.alpha, a.beta, static_cast<const double*>(a.a.data), static_cast<const double*>(a.b.data),
              static_cast<double*>(a.c.data), cublasDgemm, cublasDgemmStridedBatched);
  ANVIL_CHECK(st == CUBLAS_STATUS_SUCCESS, BackendError, "matmul: cuBLAS gemm failed with ", cublasGetStatusName(st),
              " on ", label_, " for [", a.batch, ", ", a.m, ", ", a.k, "] @ [", a.k, ", ", a.n, "] ",
              device_common::dtype_name(a.dtype));
  return true;
}

}  // namespace anvil::cuda
