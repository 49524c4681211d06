// Batched GEMM: CLBlast for f32/f64 when it is built in and the operands are
// BLAS-shaped; our tiled kernel (src/kernels/gemm.kern) for integer dtypes,
// for tiny products where CLBlast's launch overhead dominates, and when
// CLBlast is missing or disabled (ANVIL_OPENCL_CLBLAST=0, or false/no/off).
#include <algorithm>

#include "anvil/error.h"
#include "backends/common/device_primitives.h"
#include "backends/opencl/opencl_backend.h"
#include "core/env_flag.h"

#ifdef ANVIL_HAVE_CLBLAST
#include <clblast.h>
#endif

namespace anvil::opencl {

namespace {

// Read at each call so that a test can switch it.
bool clblast_enabled() { return !detail::env_flag_off("ANVIL_OPENCL_CLBLAST"); }

}  // namespace

void OpenCLBackend::gemm(int index, const detail::GemmArgs& a) {
  OpScope scope("matmul");
  if (a.m <= 0 || a.n <= 0 || a.batch <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const bool tiny = a.m * a.n * std::max<std::int64_t>(a.k, 1) < 16 * 16 * 16;
  if (is_floating(a.dtype) && a.k > 0 && !tiny && clblast_enabled() && gemm_clblast(s, a)) return;
  gemm_tiled(s, a);
}

bool OpenCLBackend::gemm_clblast(DeviceState& s, const detail::GemmArgs& a) {
#ifdef ANVIL_HAVE_CLBLAST
  std::int64_t ld[3] = {};
  if (!kernels::blas_ld(a.a, a.m, a.k, ld[0]) || !kernels::blas_ld(a.b, a.k, a.n, ld[1]) ||
      !kernels::blas_ld(a.c, a.m, a.n, ld[2]))
    return false;
  const auto lda = static_cast<std::size_t>(ld[0]), ldb = static_cast<std::size_t>(ld[1]),
             ldc = static_cast<std::size_t>(ld[2]);
  if (a.a.batch_stride < 0 || a.b.batch_stride < 0 || a.c.batch_stride < 0) return false;
  const auto ta = a.a.trans ? clblast::Transpose::kYes : clblast::Transpose::kNo;
  const auto tb = a.b.trans ? clblast::Transpose::kYes : clblast::Transpose::kNo;
  const auto m = static_cast<std::size_t>(a.m), n = static_cast<std::size_t>(a.n), k = static_cast<std::size_t>(a.k);
  cl_mem A = static_cast<cl_mem>(a.a.data), B = static_cast<cl_mem>(a.b.data), C = static_cast<cl_mem>(a.c.data);
  const auto ao = static_cast<std::size_t>(a.a.offset), bo = static_cast<std::size_t>(a.b.offset),
             co = static_cast<std::size_t>(a.c.offset);
  cl_event ev = nullptr;
  clblast::StatusCode st;
  auto run = [&](auto alpha, auto beta) {
    if (a.batch == 1)
      return clblast::Gemm(clblast::Layout::kRowMajor, ta, tb, m, n, k, alpha, A, ao, lda, B, bo, ldb, beta, C, co,
                           ldc, &s.queue, &ev);
    return clblast::GemmStridedBatched(clblast::Layout::kRowMajor, ta, tb, m, n, k, alpha, A, ao, lda,
                                       static_cast<std::size_t>(a.a.batch_stride), B, bo, ldb,
                                       static_cast<std::size_t>(a.b.batch_stride), beta, C, co, ldc,
                                       static_cast<std::size_t>(a.c.batch_stride), static_cast<std::size_t>(a.batch),
                                       &s.queue, &ev);
  };
  if (a.dtype == DType::F32) st = run(static_cast<float>(a.alpha), static_cast<float>(a.beta));
  else st = run(a.alpha, a.beta);
  switch (st) {
    case clblast::StatusCode::kSuccess: break;
    // Shapes or devices CLBlast does not handle: our kernel does.
    case clblast::StatusCode::kNotImplemented:
    case clblast::StatusCode::kInvalidLocalMemUsage:
    case clblast::StatusCode::kNoDoublePrecision:
    case clblast::StatusCode::kInvalidLeadDimA:
    case clblast::StatusCode::kInvalidLeadDimB:
    case clblast::StatusCode::kInvalidLeadDimC: return false;
    default:
      throw BackendError(detail::cat("matmul: CLBlast gemm failed with status ", static_cast<int>(st), " (",
                                     status_name(static_cast<cl_int>(st)), ") on ", s.label(), " for [", a.batch,
                                     ", ", a.m, ", ", a.k, "] @ [", a.k, ", ", a.n, "] ", kernels::dtype_name(a.dtype)));
  }
  if (ev != nullptr) {
    // Note [A kernel's first run waits on CPU devices] (launch.h), for the
    // kernels CLBlast launches: they too compile at their first run.
    if (s.programs.first_runs_wait()) {
      const std::string call = detail::cat(kernels::dtype_name(a.dtype), a.a.trans, a.b.trans, ' ', a.batch > 1, ' ',
                                           m, 'x', n, 'x', k, ' ', lda, ' ', ldb, ' ', ldc);
      if (!s.programs.has_run_gemm(call) && clWaitForEvents(1, &ev) == CL_SUCCESS) s.programs.note_run_gemm(call);
    }
    s.track_locked(ev, "matmul");
  }
  return true;
#else
  (void)s;
  (void)a;
  return false;
#endif
}

}  // namespace anvil::opencl
