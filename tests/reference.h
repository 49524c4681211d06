// The plain reference the core suites compare against: float64 host arrays
// and naive loops with explicit shapes and strides. Nothing here calls an
// anvil op except to move data in (`to_tensor`) and out (`from_tensor`), so a
// bug in an anvil kernel cannot hide in the reference.
//
//   auto a = ref::random({3, 4}, {-1, 1}, 7);          // float64, row-major
//   auto x = ref::to_tensor(a, anvil::f32, device);    // the same numbers on a device
//   EXPECT_TRUE(ref::close(anvil::exp(x), ref::map(a, [](double v) { return std::exp(v); }),
//                          ref::tol(anvil::f32)));
//
// Test inputs come in layouts (contiguous, transposed, sliced with a step) so
// every op also sees non-contiguous operands; `make_input` builds the anvil
// view and the reference array of the same values side by side.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "anvil/anvil.h"

namespace anvil::ref {

using Dims = std::vector<std::int64_t>;

inline std::int64_t numel(const Dims& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

// Row-major strides, in elements.
inline Dims row_major_strides(const Dims& shape) {
  Dims st(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    st[i] = st[i + 1] * std::max<std::int64_t>(shape[i + 1], 1);
  return st;
}

inline std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

inline int wrap_dim(std::int64_t dim, std::size_t ndim) {
  const auto n = static_cast<std::int64_t>(ndim);
  if (dim < 0) dim += n;
  if (dim < 0 || (dim >= n && !(n == 0 && dim == 0))) throw std::out_of_range("ref: dim out of range");
  return static_cast<int>(dim);
}

// Calls f(index) for every multi-index of `shape` in row-major order.
template <typename F>
void for_each_index(const Dims& shape, F&& f) {
  if (numel(shape) == 0) return;
  Dims idx(shape.size(), 0);
  while (true) {
    f(static_cast<const Dims&>(idx));
    int d = static_cast<int>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

inline std::int64_t linear(const Dims& idx, const Dims& strides, std::int64_t offset = 0) {
  std::int64_t off = offset;
  for (std::size_t i = 0; i < idx.size(); ++i) off += idx[i] * strides[i];
  return off;
}

// A float64 array, row-major and contiguous. Integer and bool data are held as
// exact doubles.
struct Array {
  Dims shape;
  std::vector<double> v;

  Array() = default;
  Array(Dims s, std::vector<double> values) : shape(std::move(s)), v(std::move(values)) {
    if (static_cast<std::int64_t>(v.size()) != ref::numel(shape))
      throw std::invalid_argument("ref::Array: size mismatch");
  }
  static Array filled(Dims s, double x) {
    const auto n = static_cast<std::size_t>(ref::numel(s));
    return Array(std::move(s), std::vector<double>(n, x));
  }
  std::int64_t numel() const { return static_cast<std::int64_t>(v.size()); }
  int dim() const { return static_cast<int>(shape.size()); }
  double at(const Dims& idx) const { return v[static_cast<std::size_t>(linear(idx, row_major_strides(shape)))]; }
};

// ---- dtypes ------------------------------------------------------------------------

// x rounded to bfloat16 (8 significant bits, ties to even), written apart
// from the library's bit code in src/kernels/half.h: frexp and rint on doubles.
inline double round_bf16(float f) {
  if (!std::isfinite(f) || f == 0.0f) return f;
  int e = 0;
  (void)std::frexp(static_cast<double>(f), &e);  // |f| = m 2^e, m in [0.5, 1)
  const int lsb_exp = std::max(e - 8, -133);     // bf16 has f32's exponent range, subnormals included
  const double r = std::nearbyint(std::ldexp(static_cast<double>(f), -lsb_exp));
  const double out = std::ldexp(r, lsb_exp);
  return std::fabs(out) >= 0x1.ff8p127 ? std::copysign(INFINITY, out) : out;  // past bf16's largest: inf
}

// What storing `x` in a tensor of dtype `t` keeps (x assumed in range for ints).
// The 16-bit floats go through f32 first, as every conversion in anvil (and
// c10::Half) does; f16 uses the compiler's _Float16, another implementation.
inline double cast_to(DType t, double x) {
  switch (t) {
    case DType::F16:
      return static_cast<double>(static_cast<float>(static_cast<_Float16>(static_cast<float>(x))));
    case DType::BF16:
      return round_bf16(static_cast<float>(x));
    case DType::F32:
      return static_cast<double>(static_cast<float>(x));
    case DType::F64:
      return x;
    case DType::I32:
    case DType::I64:
      return std::trunc(x);
    case DType::U8:
      return static_cast<double>(static_cast<std::uint8_t>(static_cast<std::int64_t>(std::trunc(x)) & 0xff));
    case DType::Bool:
      return x != 0.0 ? 1.0 : 0.0;
  }
  return x;
}

inline Array cast(const Array& a, DType t) {
  Array r = a;
  for (double& x : r.v) x = cast_to(t, x);
  return r;
}

struct Tolerance {
  double rtol = 0, atol = 0;
};
// Elementwise tolerances per dtype: f32 results are compared with about 1e-5
// relative error (a few ulp of a vectorised exp/log), integers exactly.
inline Tolerance tol(DType t) {
  switch (t) {
    case DType::F32:
      return {1e-5, 1e-6};
    case DType::F64:
      return {1e-11, 1e-12};
    // One rounding of the result (2^-11, 2^-8 relative) on top of f32's
    // compute, and inputs already rounded to 16 bits.
    case DType::F16:
      return {2e-3, 1e-3};
    case DType::BF16:
      return {1.6e-2, 1e-2};
    default:
      return {0, 0};
  }
}

// ---- moving data in and out --------------------------------------------------------

template <typename T>
Tensor to_tensor_as(const Array& a, Device d) {
  std::vector<T> values(a.v.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_same_v<T, bool>)
      values[i] = a.v[i] != 0.0;
    else
      values[i] = static_cast<T>(a.v[i]);
  }
  return anvil::tensor(values, Shape(a.shape), d);
}
template <>
inline Tensor to_tensor_as<bool>(const Array& a, Device d) {
  // std::vector<bool> has no contiguous storage: go through from_host.
  std::vector<std::uint8_t> bytes(a.v.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = a.v[i] != 0.0 ? 1 : 0;
  static_assert(sizeof(bool) == 1);
  return anvil::from_host(bytes.data(), Shape(a.shape), DType::Bool, d);
}

inline Tensor to_tensor(const Array& a, DType t, Device d) {
  switch (t) {
    case DType::F32:
      return to_tensor_as<float>(a, d);
    case DType::F64:
      return to_tensor_as<double>(a, d);
    case DType::I32:
      return to_tensor_as<std::int32_t>(a, d);
    case DType::I64:
      return to_tensor_as<std::int64_t>(a, d);
    case DType::U8:
      return to_tensor_as<std::uint8_t>(a, d);
    case DType::Bool:
      return to_tensor_as<bool>(a, d);
    case DType::F16:
    case DType::BF16:
      return to_tensor_as<float>(cast(a, t), d).to(t);
  }
  throw std::invalid_argument("ref::to_tensor: dtype");
}

template <typename T>
std::vector<double> values_as_double(const Tensor& t) {
  auto v = t.to_vector<T>();
  return std::vector<double>(v.begin(), v.end());
}

// The tensor's values in logical (row-major) order, as float64.
inline Array from_tensor(const Tensor& t) {
  Dims shape = t.shape().vec();
  switch (t.dtype()) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return Array(shape, values_as_double<float>(t));
    case DType::F64:
      return Array(shape, values_as_double<double>(t));
    case DType::I32:
      return Array(shape, values_as_double<std::int32_t>(t));
    case DType::I64:
      return Array(shape, values_as_double<std::int64_t>(t));
    case DType::U8:
      return Array(shape, values_as_double<std::uint8_t>(t));
    case DType::Bool: {
      auto v = t.to_vector<bool>();
      std::vector<double> out(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i] ? 1.0 : 0.0;
      return Array(shape, out);
    }
  }
  throw std::invalid_argument("ref::from_tensor: dtype");
}

// ---- comparing ---------------------------------------------------------------------

inline ::testing::AssertionResult close(const Tensor& got_t, const Array& want, Tolerance t) {
  if (!got_t.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  Array got = from_tensor(got_t);
  if (got.shape != want.shape)
    return ::testing::AssertionFailure() << "shape: got " << dims_str(got.shape) << ", expected "
                                         << dims_str(want.shape);
  int shown = 0;
  std::int64_t bad = 0;
  std::ostringstream os;
  os.precision(17);
  for (std::size_t i = 0; i < got.v.size(); ++i) {
    const double g = got.v[i], w = want.v[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::fabs(g - w) <= t.atol + t.rtol * std::fabs(w);
    if (!ok) {
      ++bad;
      if (shown++ < 5) os << "\n  at flat index " << i << ": got " << g << ", expected " << w;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.v.size() << " elements differ (rtol " << t.rtol
                                       << ", atol " << t.atol << ", dtype " << to_string(got_t.dtype()) << ", shape "
                                       << dims_str(got.shape) << ")" << os.str();
}
inline ::testing::AssertionResult close(const Tensor& got, const Array& want, DType t) {
  return close(got, want, tol(t));
}
inline ::testing::AssertionResult exact(const Tensor& got, const Array& want) {
  return close(got, want, Tolerance{0, 0});
}

// Runs one case of a table so that an exception fails that case (with the
// enclosing SCOPED_TRACE) instead of ending the whole test.
template <typename F>
void guarded(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception: " << e.what();
  }
}

// ---- making inputs -----------------------------------------------------------------

// splitmix64: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * (static_cast<double>(next() >> 11) * 0x1.0p-53); }

 private:
  std::uint64_t s_;
};

struct Domain {
  double lo = -1, hi = 1;
  bool integer_valued = false;  // draw integers in [lo, hi]
  bool avoid_zero = false;      // |x| >= 0.25 (divisors, log/sqrt of |x|)
};

inline Array random(const Dims& shape, Domain dom, std::uint64_t seed) {
  Rng rng(seed);
  Array a = Array::filled(shape, 0.0);
  for (double& x : a.v) {
    do {
      x = dom.integer_valued ? std::floor(rng.uniform(dom.lo, dom.hi + 1)) : rng.uniform(dom.lo, dom.hi);
      if (dom.integer_valued) x = std::min(x, dom.hi);
    } while (dom.avoid_zero && std::fabs(x) < 0.25);
  }
  return a;
}

// ---- views, by explicit strides over a flat buffer ------------------------------------

// out[idx] = base.v[offset + sum(idx[i] * strides[i])]
inline Array strided(const Array& base, const Dims& shape, const Dims& strides, std::int64_t offset) {
  Array out = Array::filled(shape, 0.0);
  std::size_t k = 0;
  for_each_index(shape,
                 [&](const Dims& idx) { out.v[k++] = base.v[static_cast<std::size_t>(linear(idx, strides, offset))]; });
  return out;
}

inline Array reshape(const Array& a, const Dims& shape) { return Array(shape, a.v); }

inline Array permute(const Array& a, const std::vector<int>& dims) {
  const Dims st = row_major_strides(a.shape);
  Dims shape, strides;
  for (int d : dims) {
    shape.push_back(a.shape[static_cast<std::size_t>(d)]);
    strides.push_back(st[static_cast<std::size_t>(d)]);
  }
  return strided(a, shape, strides, 0);
}

inline Array transpose(const Array& a, int d0, int d1) {
  std::vector<int> dims(a.shape.size());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[static_cast<std::size_t>(wrap_dim(d0, a.shape.size()))],
            dims[static_cast<std::size_t>(wrap_dim(d1, a.shape.size()))]);
  return permute(a, dims);
}

// Python's a[..., start:end:step, ...] along `dim` (step > 0, bounds clamped).
inline Array slice(const Array& a, int dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) {
  const auto d = static_cast<std::size_t>(wrap_dim(dim, a.shape.size()));
  const std::int64_t n = a.shape[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  Dims shape = a.shape, strides = row_major_strides(a.shape);
  shape[d] = (end - start + step - 1) / step;
  const std::int64_t offset = start * strides[d];
  strides[d] *= step;
  return strided(a, shape, strides, offset);
}

inline Array select(const Array& a, int dim, std::int64_t index) {
  const auto d = static_cast<std::size_t>(wrap_dim(dim, a.shape.size()));
  if (index < 0) index += a.shape[d];
  Dims shape = a.shape, strides = row_major_strides(a.shape);
  const std::int64_t offset = index * strides[d];
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(d));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(d));
  return strided(a, shape, strides, offset);
}

// ---- broadcasting and elementwise -----------------------------------------------------

inline Dims broadcast(const Dims& a, const Dims& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) throw std::invalid_argument("ref::broadcast: shapes do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// Strides that read `a` at an index of the (larger) broadcast shape `out`:
// 0 along dims where `a` has size 1 or that it lacks.
inline Dims broadcast_strides(const Dims& a_shape, const Dims& out) {
  const std::size_t lead = out.size() - a_shape.size();
  const Dims st = row_major_strides(a_shape);
  Dims bst(out.size(), 0);
  for (std::size_t i = 0; i < a_shape.size(); ++i) bst[lead + i] = a_shape[i] == 1 ? 0 : st[i];
  return bst;
}

// Element of `a` at an index of the (larger) broadcast shape.
inline double at_broadcast(const Array& a, const Dims& idx) {
  Dims out_shape(idx.size(), 1);
  return a.v[static_cast<std::size_t>(linear(idx, broadcast_strides(a.shape, out_shape)))];
}

inline Array expand(const Array& a, const Dims& shape) {
  Array out = Array::filled(shape, 0.0);
  const Dims st = broadcast_strides(a.shape, shape);
  std::size_t k = 0;
  for_each_index(shape, [&](const Dims& idx) { out.v[k++] = a.v[static_cast<std::size_t>(linear(idx, st))]; });
  return out;
}

template <typename F>
Array map(const Array& a, F&& f) {
  Array out = a;
  for (double& x : out.v) x = f(x);
  return out;
}

template <typename F>
Array zip(const Array& a, const Array& b, F&& f) {
  Array out = Array::filled(broadcast(a.shape, b.shape), 0.0);
  const Dims sa = broadcast_strides(a.shape, out.shape), sb = broadcast_strides(b.shape, out.shape);
  std::size_t k = 0;
  for_each_index(out.shape, [&](const Dims& idx) {
    out.v[k++] = f(a.v[static_cast<std::size_t>(linear(idx, sa))], b.v[static_cast<std::size_t>(linear(idx, sb))]);
  });
  return out;
}

inline Array where(const Array& c, const Array& a, const Array& b) {
  Array out = Array::filled(broadcast(c.shape, broadcast(a.shape, b.shape)), 0.0);
  const Dims sc = broadcast_strides(c.shape, out.shape), sa = broadcast_strides(a.shape, out.shape),
             sb = broadcast_strides(b.shape, out.shape);
  std::size_t k = 0;
  for_each_index(out.shape, [&](const Dims& idx) {
    out.v[k++] = c.v[static_cast<std::size_t>(linear(idx, sc))] != 0.0 ? a.v[static_cast<std::size_t>(linear(idx, sa))]
                                                                       : b.v[static_cast<std::size_t>(linear(idx, sb))];
  });
  return out;
}

// ---- reductions ----------------------------------------------------------------------

// Normalised, sorted, unique dims; empty means all.
inline std::vector<int> reduce_dims(const Dims& dims, std::size_t ndim) {
  std::vector<int> out;
  if (dims.empty()) {
    for (std::size_t i = 0; i < ndim; ++i) out.push_back(static_cast<int>(i));
    return out;
  }
  for (std::int64_t d : dims) out.push_back(wrap_dim(d, ndim));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// For every output element, f(values) over the reduced elements in row-major
// order of the reduced dims.
template <typename F>
Array reduce(const Array& a, const Dims& dims, bool keepdim, F&& f) {
  const std::vector<int> rd = reduce_dims(dims, a.shape.size());
  std::vector<bool> is_reduced(a.shape.size(), false);
  for (int d : rd) is_reduced[static_cast<std::size_t>(d)] = true;
  Dims kept_shape, red_shape, out_shape;
  for (std::size_t i = 0; i < a.shape.size(); ++i) {
    if (is_reduced[i]) {
      red_shape.push_back(a.shape[i]);
      if (keepdim) out_shape.push_back(1);
    } else {
      kept_shape.push_back(a.shape[i]);
      out_shape.push_back(a.shape[i]);
    }
  }
  const Dims st = row_major_strides(a.shape);
  Array out = Array::filled(out_shape, 0.0);
  std::size_t k = 0;
  auto one_output = [&](const Dims& kept_idx) {
    std::vector<double> values;
    auto gather_one = [&](const Dims& red_idx) {
      std::int64_t off = 0;
      std::size_t ki = 0, ri = 0;
      for (std::size_t i = 0; i < a.shape.size(); ++i) off += (is_reduced[i] ? red_idx[ri++] : kept_idx[ki++]) * st[i];
      values.push_back(a.v[static_cast<std::size_t>(off)]);
    };
    for_each_index(red_shape, gather_one);
    out.v[k++] = f(values);
  };
  if (kept_shape.empty())
    one_output(Dims{});
  else
    for_each_index(kept_shape, one_output);
  return out;
}

inline Array sum(const Array& a, const Dims& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, [](const std::vector<double>& xs) {
    long double s = 0;
    for (double x : xs) s += x;
    return static_cast<double>(s);
  });
}
inline Array mean(const Array& a, const Dims& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, [](const std::vector<double>& xs) {
    long double s = 0;
    for (double x : xs) s += x;
    return xs.empty() ? std::numeric_limits<double>::quiet_NaN()
                      : static_cast<double>(s / static_cast<long double>(xs.size()));
  });
}
inline Array prod(const Array& a, const Dims& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, [](const std::vector<double>& xs) {
    long double p = 1;
    for (double x : xs) p *= x;
    return static_cast<double>(p);
  });
}
inline Array amax(const Array& a, const Dims& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim,
                [](const std::vector<double>& xs) { return *std::max_element(xs.begin(), xs.end()); });
}
inline Array amin(const Array& a, const Dims& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim,
                [](const std::vector<double>& xs) { return *std::min_element(xs.begin(), xs.end()); });
}
// First index of the max/min (std::max_element returns the first).
inline Array argmax(const Array& a, const Dims& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, [](const std::vector<double>& xs) {
    return static_cast<double>(std::max_element(xs.begin(), xs.end()) - xs.begin());
  });
}
inline Array argmin(const Array& a, const Dims& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, [](const std::vector<double>& xs) {
    return static_cast<double>(std::min_element(xs.begin(), xs.end()) - xs.begin());
  });
}
inline Array var(const Array& a, const Dims& dims = {}, bool keepdim = false, std::int64_t correction = 1) {
  return reduce(a, dims, keepdim, [correction](const std::vector<double>& xs) {
    long double m = 0;
    for (double x : xs) m += x;
    m /= static_cast<long double>(xs.size());
    long double s = 0;
    for (double x : xs) s += (x - m) * (x - m);
    const auto dof = static_cast<long double>(static_cast<std::int64_t>(xs.size()) - correction);
    return dof <= 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(s / dof);
  });
}
inline Array stdev(const Array& a, const Dims& dims = {}, bool keepdim = false, std::int64_t correction = 1) {
  return map(var(a, dims, keepdim, correction), [](double x) { return std::sqrt(x); });
}
inline Array norm(const Array& a, const Dims& dims = {}, bool keepdim = false) {
  return reduce(a, dims, keepdim, [](const std::vector<double>& xs) {
    long double s = 0;
    for (double x : xs) s += static_cast<long double>(x) * x;
    return static_cast<double>(std::sqrt(s));
  });
}
inline Array logsumexp(const Array& a, const Dims& dims, bool keepdim = false) {
  return reduce(a, dims, keepdim, [](const std::vector<double>& xs) {
    if (xs.empty()) return -std::numeric_limits<double>::infinity();
    const double m = *std::max_element(xs.begin(), xs.end());
    long double s = 0;
    for (double x : xs) s += std::exp(static_cast<long double>(x - m));
    return m + static_cast<double>(std::log(s));
  });
}

// ---- linear algebra ------------------------------------------------------------------

// torch.matmul: 1-D·1-D → 0-dim; a 1-D left operand gets a leading 1 (removed
// after), a 1-D right operand a trailing 1 (removed after); batch dims
// broadcast.
inline Array matmul(const Array& a_in, const Array& b_in) {
  Array a = a_in, b = b_in;
  const bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  if (a1) a = reshape(a, {1, a.shape[0]});
  if (b1) b = reshape(b, {b.shape[0], 1});
  if (a.dim() < 2 || b.dim() < 2) throw std::invalid_argument("ref::matmul: 0-dim operand");
  const std::int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back();
  const std::int64_t k2 = b.shape[b.shape.size() - 2], n = b.shape.back();
  if (k != k2) throw std::invalid_argument("ref::matmul: inner dims differ");
  const Dims abatch(a.shape.begin(), a.shape.end() - 2), bbatch(b.shape.begin(), b.shape.end() - 2);
  const Dims batch = broadcast(abatch, bbatch);
  Dims out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Array out = Array::filled(out_shape, 0.0);
  const Array A = [&] {  // a and b with their batch dims expanded
    Dims s = batch;
    s.push_back(m);
    s.push_back(k);
    return expand(a, s);
  }();
  const Array B = [&] {
    Dims s = batch;
    s.push_back(k);
    s.push_back(n);
    return expand(b, s);
  }();
  const std::int64_t nb = numel(batch);
  for (std::int64_t bi = 0; bi < nb; ++bi)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        long double s = 0;
        for (std::int64_t p = 0; p < k; ++p)
          s += static_cast<long double>(A.v[static_cast<std::size_t>(bi * m * k + i * k + p)]) *
               B.v[static_cast<std::size_t>(bi * k * n + p * n + j)];
        out.v[static_cast<std::size_t>(bi * m * n + i * n + j)] = static_cast<double>(s);
      }
  Dims final_shape = batch;
  if (!a1) final_shape.push_back(m);
  if (!b1) final_shape.push_back(n);
  return reshape(out, final_shape);
}

// ---- indexing and joining --------------------------------------------------------------

inline Array index_select(const Array& a, int dim, const std::vector<std::int64_t>& index) {
  const auto d = static_cast<std::size_t>(wrap_dim(dim, a.shape.size()));
  Dims shape = a.shape;
  shape[d] = static_cast<std::int64_t>(index.size());
  Array out = Array::filled(shape, 0.0);
  std::size_t k = 0;
  for_each_index(shape, [&](const Dims& idx) {
    Dims src = idx;
    src[d] = index[static_cast<std::size_t>(idx[d])];
    out.v[k++] = a.at(src);
  });
  return out;
}

// torch.index_add: a with alpha * src[.., i, ..] added to row index[i] of dim.
inline Array index_add(const Array& a, int dim, const std::vector<std::int64_t>& index, const Array& src,
                       double alpha = 1) {
  const auto d = static_cast<std::size_t>(wrap_dim(dim, a.shape.size()));
  Array out = a;
  const Dims st = row_major_strides(a.shape);
  std::size_t k = 0;
  for_each_index(src.shape, [&](const Dims& idx) {
    Dims dst = idx;
    dst[d] = index[static_cast<std::size_t>(idx[d])];
    out.v[static_cast<std::size_t>(linear(dst, st))] += alpha * src.v[k++];
  });
  return out;
}

// torch.scatter_add: a with src[i][j] added at [index[i][j]][j] for dim 0
// (over index's shape).
inline Array scatter_add(const Array& a, int dim, const Array& index, const Array& src) {
  const auto d = static_cast<std::size_t>(wrap_dim(dim, a.shape.size()));
  Array out = a;
  const Dims st = row_major_strides(a.shape);
  for_each_index(index.shape, [&](const Dims& idx) {
    Dims dst = idx;
    dst[d] = static_cast<std::int64_t>(index.at(idx));
    out.v[static_cast<std::size_t>(linear(dst, st))] += src.at(idx);
  });
  return out;
}

// torch.gather: out[i][j] = a[index[i][j]][j] for dim 0; out has index's shape.
inline Array gather(const Array& a, int dim, const Array& index) {
  const auto d = static_cast<std::size_t>(wrap_dim(dim, a.shape.size()));
  Array out = Array::filled(index.shape, 0.0);
  std::size_t k = 0;
  for_each_index(index.shape, [&](const Dims& idx) {
    Dims src = idx;
    src[d] = static_cast<std::int64_t>(index.at(idx));
    out.v[k] = a.at(src);
    ++k;
  });
  return out;
}

inline Array cat(const std::vector<Array>& parts, int dim) {
  const auto d = static_cast<std::size_t>(wrap_dim(dim, parts.at(0).shape.size()));
  Dims shape = parts[0].shape;
  shape[d] = 0;
  for (const Array& p : parts) shape[d] += p.shape[d];
  Array out = Array::filled(shape, 0.0);
  std::size_t k = 0;
  for_each_index(shape, [&](const Dims& idx) {
    Dims src = idx;
    std::size_t which = 0;
    while (src[d] >= parts[which].shape[d]) src[d] -= parts[which++].shape[d];
    out.v[k++] = parts[which].at(src);
  });
  return out;
}

inline Array stack(const std::vector<Array>& parts, int dim) {
  std::vector<Array> expanded;
  const auto d = static_cast<std::size_t>(wrap_dim(dim, parts.at(0).shape.size() + 1));
  for (const Array& p : parts) {
    Dims s = p.shape;
    s.insert(s.begin() + static_cast<std::ptrdiff_t>(d), 1);
    expanded.push_back(reshape(p, s));
  }
  return cat(expanded, static_cast<int>(d));
}

// ---- inputs in every layout ---------------------------------------------------------------

enum class Layout { Contiguous, Transposed, Stepped };
inline const char* name(Layout l) {
  switch (l) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::Transposed:
      return "transposed";
    case Layout::Stepped:
      return "stepped";
  }
  return "?";
}

// An anvil tensor and the reference array holding the same values.
struct Input {
  Tensor t;
  Array r;
};

// Builds an input of `shape` on `d`: contiguous; the transpose of a
// contiguous tensor (last two dims; needs ≥ 2 dims); or every other element
// of a contiguous tensor along the last dim (slice with step 2). Values are
// drawn from `dom` and rounded to `dt`, so the reference sees exactly what
// the tensor holds.
inline Input make_input(const Dims& shape, Layout layout, DType dt, Device d, Domain dom, std::uint64_t seed) {
  if (layout == Layout::Transposed && shape.size() < 2) layout = Layout::Stepped;
  if (layout == Layout::Stepped && shape.empty()) layout = Layout::Contiguous;
  switch (layout) {
    case Layout::Contiguous: {
      Array a = cast(random(shape, dom, seed), dt);
      return {to_tensor(a, dt, d), a};
    }
    case Layout::Transposed: {
      Dims base_shape = shape;
      std::swap(base_shape[base_shape.size() - 1], base_shape[base_shape.size() - 2]);
      Array base = cast(random(base_shape, dom, seed), dt);
      Tensor t = to_tensor(base, dt, d).transpose(-1, -2);
      return {t, transpose(base, -1, -2)};
    }
    case Layout::Stepped: {
      Dims base_shape = shape;
      const std::int64_t n = base_shape.back();
      base_shape.back() = 2 * n + 1;
      Array base = cast(random(base_shape, dom, seed), dt);
      Tensor t = to_tensor(base, dt, d).slice(-1, 1, 2 * n + 1, 2);
      return {t, slice(base, -1, 1, 2 * n + 1, 2)};
    }
  }
  throw std::invalid_argument("ref::make_input: layout");
}

}  // namespace anvil::ref
