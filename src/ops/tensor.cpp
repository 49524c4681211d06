// The Tensor handle's own members, and moving data between devices
// (DESIGN §4.6): the one place copies between devices happen and are
// counted by the ledger (§4.8).
#include <cmath>

#include "autograd/graph.h"
#include "core/ledger_counters.h"
#include "core/observer.h"
#include "core/transfer.h"
#include "ops/host_dispatch.h"
#include "ops/op_common.h"

namespace anvil {

detail::TensorImpl& Tensor::impl_ref() const {
  ANVIL_CHECK(impl_ != nullptr, ValueError,
              "tensor: use of an undefined tensor; expected a tensor created by a factory or an op, got Tensor()");
  return *impl_;
}

const Shape& Tensor::shape() const { return impl_ref().shape(); }
const Strides& Tensor::strides() const { return impl_ref().strides(); }
std::int64_t Tensor::size(int dim) const { return shape()[detail::wrap_dim(dim, this->dim(), "size")]; }
std::int64_t Tensor::stride(int dim) const { return strides()[detail::wrap_dim(dim, this->dim(), "stride")]; }
int Tensor::dim() const { return impl_ref().dim(); }
std::int64_t Tensor::numel() const { return impl_ref().numel(); }
DType Tensor::dtype() const { return impl_ref().dtype(); }
Device Tensor::device() const { return impl_ref().device(); }
std::int64_t Tensor::offset() const { return impl_ref().offset(); }
bool Tensor::is_contiguous() const { return impl_ref().is_contiguous(); }

// PyTorch's rule: size-1 dims may have any stride; the others step densely,
// the last of `order` fastest.
bool Tensor::is_contiguous(MemoryFormat format) const {
  ANVIL_CHECK(format != MemoryFormat::Preserve, ValueError,
              "is_contiguous: expected MemoryFormat::Contiguous or ChannelsLast, got Preserve");
  if (format == MemoryFormat::Contiguous) return is_contiguous();
  if (dim() != 4) return false;
  const Shape& s = shape();
  const Strides& st = strides();
  std::int64_t expected = 1;
  for (const int d : {1, 3, 2, 0}) {
    if (s[d] == 1) continue;
    if (st[d] != expected) return false;
    expected *= s[d];
  }
  return true;
}

MemoryFormat Tensor::suggest_memory_format() const {
  return !is_contiguous() && is_contiguous(MemoryFormat::ChannelsLast) ? MemoryFormat::ChannelsLast
                                                                       : MemoryFormat::Contiguous;
}
std::size_t Tensor::nbytes() const { return static_cast<std::size_t>(numel()) * element_size(dtype()); }
bool Tensor::shares_storage(const Tensor& other) const { return impl_ref().storage() == other.impl_ref().storage(); }

namespace detail {

// A copy of `src` on `dst` in new storage, channels-last when `src` is (as
// PyTorch's .to keeps the layout), else contiguous: bytes move as they lie.
Tensor transfer(const Tensor& src, Device dst, MemoryFormat format = MemoryFormat::Preserve) {
  backend_checked(dst, "to");
  check_supported("to", Primitive::Storage, src.impl_ref().dtype(), dst);
  if (format == MemoryFormat::Preserve) format = src.suggest_memory_format();
  Tensor out = make_empty(src.shape(), src.dtype(), dst, format);
  transfer_into(out.impl_ref(), contiguous(src, format).impl_ref());
  return out;
}

// A contiguous host copy of `t` (itself when already a contiguous CPU tensor).
Tensor host_contiguous(const Tensor& t) {
  if (t.device().is_cpu()) return contiguous(t);
  return transfer(t, cpu(), MemoryFormat::Contiguous);
}

}  // namespace detail

Tensor Tensor::to(Device d, SourceLocation loc) const {
  if (impl_ref().device() == d) return *this;
  const detail::SiteScope site("to", loc, true);
  Tensor r = detail::transfer(*this, d);
  detail::record_to_device(r, *this);
  return r;
}

Tensor Tensor::to(DType t) const { return to_dtype(*this, t); }

Tensor Tensor::to(Device d, DType t) const {
  // Convert where it is cheaper: before a move when narrowing, after when widening.
  if (element_size(t) <= element_size(dtype())) return to(t).to(d);
  return to(d).to(t);
}

Tensor Tensor::copy_to(Device d, SourceLocation loc) const {
  impl_ref();
  const detail::SiteScope site("copy_to", loc, true);
  Tensor r = detail::transfer(*this, d);
  detail::record_to_device(r, *this);
  return r;
}

template <HasDType T>
T Tensor::item(SourceLocation loc) const {
  const detail::SiteScope site("item", loc, false);
  ANVIL_CHECK(numel() == 1, ShapeError,
              "item: only one-element tensors can be read as a scalar; expected 1 element, got ", numel(), " (shape ",
              shape(), ")");
  const Tensor h = detail::host_contiguous(*this);
  T out{};
  const void* p = static_cast<const char*>(h.impl_ref().storage()->data()) +
                  static_cast<std::size_t>(h.offset()) * element_size(h.dtype());
  ANVIL_DISPATCH_HOST(h.dtype(), S, out = Scalar(detail::host_value(*static_cast<const S*>(p))).to<T>());
  return out;
}

template <HasDType T>
std::vector<T> Tensor::to_vector(SourceLocation loc) const {
  const detail::SiteScope site("to_vector", loc, false);
  // Converted where the data is, unless the device cannot hold T's dtype
  // (to_vector<double>() of a GPU without fp64): then on the host.
  const Device d = impl_ref().device();
  const bool here =
      detail::backend_checked(d, "to_vector").supports(d.index(), detail::Primitive::Storage, dtype_v<T>).ok;
  const Tensor h = here ? detail::host_contiguous(to(dtype_v<T>)) : detail::host_contiguous(*this).to(dtype_v<T>);
  std::vector<T> out(static_cast<std::size_t>(h.numel()));
  if (out.empty()) return out;
  // Read as the dtype's own C++ type: T may be another name of its width
  // (long long for the std::int64_t, i.e. long, the kernels wrote).
  ANVIL_DISPATCH_HOST(h.dtype(), S, {
    const S* p = static_cast<const S*>(h.impl_ref().storage()->data()) + h.offset();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(p[i]);
  });
  return out;
}

template <typename T>
T* Tensor::data_ptr() const {
  ANVIL_CHECK(dtype() == dtype_v<T>, DTypeError, "data_ptr: wrong element type; expected ", dtype(),
              ", got a request for ", dtype_v<T>);
  return static_cast<T*>(raw_data_ptr());
}

void* Tensor::raw_data_ptr() const {
  const detail::TensorImpl& i = impl_ref();
  ANVIL_CHECK(i.device().is_cpu(), NotSupported, "data_ptr: only CPU tensors expose a host pointer; expected cpu, got ",
              i.device(), "; use .cpu() or to_vector()");
  if (i.storage()->data() == nullptr) return nullptr;
  return static_cast<char*>(i.storage()->data()) + static_cast<std::size_t>(i.offset()) * element_size(i.dtype());
}

// Host reads for every fundamental type with a dtype (dtype_of): each C++
// name of a width once, whichever of them the fixed-width aliases are.
#define ANVIL_INSTANTIATE_HOST_READ(T)              \
  template T Tensor::item<T>(SourceLocation) const; \
  template std::vector<T> Tensor::to_vector<T>(SourceLocation) const;
ANVIL_INSTANTIATE_HOST_READ(bool)
ANVIL_INSTANTIATE_HOST_READ(unsigned char)
ANVIL_INSTANTIATE_HOST_READ(int)
ANVIL_INSTANTIATE_HOST_READ(long)
ANVIL_INSTANTIATE_HOST_READ(long long)
ANVIL_INSTANTIATE_HOST_READ(float)
ANVIL_INSTANTIATE_HOST_READ(double)
#undef ANVIL_INSTANTIATE_HOST_READ
// A pointer into the storage only as the type the kernels write.
#define ANVIL_INSTANTIATE_HOST_ACCESS(T) template T* Tensor::data_ptr<T>() const;
ANVIL_INSTANTIATE_HOST_ACCESS(bool)
ANVIL_INSTANTIATE_HOST_ACCESS(std::uint8_t)
ANVIL_INSTANTIATE_HOST_ACCESS(std::int32_t)
ANVIL_INSTANTIATE_HOST_ACCESS(std::int64_t)
ANVIL_INSTANTIATE_HOST_ACCESS(float)
ANVIL_INSTANTIATE_HOST_ACCESS(double)
#undef ANVIL_INSTANTIATE_HOST_ACCESS

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  detail::check_defined("allclose", a, 0);
  detail::check_defined("allclose", b, 1);
  if (!(a.shape() == b.shape())) return false;
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (std::size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) || std::isnan(vb[i])) return false;
    if (va[i] == vb[i]) continue;  // equal infinities
    if (!(std::abs(va[i] - vb[i]) <= atol + rtol * std::abs(vb[i]))) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  detail::check_defined("equal", a, 0);
  detail::check_defined("equal", b, 1);
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  return a.to_vector<double>() == b.to_vector<double>();
}

bool Tensor::allclose(const Tensor& other, double rtol, double atol) const {
  return anvil::allclose(*this, other, rtol, atol);
}
bool Tensor::equal(const Tensor& other) const { return anvil::equal(*this, other); }

}  // namespace anvil
