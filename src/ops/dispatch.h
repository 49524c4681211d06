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

}  // namespace dispatch
}  // namespace anvil::detail
