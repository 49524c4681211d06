// What every op frontend shares: argument checks, the device check of
// DESIGN §4.5, broadcasting and building kernel arguments. Backends never
// see an argument these have not vetted.
#pragma once

#include <initializer_list>

#include "anvil/ops.h"
#include "core/backend.h"
#include "core/tensor_impl.h"
#include "ops/dispatch.h"
#include "ops/tensor_make.h"

namespace anvil::detail {

// Dropout's mask for `like` (its shape, device and floating dtype, always
// contiguous): 1 / (1 - p) where the element's uniform is >= p, else 0,
// from one Philox fill (RandomKind::KeepMask).
Tensor dropout_mask(const Tensor& like, double p);

// ValueError when `t` is undefined; `arg` is its position.
void check_defined(const char* op, const Tensor& t, int arg = 0);

// DeviceMismatch unless every tensor is on one device (DESIGN §4.5):
// "add: all tensors must be on one device; argument 0 is on opencl:0,
//  argument 1 is on cpu; move one with .to(opencl:0)". Also checks each is
// defined. Returns the common device.
Device check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);

// The same check over a list (cat, stack): "argument i" is the list index.
Device check_same_device(const char* op, const std::vector<Tensor>& tensors);

// A dim in [-ndim, ndim) made non-negative; IndexError otherwise.
int wrap_dim(int dim, int ndim, const char* op);

// Strides of `t` seen through broadcasting to `shape` (0 where broadcast).
void broadcast_strides(const Tensor& t, const Shape& shape, std::int64_t* out_strides);

// Elementwise arguments for out = f(inputs...), all broadcast to out's shape,
// dims coalesced. A null input pointer means "the scalar in `scalars`".
ElementwiseArgs elementwise_args(const Tensor& out, std::initializer_list<const Tensor*> inputs,
                                 std::initializer_list<Scalar> scalars = {}, DType scalar_dtype = DType::F32);

// Whether t holds each of its elements exactly once, in some order of its
// dims: contiguous, channels-last, a transposed matrix… (never an expanded
// view with stride 0, nor one with gaps). Such a tensor can take an in-place
// add, or go to a kernel that accepts any dense layout.
bool is_dense_non_overlapping(const Tensor& t);

// The layout of an elementwise result of `shape` (anvil/tensor.h,
// MemoryFormat): that of the first input of that very shape, so a
// channels-last activation stays channels-last through ReLU and the
// residual add, and a broadcast bias follows the tensor it is added to.
MemoryFormat output_format(const Shape& shape, std::initializer_list<const Tensor*> inputs);

// Runs a reduction primitive over `dims` (empty = all), recorded for
// autograd like the public reductions. The input is converted to `out_dtype`
// first (except for arg ops); every result is multiplied by `scale` (a mean
// is a sum with scale 1/n).
Tensor reduce_op(ReduceOp op, const char* opname, const Tensor& x, const Dims& dims, bool keepdim, DType out_dtype,
                 double scale = 1.0);

// `t` converted to `dtype` (itself when it already is); errors name op "to".
Tensor cast(const Tensor& t, DType dtype);

// Runs the copy primitive: dst = src (broadcast, converted); same device.
void copy_into(const Tensor& dst, const Tensor& src, const char* op = "copy");

// Note [Overlapping operands]
// An op that writes into existing memory (copy_, x.add_(y), add_out, mm_out)
// with an input that shares some but not all of its output's elements, such
// as x[:-1].copy_(x[1:]), would read elements it has already overwritten, in
// an order that depends on the device and its threads. PyTorch raises; anvil
// reads such an input from a copy (NumPy's rule), so the result is what the
// input held before the op. An input that is exactly the output (same
// elements at every index, as in x.add_(x)) reads each element before it is
// written and is not copied (unless the op is not elementwise: a GEMM reads
// a row of A after writing into it); nor is an input in other memory.
//
// `input`, or a copy of it where it overlaps `out` (but is not exactly `out`,
// for an elementwise op).
Tensor unaliased(const Tensor& input, const Tensor& out, bool elementwise = true);

// An activation's gradient as one elementwise op (BinaryOp ReluBackward…,
// Note [Activation backward as one op]): `saved` is the forward's output
// (relu, sigmoid, tanh) or input (gelu, softplus). Recorded for autograd.
Tensor activation_backward(BinaryOp op, const Tensor& grad, const Tensor& saved);
// An elementwise primitive of anvil/ops.def with its frontend (dtype rule,
// autocast, broadcasting, autograd): what the public functions call.
Tensor unary_op(UnaryOp op, const Tensor& x, const UnaryParams& params = {});
Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b);
// a op s, or s op a when scalar_first.
Tensor binary_scalar_op(BinaryOp op, const Tensor& a, const Scalar& s, bool scalar_first);

// Whether x's backend has every fused kernel of a path (backend.h, FusedOp)
// for x's dtype: then the op uses them, otherwise its composite.
// ANVIL_NO_FUSED=1 hides every fused kernel, so the composites run on every
// backend: ctest runs test_nn, test_autograd and test_core_fusion a second
// time with it set (tests/CMakeLists.txt), which keeps them tested.
bool has_fused(const Tensor& x, std::initializer_list<FusedOp> ops);

}  // namespace anvil::detail
