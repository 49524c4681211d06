#include "distributed/staging.h"

#include <algorithm>

#include "anvil/ops.h"
#include "core/transfer.h"

namespace anvil::dist::detail {

namespace {

// A view of host storage at `byte_offset` as a contiguous tensor.
Tensor host_view(const std::shared_ptr<anvil::detail::Storage>& storage, std::size_t byte_offset, const Shape& shape,
                 DType dtype) {
  return Tensor(std::make_shared<anvil::detail::TensorImpl>(
      storage, shape, contiguous_strides(shape), static_cast<std::int64_t>(byte_offset / element_size(dtype)), dtype));
}

void* data_of(const Tensor& t) {
  const auto& impl = t.impl_ref();
  return static_cast<char*>(impl.storage()->data()) +
         static_cast<std::size_t>(impl.offset()) * element_size(impl.dtype());
}

Buffer buffer_of(const Tensor& t) { return Buffer{data_of(t), static_cast<std::size_t>(t.numel()), t.dtype()}; }

}  // namespace

void Call::reserve(std::size_t bytes) {
  if (!host_ || (staging_ && staging_->nbytes() >= bytes)) return;
  staging_.reset();  // return the old buffer first
  staging_ = std::make_shared<anvil::detail::Storage>(cpu(), std::max<std::size_t>(bytes, 64));
}

Tensor Call::in(const Tensor& t, std::size_t offset, bool copy) {
  if (host_) {
    if (t.device().is_cpu() && t.is_contiguous()) return t;
    Tensor host = host_view(staging_, offset, t.shape(), t.dtype());
    if (copy) anvil::detail::transfer_into(host.impl_ref(), t.contiguous().impl_ref());
    return host;
  }
  if (t.is_contiguous()) return t;
  return copy ? t.contiguous() : empty(t.shape(), t.dtype(), t.device());
}

Tensor Call::scratch(std::size_t offset, const Shape& shape) {
  if (host_) return host_view(staging_, offset, shape, info().dtype);
  return empty(shape, info().dtype, info().device);
}

Tensor Call::block(const Tensor& all, int r) {
  if (!host_) return all[r];
  Shape shape = all.shape();
  shape.erase(0);
  const std::size_t size = static_cast<std::size_t>(all.numel() / all.shape()[0]) * element_size(all.dtype());
  const std::size_t offset = static_cast<std::size_t>(all.impl_ref().offset()) * element_size(all.dtype());
  return host_view(staging_, offset + size * static_cast<std::size_t>(r), shape, all.dtype());
}

void Call::fill(const Tensor& buf, const Tensor& src) {
  if (host_) {
    anvil::detail::transfer_into(buf.impl_ref(), src.contiguous().impl_ref());
  } else {
    Tensor(buf).copy_(src);
  }
}

void Call::out(const Tensor& t, const Tensor& buf) {
  if (buf.is_same(t)) return;
  if (host_ && t.is_contiguous()) {
    anvil::detail::transfer_into(t.impl_ref(), buf.impl_ref());
  } else {
    Tensor strided = t;
    strided.copy_(host_ ? buf.to(t.device()) : buf);
  }
}

void Call::allreduce(const Tensor& buf) {
  arrive();
  engine_.allreduce(buffer_of(buf), info().op, watch_);
}

void Call::broadcast(const Tensor& buf) {
  arrive();
  engine_.broadcast(buffer_of(buf), info().root, watch_);
}

void Call::allgather(const Tensor& in, const Tensor& out) {
  arrive();
  engine_.allgather(buffer_of(in), buffer_of(out), watch_);
}

void Call::reduce_scatter(const Tensor& in, const Tensor& out) {
  arrive();
  engine_.reduce_scatter(buffer_of(in), buffer_of(out), info().op, watch_);
}

}  // namespace anvil::dist::detail
