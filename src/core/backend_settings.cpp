#include "core/backend_settings.h"

#include <cstdlib>

#include "anvil/backends.h"
#include "anvil/error.h"
#include "core/backend.h"
#include "core/backend_module.h"
#include "core/env_flag.h"

namespace anvil::detail {

namespace {

bool parse_precision(std::string_view s, MatmulPrecision& out) noexcept {
  if (s == "highest")
    out = MatmulPrecision::Highest;
  else if (s == "high")
    out = MatmulPrecision::High;
  else if (s == "medium")
    out = MatmulPrecision::Medium;
  else
    return false;
  return true;
}

std::atomic<CudnnReportFn> cudnn_report_fn{nullptr};

// The CUDA module's report, loading the module first (it registers the
// report when it loads).
CudnnReport cudnn_report() {
  if (backend_for(DeviceType::CUDA) == nullptr) {
    CudnnReport r;
    r.status = backend_built(DeviceType::CUDA)
                   ? "the CUDA backend did not load: " + backend_missing_reason(DeviceType::CUDA)
                   : "not compiled in: this build of anvil has no CUDA backend";
    return r;
  }
  const CudnnReportFn fn = cudnn_report_fn.load(std::memory_order_acquire);
  if (fn == nullptr) return {false, 0, "the CUDA backend did not report on cuDNN"};
  return fn();
}

}  // namespace

VendorSettings& vendor_settings() noexcept {
  static VendorSettings* s = [] {
    auto* v = new VendorSettings();
    if (env_flag_off("ANVIL_CUDNN")) v->cudnn_enabled = false;
    if (env_flag_off("ANVIL_CUDNN_ALLOW_TF32")) v->cudnn_allow_tf32 = false;
    if (env_flag("ANVIL_CUDNN_BENCHMARK")) v->cudnn_benchmark = true;
    MatmulPrecision p = MatmulPrecision::Highest;
    if (const char* e = std::getenv("ANVIL_FLOAT32_MATMUL_PRECISION"); e != nullptr && parse_precision(e, p))
      v->matmul_precision = p;
    return v;
  }();
  return *s;
}

void register_cudnn_report(CudnnReportFn fn) noexcept { cudnn_report_fn.store(fn, std::memory_order_release); }

}  // namespace anvil::detail

namespace anvil::backends::cudnn {

bool is_available() { return detail::cudnn_report().available; }
int version() { return detail::cudnn_report().version; }
std::string status() {
  if (!enabled()) {
    const detail::CudnnReport r = detail::cudnn_report();
    return r.available ? "off (set_enabled(false) or ANVIL_CUDNN=0); " + r.status : r.status;
  }
  return detail::cudnn_report().status;
}

void set_enabled(bool on) { detail::vendor_settings().cudnn_enabled.store(on, std::memory_order_relaxed); }
bool enabled() noexcept { return detail::vendor_settings().cudnn_enabled.load(std::memory_order_relaxed); }
void set_allow_tf32(bool on) { detail::vendor_settings().cudnn_allow_tf32.store(on, std::memory_order_relaxed); }
bool allow_tf32() noexcept { return detail::vendor_settings().cudnn_allow_tf32.load(std::memory_order_relaxed); }
void set_benchmark(bool on) { detail::vendor_settings().cudnn_benchmark.store(on, std::memory_order_relaxed); }
bool benchmark() noexcept { return detail::vendor_settings().cudnn_benchmark.load(std::memory_order_relaxed); }

}  // namespace anvil::backends::cudnn

namespace anvil::backends::cuda::matmul {

void set_allow_tf32(bool on) {
  detail::vendor_settings().matmul_precision.store(
      on ? detail::MatmulPrecision::High : detail::MatmulPrecision::Highest, std::memory_order_relaxed);
}
bool allow_tf32() noexcept {
  return detail::vendor_settings().matmul_precision.load(std::memory_order_relaxed) != detail::MatmulPrecision::Highest;
}

}  // namespace anvil::backends::cuda::matmul

namespace anvil {

void set_float32_matmul_precision(std::string_view precision) {
  detail::MatmulPrecision p{};
  ANVIL_CHECK(detail::parse_precision(precision, p), ValueError,
              "set_float32_matmul_precision: unknown precision; expected \"highest\", \"high\" or \"medium\", got \"",
              precision, "\"");
  detail::vendor_settings().matmul_precision.store(p, std::memory_order_relaxed);
}

std::string float32_matmul_precision() {
  switch (detail::vendor_settings().matmul_precision.load(std::memory_order_relaxed)) {
    case detail::MatmulPrecision::High:
      return "high";
    case detail::MatmulPrecision::Medium:
      return "medium";
    default:
      return "highest";
  }
}

}  // namespace anvil
