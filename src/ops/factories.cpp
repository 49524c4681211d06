// Factories: every one takes a device and a dtype (DESIGN §4.1).
#include <atomic>
#include <cmath>
#include <mutex>

#include "core/ledger_counters.h"
#include "core/observer.h"
#include "ops/host_dispatch.h"
#include "ops/op_common.h"

namespace anvil {

using detail::make_empty;

namespace {
// A new tensor of dtype `t` on `d`, once the device can hold one at all
// (see Note [Capabilities are asked once] in ops/dispatch.h).
Tensor make_on(const char* op, const Shape& shape, DType t, Device d, MemoryFormat format = MemoryFormat::Contiguous) {
  detail::check_supported(op, detail::Primitive::Storage, t, d);
  return make_empty(shape, t, d, format);
}

Tensor filled(const char* op, const Shape& shape, const Scalar& value, Device d, DType t) {
  Tensor out = make_on(op, shape, t, d);
  out.fill_(value);
  return out;
}

DType scalar_dtype(const Scalar& v) {
  switch (v.kind()) {
    case Scalar::Kind::Bool:
      return DType::Bool;
    case Scalar::Kind::Int:
      return DType::I64;
    case Scalar::Kind::Float:
      return DType::F32;
  }
  return DType::F32;
}
}  // namespace

Tensor empty(const Shape& shape, Device d, DType t) { return make_on("empty", shape, t, d); }
Tensor empty(const Shape& shape, DType t, Device d) { return make_on("empty", shape, t, d); }
Tensor zeros(const Shape& shape, Device d, DType t) { return filled("zeros", shape, 0, d, t); }
Tensor zeros(const Shape& shape, DType t, Device d) { return filled("zeros", shape, 0, d, t); }
Tensor ones(const Shape& shape, Device d, DType t) { return filled("ones", shape, 1, d, t); }
Tensor ones(const Shape& shape, DType t, Device d) { return filled("ones", shape, 1, d, t); }

Tensor full(const Shape& shape, const Scalar& value, Device d, std::optional<DType> t) {
  return filled("full", shape, value, d, t.value_or(scalar_dtype(value)));
}

Tensor arange(const Scalar& end, Device d, std::optional<DType> t) { return arange(0, end, 1, d, t); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, Device d, std::optional<DType> t) {
  const bool all_int = !start.is_floating() && !end.is_floating() && !step.is_floating();
  const DType dt = t.value_or(all_int ? DType::I64 : DType::F32);
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  ANVIL_CHECK(st != 0, ValueError, "arange: step must be nonzero; expected step != 0, got ", step);
  ANVIL_CHECK(std::isfinite(s) && std::isfinite(e), ValueError,
              "arange: bounds must be finite; expected finite start and end, got ", start, " and ", end);
  ANVIL_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError,
              "arange: bounds inconsistent with step sign; expected start <= end for a positive step, got start ",
              start, ", end ", end, ", step ", step);
  const double count = std::ceil((e - s) / st);
  ANVIL_CHECK(count < 9.0e18, ShapeError, "arange: too many elements; expected fewer than 2^63, got ", count);
  const auto n = static_cast<std::int64_t>(count);
  Tensor out = make_on("arange", {n}, dt, d);
  ANVIL_PROFILE_OP_ON("arange", d);
  if (n > 0) detail::dispatch::arange("arange", d, detail::operand(out), n, s, st);
  return out;
}

Tensor linspace(double start, double end, std::int64_t steps, Device d, DType t) {
  ANVIL_CHECK(steps >= 0, ValueError, "linspace: number of steps must be non-negative; expected >= 0, got ", steps);
  Tensor out = make_on("linspace", {steps}, t, d);
  if (steps == 0) return out;
  const double step = steps == 1 ? 0.0 : (end - start) / static_cast<double>(steps - 1);
  ANVIL_PROFILE_OP_ON("linspace", d);
  detail::dispatch::arange("linspace", d, detail::operand(out), steps, start, step);
  // start + (steps - 1) * step can miss `end` by a rounding (linspace(1, 0, 4)
  // would end at 5.6e-17): the last element is `end` itself, as in NumPy.
  if (steps > 1) detail::make_view(out, {1}, {1}, steps - 1).fill_(end);
  return out;
}

Tensor eye(std::int64_t n, std::optional<std::int64_t> m, Device d, DType t) {
  const std::int64_t cols = m.value_or(n);
  ANVIL_CHECK(n >= 0 && cols >= 0, ValueError, "eye: sizes must be non-negative; expected n, m >= 0, got ", n, " and ",
              cols);
  Tensor out = zeros({n, cols}, d, t);
  const std::int64_t k = std::min(n, cols);
  if (k > 0) detail::make_view(out, {k}, {cols + 1}, 0).fill_(1);
  return out;
}

// --- random: one global Philox stream (seed, offset) --------------------------
namespace {
std::mutex g_rng_mutex;
std::uint64_t g_seed = 0x853c49e6748fea9bull;
std::uint64_t g_offset = 0;

// Reserves `counters` Philox counters and returns the first.
std::uint64_t reserve(std::uint64_t counters, std::uint64_t& seed) {
  std::lock_guard lock(g_rng_mutex);
  seed = g_seed;
  const std::uint64_t off = g_offset;
  g_offset += counters;
  return off;
}

Tensor random_fill(detail::RandomKind kind, const Shape& shape, Device d, DType t, double a, double b) {
  const char* op = detail::random_name(kind);
  Tensor out = make_on(op, shape, t, d);
  const std::int64_t n = out.numel();
  if (n == 0) return out;
  detail::RandomArgs r;
  r.kind = kind;
  r.out = detail::operand(out);
  r.numel = n;
  r.a = a;
  r.b = b;
  const auto un = static_cast<std::uint64_t>(n);
  r.offset = reserve(kind == detail::RandomKind::Normal ? (un + 1) / 2 : (un + 3) / 4, r.seed);
  ANVIL_PROFILE_OP_ON(op, d);
  detail::dispatch::random(op, d, r);
  return out;
}
}  // namespace

void manual_seed(std::uint64_t seed) {
  std::lock_guard lock(g_rng_mutex);
  g_seed = seed;
  g_offset = 0;
}

Tensor rand(const Shape& shape, Device d, DType t) {
  ANVIL_CHECK(is_floating(t), DTypeError, "rand: needs a floating dtype; expected f16, bf16, f32 or f64, got ", t);
  return random_fill(detail::RandomKind::Uniform, shape, d, t, 0, 1);
}
Tensor randn(const Shape& shape, Device d, DType t) {
  ANVIL_CHECK(is_floating(t), DTypeError, "randn: needs a floating dtype; expected f16, bf16, f32 or f64, got ", t);
  return random_fill(detail::RandomKind::Normal, shape, d, t, 0, 1);
}
namespace detail {
Tensor dropout_mask(const Tensor& like, double p) {
  return random_fill(RandomKind::KeepMask, like.shape(), like.device(), like.dtype(), p, 1.0 / (1.0 - p));
}
}  // namespace detail

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Device d, DType t) {
  ANVIL_CHECK(low < high, ValueError, "randint: empty range; expected low < high, got low ", low, " and high ", high);
  ANVIL_CHECK(t != DType::Bool, DTypeError, "randint: expected a numeric dtype, got bool");
  return random_fill(detail::RandomKind::Randint, shape, d, t, static_cast<double>(low), static_cast<double>(high));
}

// The *_like factories keep a channels-last tensor's layout
// (MemoryFormat::Preserve, PyTorch's default), so optimiser state and
// gradient buffers lie in their parameter's memory order.
namespace {
Tensor filled_like(const char* op, const Tensor& t, const Scalar& value) {
  Tensor out = make_on(op, t.shape(), t.dtype(), t.device(), t.suggest_memory_format());
  out.fill_(value);
  return out;
}
}  // namespace
Tensor empty_like(const Tensor& t) {
  return make_on("empty", t.shape(), t.dtype(), t.device(), t.suggest_memory_format());
}
Tensor zeros_like(const Tensor& t) { return filled_like("zeros", t, 0); }
Tensor ones_like(const Tensor& t) { return filled_like("ones", t, 1); }
Tensor full_like(const Tensor& t, const Scalar& value) { return filled_like("full", t, value); }
Tensor rand_like(const Tensor& t) { return rand(t.shape(), t.device(), t.dtype()); }
Tensor randn_like(const Tensor& t) { return randn(t.shape(), t.device(), t.dtype()); }
Tensor randint_like(const Tensor& t, std::int64_t low, std::int64_t high) {
  return randint(low, high, t.shape(), t.device(), t.dtype());
}

// --- from host data ------------------------------------------------------------------
Tensor from_host(const void* data, const Shape& shape, DType t, Device d) {
  Tensor out = make_on("from_host", shape, t, d);
  const std::size_t bytes = out.nbytes();
  if (bytes == 0) return out;
  ANVIL_CHECK(data != nullptr, ValueError, "from_host: data is null; expected a pointer to ", bytes, " bytes");
  const detail::TensorImpl& oi = out.impl_ref();
  detail::CopySpan copy_span(cpu(), d, bytes);
  detail::dispatch::copy_from_host(d, oi.storage()->data(), 0, data, bytes);
  if (!d.is_cpu()) detail::record_copy(cpu(), d, bytes);
  return out;
}

template <HasDType T>
Tensor tensor(const std::vector<T>& values, Device d, std::optional<DType> t) {
  return tensor(values, Shape{static_cast<std::int64_t>(values.size())}, d, t);
}

template <HasDType T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, Device d, std::optional<DType> t) {
  ANVIL_CHECK(shape.numel() == static_cast<std::int64_t>(values.size()), ShapeError,
              "tensor: shape does not match the number of values; expected ", shape.numel(), " values for shape ",
              shape, ", got ", values.size());
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<std::uint8_t> bytes(values.begin(), values.end());
    Tensor host = from_host(bytes.data(), shape, DType::Bool, cpu());
    return host.to(d, t.value_or(DType::Bool));
  } else {
    const Tensor host = from_host(values.data(), shape, dtype_v<T>, cpu());
    return host.to(d, t.value_or(dtype_v<T>));
  }
}

#define ANVIL_INSTANTIATE_TENSOR(T)                                               \
  template Tensor tensor<T>(const std::vector<T>&, Device, std::optional<DType>); \
  template Tensor tensor<T>(const std::vector<T>&, const Shape&, Device, std::optional<DType>);
ANVIL_INSTANTIATE_TENSOR(bool)
ANVIL_INSTANTIATE_TENSOR(unsigned char)
ANVIL_INSTANTIATE_TENSOR(int)
ANVIL_INSTANTIATE_TENSOR(long)
ANVIL_INSTANTIATE_TENSOR(long long)
ANVIL_INSTANTIATE_TENSOR(float)
ANVIL_INSTANTIATE_TENSOR(double)
#undef ANVIL_INSTANTIATE_TENSOR

Tensor scalar_tensor(const Scalar& value, Device d, std::optional<DType> t) {
  return full({}, value, d, t.value_or(scalar_dtype(value)));
}

NestedList::NestedList(std::initializer_list<NestedList> children) {
  shape.push_back(static_cast<std::int64_t>(children.size()));
  const NestedList* first = children.size() ? children.begin() : nullptr;
  if (first)
    for (std::int64_t s : first->shape) shape.push_back(s);
  for (const NestedList& c : children) {
    ANVIL_CHECK(c.shape == first->shape, ShapeError,
                "tensor: nested lists are ragged; expected every row to have shape ", first->shape, ", got ", c.shape);
    values.insert(values.end(), c.values.begin(), c.values.end());
  }
}

Tensor tensor(const NestedList& v, Device d, std::optional<DType> t) {
  DType inferred = DType::Bool;
  for (const Scalar& s : v.values)
    inferred = promote(inferred, s.is_floating() ? DType::F32 : s.is_bool() ? DType::Bool : DType::I64);
  if (v.values.empty()) inferred = DType::F32;
  const DType dt = t.value_or(inferred);
  Tensor host = make_empty(v.shape, dt, cpu());
  ANVIL_DISPATCH_HOST(dt, T, {
    T* p = static_cast<T*>(host.raw_data_ptr());
    for (std::size_t i = 0; i < v.values.size(); ++i) p[i] = detail::host_from_scalar<T>(v.values[i]);
  });
  return host.to(d);
}

}  // namespace anvil
