#include "ops/dispatch.h"

#include "anvil/error.h"

namespace anvil::detail {

void check_supported(const char* op, Primitive p, DType t, Device d) {
  const Support s = backend_checked(d, op).supports(d.index(), p, t);
  if (s.ok) [[likely]]
    return;
  throw NotSupported(cat(op, ": ", t, " is not supported on ", d, " (", s.reason, "); expected ", s.instead, ", got ",
                         t, "; use .to(", s.instead, ") or another device"));
}

namespace dispatch {

namespace {
// The backend of `d` (a device a tensor already lives on, so it exists),
// once every dtype in `dtypes` passed the check.
Backend& checked(const char* op, Primitive p, Device d, std::initializer_list<DType> dtypes) {
  Backend& b = *backend_for(d.type());
  for (DType t : dtypes) {
    if (!b.supports(d.index(), p, t).ok) [[unlikely]]
      check_supported(op, p, t, d);
  }
  return b;
}

Backend& checked(const char* op, Primitive p, Device d, const ElementwiseArgs& a) {
  Backend& b = checked(op, p, d, {a.out.dtype});
  for (int k = 0; k < a.nin; ++k) checked(op, p, d, {a.in[k].dtype});
  return b;
}
}  // namespace

void fill(const char* op, Device d, const KernelOperand& out, std::int64_t numel, const Scalar& value) {
  checked(op, Primitive::Fill, d, {out.dtype}).fill(d.index(), out, numel, value);
}

void arange(const char* op, Device d, const KernelOperand& out, std::int64_t numel, double start, double step) {
  checked(op, Primitive::Arange, d, {out.dtype}).arange(d.index(), out, numel, start, step);
}

void copy(const char* op, Device d, const ElementwiseArgs& a) { checked(op, Primitive::Copy, d, a).copy(d.index(), a); }

void unary(Device d, UnaryOp op, const UnaryParams& params, const ElementwiseArgs& a) {
  checked(name(op), Primitive::Unary, d, a).unary(d.index(), op, params, a);
}

void binary(Device d, BinaryOp op, const ElementwiseArgs& a) {
  checked(name(op), Primitive::Binary, d, a).binary(d.index(), op, a);
}

void where(Device d, const ElementwiseArgs& a) { checked("where", Primitive::Where, d, a).where(d.index(), a); }

void reduce(const char* op, Device d, ReduceOp r, const ReduceArgs& a) {
  checked(op, Primitive::Reduce, d, {a.in.dtype, a.out.dtype}).reduce(d.index(), r, a);
}

void gemm(const char* op, Device d, const GemmArgs& a) {
  checked(op, Primitive::Gemm, d, {a.dtype}).gemm(d.index(), a);
}

void index(const char* op, Device d, const IndexArgs& a) {
  checked(op, Primitive::Index, d, {a.out.dtype, a.src.dtype, a.index.dtype}).index(d.index(), a);
}

void random(const char* op, Device d, const RandomArgs& a) {
  checked(op, Primitive::Random, d, {a.out.dtype}).random(d.index(), a);
}

void scan(const char* op, Device d, const ScanArgs& a) {
  checked(op, Primitive::Scan, d, {a.dtype}).scan(d.index(), a);
}

void argsort(const char* op, Device d, const SortArgs& a) {
  checked(op, Primitive::Sort, d, {a.dtype, DType::I64}).argsort(d.index(), a);
}

void copy_from_host(Device d, void* dst, std::size_t dst_offset, const void* src, std::size_t bytes) {
  backend_for(d.type())->copy_from_host(d.index(), dst, dst_offset, src, bytes);
}

// ---- the fused families ----------------------------------------------------------

namespace {
// The backend of `d`, a device a tensor already lives on (so it exists).
Backend& of(Device d) { return *backend_for(d.type()); }
}  // namespace

bool supports_fused(Device d, FusedOp op, DType t) noexcept { return of(d).supports_fused(op, t, d.index()); }
bool supports_fused_conv2d(Device d, const Conv2dArgs& a) noexcept { return of(d).supports_fused_conv2d(d.index(), a); }
bool supports_fused_rnn(Device d, const RnnArgs& a) noexcept { return of(d).supports_fused_rnn(d.index(), a); }
bool supports_optimizer_step(Device d, OptimizerKind kind, DType t) noexcept {
  return of(d).supports_optimizer_step(kind, t, d.index());
}
bool supports_optimizer_step_list(Device d, OptimizerKind kind, DType t) noexcept {
  return of(d).supports_optimizer_step_list(kind, t, d.index());
}

void im2col(Device d, const Im2colArgs& a) { of(d).im2col(d.index(), a); }
void col2im(Device d, const Im2colArgs& a) { of(d).col2im(d.index(), a); }
void max_pool2d(Device d, const Pool2dArgs& a) { of(d).max_pool2d(d.index(), a); }
void max_pool2d_backward(Device d, const Pool2dArgs& a) { of(d).max_pool2d_backward(d.index(), a); }
void conv2d(Device d, const Conv2dArgs& a) { of(d).conv2d(d.index(), a); }
void conv2d_backward_data(Device d, const Conv2dArgs& a) { of(d).conv2d_backward_data(d.index(), a); }
void conv2d_backward_weight(Device d, const Conv2dArgs& a) { of(d).conv2d_backward_weight(d.index(), a); }
void conv2d_backward(Device d, const Conv2dArgs& data, const Conv2dArgs& weight) {
  of(d).conv2d_backward(d.index(), data, weight);
}
void unary_binary(Device d, BinaryOp op, const BinaryPrologue& prologue, const ElementwiseArgs& a) {
  of(d).unary_binary(d.index(), op, prologue, a);
}
void batch_norm(Device d, const BatchNormArgs& a) { of(d).batch_norm(d.index(), a); }
void batch_norm_backward(Device d, const BatchNormArgs& a) { of(d).batch_norm_backward(d.index(), a); }
void layer_norm(Device d, const LayerNormArgs& a) { of(d).layer_norm(d.index(), a); }
void layer_norm_backward(Device d, const LayerNormArgs& a) { of(d).layer_norm_backward(d.index(), a); }
std::size_t rnn_reserve_bytes(Device d, const RnnArgs& a) { return of(d).rnn_reserve_bytes(d.index(), a); }
void rnn_forward(Device d, const RnnArgs& a) { of(d).rnn_forward(d.index(), a); }
void rnn_backward(Device d, const RnnArgs& a) { of(d).rnn_backward(d.index(), a); }
void interpolate(Device d, const InterpolateArgs& a) { of(d).interpolate(d.index(), a); }
void interpolate_backward(Device d, const InterpolateArgs& a) { of(d).interpolate_backward(d.index(), a); }
void softmax(Device d, const SoftmaxArgs& a) { of(d).softmax(d.index(), a); }
void softmax_backward(Device d, const SoftmaxArgs& a) { of(d).softmax_backward(d.index(), a); }
void optimizer_step(Device d, const OptimizerStepArgs& a) { of(d).optimizer_step(d.index(), a); }
void optimizer_step_list(Device d, const OptimizerStepListArgs& a) { of(d).optimizer_step_list(d.index(), a); }

}  // namespace dispatch
}  // namespace anvil::detail
