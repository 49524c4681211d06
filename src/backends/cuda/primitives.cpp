// The primitives on a CUDA device: the shared implementations of
// backends/common/device_primitives.h over this backend's stream, and GEMM
// through cuBLAS.
#include "backends/common/device_primitives.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "backends/cuda/cuda_backend.h"

namespace anvil::cuda {

namespace {

// Collects a kernel's arguments (each copied, so temporaries may die) and
// launches it on the device's stream.
class Launch {
 public:
  Launch(DeviceState& s, cudaKernel_t k) noexcept : s_(s), k_(k) {}
  // args_ points into storage_: a copy would point into the original.
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
  template <typename T>
  Launch& arg(const T& value) {
    return bytes(&value, sizeof(T));
  }
  Launch& buffer(const void* handle) { return arg(handle); }  // a device pointer, or null
  Launch& scalar(const kernels::ScalarArg& a) { return bytes(a.bytes, a.size); }
  Launch& bytes(const void* p, std::size_t n) {
    used_ = (used_ + 7) / 8 * 8;  // every argument 8-aligned: enough for any of ours
    ANVIL_ASSERT(used_ + n <= sizeof storage_ && count_ < kMaxArgs, "cuda: too many kernel arguments");
    std::memcpy(storage_ + used_, p, n);
    args_[count_++] = storage_ + used_;
    used_ += n;
    return *this;
  }
  // 1-D over n threads.
  void run(std::int64_t n, const char* op) {
    if (n <= 0) return;
    std::size_t block = 256;
    if (n < 256) {  // one block sized to the work, at least a warp
      block = 32;
      while (block < static_cast<std::size_t>(n)) block <<= 1;
    }
    const std::size_t global = (static_cast<std::size_t>(n) + block - 1) / block * block;
    run(1, &global, &block, op);
  }
  // OpenCL's geometry: `global` counts threads in each dimension.
  void run(unsigned dims, const std::size_t* global, const std::size_t* local, const char* op) {
    std::size_t g[3] = {1, 1, 1}, l[3] = {1, 1, 1};
    for (unsigned d = 0; d < dims; ++d) {
      l[d] = local[d];
      g[d] = global[d] / local[d];
    }
    ANVIL_CHECK(g[0] <= INT_MAX && g[1] <= 65535 && g[2] <= 65535, NotSupported, op, ": launch of [", g[0], ", ",
                g[1], ", ", g[2], "] blocks on ", s_.label(),
                "; expected at most [2^31-1, 65535, 65535] (CUDA's grid limits)");
    const dim3 grid(static_cast<unsigned>(g[0]), static_cast<unsigned>(g[1]), static_cast<unsigned>(g[2]));
    const dim3 block(static_cast<unsigned>(l[0]), static_cast<unsigned>(l[1]), static_cast<unsigned>(l[2]));
    ANVIL_CUDA_CHECK(s_.label(), cudaLaunchKernel(reinterpret_cast<const void*>(k_), grid, block, args_, 0, s_.stream));
    s_.track_locked(op);
  }

 private:
  static constexpr int kMaxArgs = 16;
  DeviceState& s_;
  cudaKernel_t k_;
  alignas(16) unsigned char storage_[1024];
  std::size_t used_ = 0;
  void* args_[kMaxArgs] = {};
  int count_ = 0;
};

// What device_primitives.h needs of a device, over a DeviceState whose lock
// the caller holds (and which is the thread's current device).
struct Queue {
  DeviceState& s;
  detail::CachingAllocator& allocator;

  explicit Queue(DeviceState& state) noexcept : s(state), allocator(state.allocator) {}
  template <typename Request>
  cudaKernel_t kernel(const Request& r) {
    return s.programs.kernel(r);
  }
  Launch launch(cudaKernel_t k) { return Launch(s, k); }
  void copy_within(void* dst, std::size_t dst_byte, const void* src, std::size_t src_byte, std::size_t bytes,
                   const char* op) {
    ANVIL_CUDA_CHECK(s.label(), cudaMemcpyAsync(static_cast<std::byte*>(dst) + dst_byte,
                                                static_cast<const std::byte*>(src) + src_byte, bytes,
                                                cudaMemcpyDeviceToDevice, s.stream));
    s.track_locked(op);
  }
  void* index_error_buffer_locked(const char* op, std::int64_t dim_size) {
    return s.index_error_buffer_locked(op, dim_size);
  }
  bool fp64() const noexcept { return true; }
  bool is_cpu() const noexcept { return false; }
  int compute_units() const noexcept { return s.entry().props.compute_units; }
  std::size_t local_size() const noexcept { return 256; }
  std::size_t max_work_group() const noexcept { return static_cast<std::size_t>(s.entry().max_threads_per_block); }
  const std::string& label() const noexcept { return s.label(); }
};

// Runs `body(queue)` as primitive `op` on cuda:index with its lock held.
template <typename Body>
void on_device(CudaBackend& b, int index, const char* op, Body&& body) {
  OpScope scope(op);
  DeviceState& s = b.state(index);
  std::lock_guard lock(s.mutex);
  s.make_current();
  Queue q(s);
  body(q);
}

}  // namespace

void CudaBackend::fill(int index, const detail::KernelOperand& out, std::int64_t numel, const Scalar& value) {
  on_device(*this, index, "fill", [&](Queue& q) { kernels::fill(q, out, numel, value); });
}

void CudaBackend::arange(int index, const detail::KernelOperand& out, std::int64_t numel, double start, double step) {
  on_device(*this, index, "arange", [&](Queue& q) { kernels::arange(q, out, numel, start, step); });
}

void CudaBackend::copy(int index, const detail::ElementwiseArgs& a) {
  on_device(*this, index, "copy", [&](Queue& q) { kernels::copy(q, a); });
}

void CudaBackend::unary(int index, detail::UnaryOp op, const detail::UnaryParams& params,
                        const detail::ElementwiseArgs& a) {
  on_device(*this, index, detail::name(op), [&](Queue& q) { kernels::unary(q, op, params, a); });
}

void CudaBackend::binary(int index, detail::BinaryOp op, const detail::ElementwiseArgs& a) {
  on_device(*this, index, detail::name(op), [&](Queue& q) { kernels::binary(q, op, a); });
}

void CudaBackend::where(int index, const detail::ElementwiseArgs& a) {
  on_device(*this, index, "where", [&](Queue& q) { kernels::where(q, a); });
}

void CudaBackend::reduce(int index, detail::ReduceOp op, const detail::ReduceArgs& a) {
  on_device(*this, index, detail::name(op), [&](Queue& q) { kernels::reduce(q, op, a); });
}

void CudaBackend::index(int index, const detail::IndexArgs& a) {
  const char* op = a.op == detail::IndexOp::IndexSelect ? "index_select" : "gather";
  on_device(*this, index, op, [&](Queue& q) { kernels::index(q, a); });
}

void CudaBackend::random(int index, const detail::RandomArgs& a) {
  static constexpr const char* kNames[] = {"rand", "randn", "randint"};
  on_device(*this, index, kNames[static_cast<int>(a.kind)], [&](Queue& q) { kernels::random(q, a); });
}

// cuBLAS for f32/f64 when the operands are BLAS-shaped; our tiled kernel
// (src/kernels/gemm.kern) for integer dtypes and odd strides.
void CudaBackend::gemm(int index, const detail::GemmArgs& a) {
  on_device(*this, index, "matmul", [&](Queue& q) {
    if (a.m <= 0 || a.n <= 0 || a.batch <= 0) return;
    if (is_floating(a.dtype) && a.k > 0 && gemm_cublas(q.s, a)) return;
    kernels::gemm_tiled(q, a);
  });
}

// Row-major C = op(A) @ op(B) is column-major C^T = op(B)^T @ op(A)^T, and a
// row-major matrix with leading dimension ld is its transpose in column-major
// order with the same ld: so cuBLAS gets B first, with the same transposes.
bool CudaBackend::gemm_cublas(DeviceState& s, const detail::GemmArgs& a) {
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  if (!kernels::blas_ld(a.a, a.m, a.k, lda) || !kernels::blas_ld(a.b, a.k, a.n, ldb) ||
      !kernels::blas_ld(a.c, a.m, a.n, ldc))
    return false;
  if (a.a.batch_stride < 0 || a.b.batch_stride < 0 || a.c.batch_stride < 0) return false;
  for (std::int64_t v : {a.m, a.n, a.k, lda, ldb, ldc, a.batch})
    if (v > INT_MAX) return false;
  cublasHandle_t h = s.blas_locked();
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
  if (a.dtype == DType::F32)
    st = call(static_cast<float>(a.alpha), static_cast<float>(a.beta), static_cast<const float*>(a.a.data),
              static_cast<const float*>(a.b.data), static_cast<float*>(a.c.data), cublasSgemm, cublasSgemmStridedBatched);
  else
    st = call(a.alpha, a.beta, static_cast<const double*>(a.a.data), static_cast<const double*>(a.b.data),
              static_cast<double*>(a.c.data), cublasDgemm, cublasDgemmStridedBatched);
  ANVIL_CHECK(st == CUBLAS_STATUS_SUCCESS, BackendError, "matmul: cuBLAS gemm failed with ", cublasGetStatusName(st),
              " on ", s.label(), " for [", a.batch, ", ", a.m, ", ", a.k, "] @ [", a.k, ", ", a.n, "] ",
              kernels::dtype_name(a.dtype));
  s.track_locked("matmul");
  return true;
}

// ---- the optional fused window kernels --------------------------------------------

bool CudaBackend::supports_fused(detail::FusedOp, DType t, int index) noexcept {
  return (t == DType::F32 || t == DType::F64) && index >= 0 && index < device_count();
}

void CudaBackend::im2col(int index, const detail::Im2colArgs& a) {
  on_device(*this, index, "im2col", [&](Queue& q) { kernels::im2col(q, a); });
}

void CudaBackend::col2im(int index, const detail::Im2colArgs& a) {
  on_device(*this, index, "col2im", [&](Queue& q) { kernels::col2im(q, a); });
}

void CudaBackend::max_pool2d(int index, const detail::Pool2dArgs& a) {
  on_device(*this, index, "max_pool2d", [&](Queue& q) { kernels::max_pool2d(q, a); });
}

void CudaBackend::max_pool2d_backward(int index, const detail::Pool2dArgs& a) {
  on_device(*this, index, "max_pool2d_backward", [&](Queue& q) { kernels::max_pool2d_backward(q, a); });
}

}  // namespace anvil::cuda
