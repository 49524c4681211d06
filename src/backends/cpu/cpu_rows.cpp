// Row primitives (core/backend.h, ScanArgs and SortArgs): cumsum and argsort
// over contiguous rows, one row per iteration of a parallel loop.
#include <algorithm>
#include <numeric>
#include <type_traits>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dtype_switch.h"
#include "backends/cpu/parallel.h"

namespace anvil::cpu_backend {

namespace {

std::int64_t row_grain(std::int64_t len) {
  return std::max<std::int64_t>(1, kParallelGrain / 8 / std::max<std::int64_t>(1, len));
}

template <typename T>
void scan_typed(const detail::ScanArgs& a) {
  // f32 sums run in double, as PyTorch's CPU cumsum does.
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
  const T* in = static_cast<const T*>(a.in.data) + a.in.offset;
  T* out = static_cast<T*>(a.out.data) + a.out.offset;
  parallel_for(a.rows, row_grain(a.len), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* src = in + r * a.len;
      T* dst = out + r * a.len;
      Acc acc = 0;
      if (a.reverse) {
        for (std::int64_t i = a.len - 1; i >= 0; --i) dst[i] = static_cast<T>(acc += static_cast<Acc>(src[i]));
      } else {
        for (std::int64_t i = 0; i < a.len; ++i) dst[i] = static_cast<T>(acc += static_cast<Acc>(src[i]));
      }
    }
  });
}

// Whether a sorts strictly before b in ascending order: NaN above every
// number (and equal to NaN).
template <typename T>
inline bool less_nan_last(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return a < b || (b != b && a == a);
  else
    return a < b;
}

template <typename T>
void argsort_typed(const detail::SortArgs& a) {
  const T* in = static_cast<const T*>(a.in.data) + a.in.offset;
  std::int64_t* indices = static_cast<std::int64_t*>(a.indices.data) + a.indices.offset;
  parallel_for(a.rows, row_grain(a.len), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* row = in + r * a.len;
      std::int64_t* idx = indices + r * a.len;
      std::iota(idx, idx + a.len, std::int64_t{0});
      if (a.descending)
        std::stable_sort(idx, idx + a.len,
                         [row](std::int64_t i, std::int64_t j) { return less_nan_last(row[j], row[i]); });
      else
        std::stable_sort(idx, idx + a.len,
                         [row](std::int64_t i, std::int64_t j) { return less_nan_last(row[i], row[j]); });
    }
  });
}

}  // namespace

void CpuBackend::scan(int, const detail::ScanArgs& args) {
  count(detail::traffic(args));
  switch (args.dtype) {
    case DType::F32:
      return scan_typed<float>(args);
    case DType::F64:
      return scan_typed<double>(args);
    case DType::I64:
      return scan_typed<std::int64_t>(args);
    default:
      ANVIL_ASSERT(false, "scan: f32, f64 or i64 expected, got ", args.dtype);
  }
}

void CpuBackend::argsort(int, const detail::SortArgs& args) {
  count(detail::traffic(args));
  ANVIL_DISPATCH(args.dtype, T, argsort_typed<T>(args));
}

}  // namespace anvil::cpu_backend
