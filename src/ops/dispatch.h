// The one way the op frontend reaches a backend's primitives (DESIGN §2
// "Capabilities are asked once"). Each function asks the device's backend
// whether it runs the primitive in every dtype it touches, raises
// NotSupported if not, and then runs it:
//
//   dispatch::unary(d, UnaryOp::Exp, {}, args);
//   // on a device without fp64, for f64 args:
//   // NotSupported "exp: f64 is not supported on opencl:0 (the device has no
//   //   fp64); expected f32, got f64; use .to(f32) or another device"
//
// Note [Capabilities are asked once]
// Ops never call Backend primitives directly, so no op can forget the check
// and no kernel compile error is how a user learns what a device lacks.
// Creating a tensor without a primitive (empty(), to() from another device,
// from_host) asks Primitive::Storage: a dtype a device cannot compute in
// cannot live there either (as with float64 on PyTorch's MPS), so an op can
// never meet one half way through a composite.
#pragma once

#include "core/backend.h"

namespace anvil::detail {

// NotSupported unless device `d` runs primitive `p` in dtype `t`; `op` is
// the user's op for the message.
void check_supported(const char* op, Primitive p, DType t, Device d);

namespace dispatch {

void fill(const char* op, Device d, const KernelOperand& out, std::int64_t numel, const Scalar& value);
void arange(const char* op, Device d, const KernelOperand& out, std::int64_t numel, double start, double step);
void copy(const char* op, Device d, const ElementwiseArgs& a);
void unary(Device d, UnaryOp op, const UnaryParams& params, const ElementwiseArgs& a);
void binary(Device d, BinaryOp op, const ElementwiseArgs& a);
void where(Device d, const ElementwiseArgs& a);
void reduce(const char* op, Device d, ReduceOp r, const ReduceArgs& a);
void gemm(const char* op, Device d, const GemmArgs& a);
void index(const char* op, Device d, const IndexArgs& a);
void random(const char* op, Device d, const RandomArgs& a);
void scan(const char* op, Device d, const ScanArgs& a);
void argsort(const char* op, Device d, const SortArgs& a);

// Host data into a new tensor's storage on `d` (from_host).
void copy_from_host(Device d, void* dst, std::size_t dst_offset, const void* src, std::size_t bytes);

// The fused families (backend.h, FusedOp), which a backend may add for
// speed. The frontend asks the supports_* entries first and runs its
// composite where they say no (has_fused), so the entries after them only
// forward to the backend of `d`.
bool supports_fused(Device d, FusedOp op, DType t) noexcept;
bool supports_fused_conv2d(Device d, const Conv2dArgs& a) noexcept;
bool supports_fused_rnn(Device d, const RnnArgs& a) noexcept;
bool supports_optimizer_step(Device d, OptimizerKind kind, DType t) noexcept;
bool supports_optimizer_step_list(Device d, OptimizerKind kind, DType t) noexcept;

void im2col(Device d, const Im2colArgs& a);
void col2im(Device d, const Im2colArgs& a);
void max_pool2d(Device d, const Pool2dArgs& a);
void max_pool2d_backward(Device d, const Pool2dArgs& a);
void conv2d(Device d, const Conv2dArgs& a);
void conv2d_backward_data(Device d, const Conv2dArgs& a);
void conv2d_backward_weight(Device d, const Conv2dArgs& a);
void conv2d_backward(Device d, const Conv2dArgs& data, const Conv2dArgs& weight);
void unary_binary(Device d, BinaryOp op, const BinaryPrologue& prologue, const ElementwiseArgs& a);
void batch_norm(Device d, const BatchNormArgs& a);
void batch_norm_backward(Device d, const BatchNormArgs& a);
void layer_norm(Device d, const LayerNormArgs& a);
void layer_norm_backward(Device d, const LayerNormArgs& a);
std::size_t rnn_reserve_bytes(Device d, const RnnArgs& a);
void rnn_forward(Device d, const RnnArgs& a);
void rnn_backward(Device d, const RnnArgs& a);
void interpolate(Device d, const InterpolateArgs& a);
void interpolate_backward(Device d, const InterpolateArgs& a);
void softmax(Device d, const SoftmaxArgs& a);
void softmax_backward(Device d, const SoftmaxArgs& a);
void optimizer_step(Device d, const OptimizerStepArgs& a);
void optimizer_step_list(Device d, const OptimizerStepListArgs& a);

}  // namespace dispatch
}  // namespace anvil::detail
