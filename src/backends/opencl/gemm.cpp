// The OpenCL BLAS hook: CLBlast for f32/f64 GEMM when it is built in and
// the operands are BLAS-shaped. The shared backend runs our tiled kernel
// (src/kernels/gemm.kern) when this returns false: for integer dtypes, for
// tiny products where CLBlast's launch overhead dominates, and when CLBlast
// is missing or disabled (ANVIL_OPENCL_CLBLAST=0).
#include <algorithm>
#include <atomic>
#include <mutex>

#include "anvil/error.h"
#include "backends/opencl/runtime.h"
#include "core/env_flag.h"

#ifdef ANVIL_HAVE_CLBLAST
#include <clblast.h>
#endif

namespace anvil::opencl {

namespace {

// Read at each call so that a test can switch it.
bool clblast_enabled() { return !detail::env_flag_off("ANVIL_OPENCL_CLBLAST"); }

#ifdef ANVIL_HAVE_CLBLAST
// Note [CLBlast's first call]
// CLBlast 1.5 fills its tuning database, a static vector, when it first
// builds a routine, and without a lock (Database::Database: `if
// (database.size() == 0) database = {...}`). Two threads making their first
// GEMM at once, on opencl:0 and opencl:1 as DataParallel's replicas do, race
// on it: test_opencl_jit's cold-cache child died with SIGSEGV copying a
// database entry in one thread while the other built its program (twice in
// about 250 cold runs, once under ctest). So until one call has succeeded, which
// means a routine was built and the database filled, calls take turns; after
// that they run side by side as before (CLBlast's caches have locks of their
// own).
template <typename Call>
clblast::StatusCode first_calls_one_at_a_time(Call&& call) {
  static std::atomic<bool> database_filled{false};
  static std::mutex first_calls;
  if (database_filled.load(std::memory_order_acquire)) return call();
  const std::lock_guard<std::mutex> lock(first_calls);
  const clblast::StatusCode status = call();
  if (status == clblast::StatusCode::kSuccess) database_filled.store(true, std::memory_order_release);
  return status;
}
#endif

}  // namespace

bool Queue::gemm_blas(const detail::GemmArgs& a, detail::CachingAllocator&) {
  const bool tiny = a.m * a.n * std::max<std::int64_t>(a.k, 1) < 16 * 16 * 16;
  if (tiny || !clblast_enabled()) return false;
  // f16/bf16: the tiled kernel (f32 accumulation). CLBlast's HGEMM needs
  // cl_khr_fp16, which PoCL lacks, and CLBlast has no bf16; widening to f32
  // for SGEMM would cost two temporaries and two extra passes.
  if (is_half(a.dtype)) return false;
#ifdef ANVIL_HAVE_CLBLAST
  std::int64_t ld[3] = {};
  if (!device_common::blas_ld(a.a, a.m, a.k, ld[0]) || !device_common::blas_ld(a.b, a.k, a.n, ld[1]) ||
      !device_common::blas_ld(a.c, a.m, a.n, ld[2]))
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
  auto run = [&](auto alpha, auto beta) {
    if (a.batch == 1)
      return clblast::Gemm(clblast::Layout::kRowMajor, ta, tb, m, n, k, alpha, A, ao, lda, B, bo, ldb, beta, C, co, ldc,
                           &handle, &ev);
    return clblast::GemmStridedBatched(
        clblast::Layout::kRowMajor, ta, tb, m, n, k, alpha, A, ao, lda, static_cast<std::size_t>(a.a.batch_stride), B,
        bo, ldb, static_cast<std::size_t>(a.b.batch_stride), beta, C, co, ldc,
        static_cast<std::size_t>(a.c.batch_stride), static_cast<std::size_t>(a.batch), &handle, &ev);
  };
  const clblast::StatusCode st = first_calls_one_at_a_time([&] {
    return a.dtype == DType::F32 ? run(static_cast<float>(a.alpha), static_cast<float>(a.beta)) : run(a.alpha, a.beta);
  });
  switch (st) {
    case clblast::StatusCode::kSuccess:
      break;
    // Shapes or devices CLBlast does not handle: our kernel does.
    case clblast::StatusCode::kNotImplemented:
    case clblast::StatusCode::kInvalidLocalMemUsage:
    case clblast::StatusCode::kNoDoublePrecision:
    case clblast::StatusCode::kInvalidLeadDimA:
    case clblast::StatusCode::kInvalidLeadDimB:
    case clblast::StatusCode::kInvalidLeadDimC:
      return false;
    default:
      throw BackendError(detail::cat("matmul: CLBlast gemm failed with status ", static_cast<int>(st), " (",
                                     status_name(static_cast<cl_int>(st)), ") on ", label_, " for [", a.batch, ", ",
                                     a.m, ", ", a.k, "] @ [", a.k, ", ", a.n, "] ",
                                     device_common::dtype_name(a.dtype)));
  }
  if (ev != nullptr) {
    // Note [A kernel's first run waits on CPU devices] (launch.h), for the
    // kernels CLBlast launches: they too compile at their first run.
    if (first_runs.wait()) {
      const std::string call = detail::cat(device_common::dtype_name(a.dtype), a.a.trans, a.b.trans, ' ', a.batch > 1,
                                           ' ', m, 'x', n, 'x', k, ' ', lda, ' ', ldb, ' ', ldc);
      if (!first_runs.has_run_gemm(call) && clWaitForEvents(1, &ev) == CL_SUCCESS) first_runs.note_run_gemm(call);
    }
    track(ev, "matmul");
  }
  return true;
#else
  return false;
#endif
}

}  // namespace anvil::opencl
