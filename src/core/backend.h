// The backend interface (DESIGN §2): one object per DeviceType, registered in
// a table indexed by the type. Backends implement primitives only; every
// validation, broadcast, dtype promotion and device check has already been
// done by the op frontend (src/ops) when a primitive is called, so a backend
// may assume well-formed arguments: same device, equal dtypes where the
// primitive says so, shapes already broadcast.
//
// Optional members have a default that throws NotSupported (marked
// "optional"). A device backend that runs the shared kernels of src/kernels
// implements none of this itself: it supplies a runtime to
// kernels::DeviceBackend (backends/common/device_backend.h). Adding a
// backend: docs/adding-a-backend.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "anvil/device.h"
#include "anvil/dtype.h"
#include "anvil/runtime.h"
#include "anvil/shape.h"

namespace anvil::detail {

// ---- operands as kernels see them -------------------------------------------------
// `data` is the storage's handle: a host pointer on the CPU, a cl_mem on
// OpenCL, a device pointer on CUDA. `offset` counts elements from the
// storage's start. Strides are in elements; 0 means broadcast.
struct KernelOperand {
  void* data = nullptr;
  std::int64_t offset = 0;
  DType dtype = DType::F32;
  std::int64_t strides[kMaxDims] = {};
  // A C++ scalar instead of a tensor (`x + 2`): data is null, the value is
  // `scalar`, converted to `dtype` by the kernel.
  bool is_scalar = false;
  Scalar scalar;
};

// All operands of an elementwise primitive share one iteration shape (the
// output's), already coalesced: adjacent dims that are contiguous in every
// operand are merged, so a contiguous op arrives as ndim == 1.
struct ElementwiseArgs {
  int ndim = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t numel = 0;
  KernelOperand out;
  KernelOperand in[3];
  int nin = 0;
  bool contiguous() const noexcept;  // every tensor operand dense in order
};

// ---- the elementwise and reduction ops: one row each in anvil/ops.def -------------
// Their enums, names and properties below are expanded from that table; so is
// every switch over them elsewhere (kernel requests, CPU loops, autocast,
// gradient rules, public functions, Python bindings).

// The columns of a row (anvil/ops.def says what each value means).
enum class UnaryRule : std::uint8_t { Any, Numeric, Float, Rounding, ToBool };
enum class BinaryRule : std::uint8_t { Any, Numeric, TrueDiv, Float, FloatOnly, Bitwise, Shift, Compare };
enum class ReduceKind : std::uint8_t { Sum, Prod, Extreme, Arg };
enum class ScanKind : std::uint8_t { Sum };
enum class BinaryForms : std::uint8_t { Internal, Tensor, Scalar, ScalarFirst };  // each includes the ones before
enum class AutocastPolicy : std::uint8_t { Keep, Fp32 };
enum class CostClass : std::uint8_t { Load, Libm, VectorMath };

enum class UnaryOp : std::uint8_t {
#define ANVIL_UNARY_OP(Op, ...) Op,
#include "anvil/ops.def"
  Count
};
enum class BinaryOp : std::uint8_t {
#define ANVIL_BINARY_OP(Op, ...) Op,
#include "anvil/ops.def"
  Count
};
enum class ReduceOp : std::uint8_t {
#define ANVIL_REDUCE_OP(Op, ...) Op,
#include "anvil/ops.def"
  Count
};
enum class ScanOp : std::uint8_t {
#define ANVIL_SCAN_OP(Op, ...) Op,
#include "anvil/ops.def"
  Count
};

namespace op_table {
struct UnaryRow {
  const char* name;
  UnaryRule rule;
  AutocastPolicy autocast;
  CostClass cost;
  const char* grad;  // the grad_fn name of its rule; "NotDifferentiable"
};
struct BinaryRow {
  const char* name;
  BinaryRule rule;
  AutocastPolicy autocast;
  CostClass cost;
  const char* grad;
  BinaryForms forms;
};
struct ReduceRow {
  const char* name;
  ReduceKind kind;
};
struct ScanRow {
  const char* name;
  ScanKind kind;
  const char* grad;
};
inline constexpr UnaryRow kUnary[] = {
#define ANVIL_UNARY_OP(Op, name, rule, autocast, cost, grad, doc) \
  {#name, UnaryRule::rule, AutocastPolicy::autocast, CostClass::cost, #grad},
#include "anvil/ops.def"
};
inline constexpr BinaryRow kBinary[] = {
#define ANVIL_BINARY_OP(Op, name, rule, autocast, cost, grad, forms, doc) \
  {#name, BinaryRule::rule, AutocastPolicy::autocast, CostClass::cost, #grad, BinaryForms::forms},
#include "anvil/ops.def"
};
inline constexpr ReduceRow kReduce[] = {
#define ANVIL_REDUCE_OP(Op, name, kind) {#name, ReduceKind::kind},
#include "anvil/ops.def"
};
inline constexpr ScanRow kScan[] = {
#define ANVIL_SCAN_OP(Op, name, kind, grad, doc) {#name, ScanKind::kind, #grad},
#include "anvil/ops.def"
};
static_assert(std::size(kUnary) == static_cast<std::size_t>(UnaryOp::Count));
static_assert(std::size(kBinary) == static_cast<std::size_t>(BinaryOp::Count));
static_assert(std::size(kReduce) == static_cast<std::size_t>(ReduceOp::Count));
static_assert(std::size(kScan) == static_cast<std::size_t>(ScanOp::Count));
}  // namespace op_table

constexpr const op_table::UnaryRow& row(UnaryOp op) noexcept { return op_table::kUnary[static_cast<int>(op)]; }
constexpr const op_table::BinaryRow& row(BinaryOp op) noexcept { return op_table::kBinary[static_cast<int>(op)]; }
constexpr const op_table::ReduceRow& row(ReduceOp op) noexcept { return op_table::kReduce[static_cast<int>(op)]; }
constexpr const op_table::ScanRow& row(ScanOp op) noexcept { return op_table::kScan[static_cast<int>(op)]; }

// "exp", "add", "sum", … (kernel symbols and test case ids derive from it)
constexpr const char* name(UnaryOp op) noexcept { return op < UnaryOp::Count ? row(op).name : "?"; }
constexpr const char* name(BinaryOp op) noexcept { return op < BinaryOp::Count ? row(op).name : "?"; }
constexpr const char* name(ReduceOp op) noexcept { return op < ReduceOp::Count ? row(op).name : "?"; }
constexpr const char* name(ScanOp op) noexcept { return op < ScanOp::Count ? row(op).name : "?"; }

// What a unary op is defined on, asked by the op frontend and the kernels
// alike: the math functions compute an integer tensor in the default float
// dtype; the rounding ops return an integer tensor as it is, so their
// kernels exist for floats only.
constexpr bool computes_in_float(UnaryOp op) noexcept { return row(op).rule == UnaryRule::Float; }
constexpr bool is_rounding(UnaryOp op) noexcept { return row(op).rule == UnaryRule::Rounding; }
// Kernels of these ops exist for floats only (the frontend sends integers elsewhere).
constexpr bool is_float_only(UnaryOp op) noexcept { return computes_in_float(op) || is_rounding(op); }
// Clamp: uses UnaryParams lo/hi (±inf when open).
struct UnaryParams {
  double lo = 0, hi = 0;
};

constexpr bool is_comparison(BinaryOp op) noexcept { return row(op).rule == BinaryRule::Compare; }
constexpr bool is_activation_backward(BinaryOp op) noexcept { return row(op).rule == BinaryRule::FloatOnly; }
constexpr bool is_bitwise(BinaryOp op) noexcept {
  return row(op).rule == BinaryRule::Bitwise || row(op).rule == BinaryRule::Shift;
}
constexpr bool is_shift(BinaryOp op) noexcept { return row(op).rule == BinaryRule::Shift; }
// Integers compute in the default float dtype (true division, atan2), as in PyTorch.
constexpr bool computes_in_float(BinaryOp op) noexcept {
  return row(op).rule == BinaryRule::TrueDiv || row(op).rule == BinaryRule::Float;
}
// Kernels for floats only.
constexpr bool is_float_only(BinaryOp op) noexcept {
  return row(op).rule == BinaryRule::Float || row(op).rule == BinaryRule::FloatOnly;
}

// ArgMax/ArgMin write i64 indices.
constexpr bool is_arg_reduce(ReduceOp op) noexcept { return row(op).kind == ReduceKind::Arg; }

// Reduction: the input's dims are ordered [kept..., reduced...]; `out` is
// contiguous over the kept dims (nkept of them). Sum and SumSquares are
// multiplied by `scale` (mean passes 1/n). ArgMax/ArgMin write i64 indices into the
// row-major flattening of the reduced dims.
struct ReduceArgs {
  int nkept = 0, nreduced = 0;
  std::int64_t shape[kMaxDims] = {};  // kept dims then reduced dims
  std::int64_t out_numel = 0, reduce_numel = 0;
  KernelOperand out;  // strides over the kept dims
  KernelOperand in;   // strides over kept then reduced dims
  double scale = 1.0;
};

// C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b], row-major. A matrix is
// {data, offset, ld, batch_stride, trans}: element (i, j) of op(A) is at
// offset + b*batch_stride + (trans ? j*ld + i : i*ld + j).
//
// Note [Two-level batches]
// Attention's heads are views [N, L, h, d] -> [N, h, L, d]: their batch dims
// (N, h) step by two strides that no single one covers. Where the backend
// says supports_fused(FusedOp::GemmTwoLevelBatch, dtype), the frontend hands
// it such a batch rather than copying each operand: batch item b is then at
// offset + (b / inner_batch)*outer_stride + (b % inner_batch)*batch_stride
// (gemm_batch_offset). inner_batch 0 is the one-level batch above, which is
// all other backends ever see.
struct GemmMatrix {
  void* data = nullptr;
  std::int64_t offset = 0;
  std::int64_t ld = 0;
  std::int64_t batch_stride = 0;
  bool trans = false;
  std::int64_t outer_stride = 0;  // only with GemmArgs::inner_batch
};
struct GemmArgs {
  DType dtype = DType::F32;
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  std::int64_t inner_batch = 0;  // Note [Two-level batches]; 0: one level
  GemmMatrix a, b, c;            // c.trans is always false
  double alpha = 1.0, beta = 0.0;
  // Only where supports_fused(FusedOp::GemmBias, dtype) says yes, and then
  // with beta 0: when set, C[b] = alpha * op(A[b]) @ op(B[b]) + bias, a
  // contiguous row of n elements of `dtype` (from bias_offset) added to
  // every row (addmm's and Linear's bias, without a pass writing it into C).
  const void* bias = nullptr;
  std::int64_t bias_offset = 0;
};
inline bool is_two_level(const GemmArgs& g) noexcept { return g.inner_batch > 0; }
// The element offset of batch item b's matrix in x (Note [Two-level batches]).
inline std::int64_t gemm_batch_offset(const GemmArgs& g, const GemmMatrix& x, std::int64_t b) noexcept {
  if (!is_two_level(g)) return x.offset + b * x.batch_stride;
  return x.offset + b / g.inner_batch * x.outer_stride + b % g.inner_batch * x.batch_stride;
}

// out = x gathered along `dim` with `index` (i64, contiguous):
//   IndexSelect: out[.., i, ..] = x[.., index[i], ..]    (index is 1-D)
//   Gather:      out[i][j][k] = x[index[i][j][k]][j][k]  (dim 0; index has out's shape)
// or accumulated into out (in place; src and index have out's shape except
// along `dim`, where they have src_dim_size entries):
//   IndexAdd:    out[.., index[i], ..] += src[.., i, ..] (index is 1-D)
//   ScatterAdd:  out[index[i][j][k]][j][k] += src[i][j][k] (dim 0)
// or copied into out (in place, the same layout as IndexAdd):
//   IndexCopy:   out[.., index[i], ..] = src[.., i, ..]  (index is 1-D)
// The adds and copies run in index order for each output element on every
// backend, so duplicate indices give the same bits every run and on every
// device (for IndexCopy, the last of them wins, as NumPy's x[idx] = v).
// All tensors are given as shape + strides over `ndim` dims (out's shape).
enum class IndexOp : std::uint8_t { IndexSelect, Gather, IndexAdd, ScatterAdd, IndexCopy, Count };
// Writes into out along the index (IndexAdd, ScatterAdd, IndexCopy) rather
// than reading src along it.
inline bool is_scatter(IndexOp op) noexcept { return op >= IndexOp::IndexAdd && op != IndexOp::Count; }
const char* name(IndexOp op) noexcept;  // "index_select", "gather", "index_add", "scatter_add", "index_copy"
struct IndexArgs {
  IndexOp op = IndexOp::IndexSelect;
  int ndim = 0, dim = 0;
  std::int64_t shape[kMaxDims] = {};  // out's shape
  std::int64_t numel = 0;
  std::int64_t src_dim_size = 0;  // src.size(dim): bounds of a gather, the number of adds of an accumulation
  KernelOperand out, src, index;
};

// Philox 4x32-10 fill of a contiguous tensor: element i uses counter
// (offset + i / 4) and lane i % 4 (see src/kernels/philox.h), so every
// backend produces the same numbers. KeepMask is dropout's mask from the
// uniform u of element i: b where u >= a, else 0 (a = p, b = 1 / (1 - p)).
enum class RandomKind : std::uint8_t { Uniform, Normal, Randint, KeepMask };
struct RandomArgs {
  RandomKind kind = RandomKind::Uniform;
  KernelOperand out;  // contiguous
  std::int64_t numel = 0;
  std::uint64_t seed = 0, offset = 0;
  double a = 0, b = 1;  // Randint: [a, b); KeepMask: p and the kept value
};
// The op a fill is reported as (profiler, ledger).
inline const char* random_name(RandomKind k) noexcept {
  static constexpr const char* kNames[] = {"rand", "randn", "randint", "dropout_mask"};
  return kNames[static_cast<int>(k)];
}

// Row primitives (cumsum, sort): the op frontend moves the dim last and makes
// the input contiguous, so both see `rows` contiguous rows of `len`.
// Scan: out[r][i] = in[r][0] + ... + in[r][i]; reverse sums from the row's
// end instead (in[r][i] + ... + in[r][len-1], cumsum's gradient). in and out
// share a dtype (f32, f64, i64) and are contiguous; f32 may accumulate wider.
struct ScanArgs {
  DType dtype = DType::F32;
  std::int64_t rows = 0, len = 0;
  bool reverse = false;
  KernelOperand out, in;
};
// Argsort: indices[r][p] (i64, contiguous) is the position in row r of its
// p-th element in ascending (or descending) order. Stable: equal elements
// keep their order, whichever the direction; NaN is above every number and
// equal to NaN; -0 equals 0 (PyTorch's sort with stable=True).
struct SortArgs {
  DType dtype = DType::F32;
  std::int64_t rows = 0, len = 0;
  bool descending = false;
  KernelOperand indices, in;
};

// ---- optional fused kernels ---------------------------------------------------------
// DESIGN §2: a backend may add a fused kernel for speed; none is required. The
// frontend asks supports_fused() first and otherwise builds the op from the
// primitives above, so a backend that knows none of these runs every model.
enum class FusedOp : std::uint8_t {
  Im2col,                // conv2d's window matrix
  Col2im,                // its adjoint (conv2d's input gradient)
  MaxPool2d,             // max over windows, with the argmax of each
  MaxPool2dBackward,     // scatter-add of the output gradient to the argmaxes
  Conv2d,                // direct convolution, forward (Conv2dArgs)
  Conv2dBackwardData,    // its input gradient
  Conv2dBackwardWeight,  // its weight (and bias) gradient
  UnaryBinary,           // a binary op with a unary op on each input (BinaryPrologue)
  BatchNorm,             // batch norm's statistics and normalisation (BatchNormArgs)
  BatchNormBackward,     // its gradient
  Rnn,                   // a whole recurrent layer stack, forward (RnnArgs)
  RnnBackward,           // its data and weight gradients
  Interpolate,           // nearest or bilinear resampling (InterpolateArgs)
  InterpolateBackward,   // its adjoint
  Softmax,               // softmax or log_softmax over rows (SoftmaxArgs)
  SoftmaxBackward,       // its gradient
  GemmBias,              // a GEMM adding a row of bias to C's rows (GemmArgs::bias)
  LayerNorm,             // layer norm over rows (LayerNormArgs)
  LayerNormBackward,     // its gradients
  GemmTwoLevelBatch,     // a GEMM batch over two strides (Note [Two-level batches])
  Count
};
const char* name(FusedOp op) noexcept;  // "im2col", …
// The four window kernels above Conv2d (Im2colArgs, Pool2dArgs): the ones the
// shared device kernels (window.kern) implement.
constexpr bool is_window_kernel(FusedOp op) noexcept { return op < FusedOp::Conv2d; }

// Note [Unary into binary]
// out = op(pre[0](in[0]), pre[1](in[1])) in one pass over memory (issue 12:
// `lazy(a).exp() * b` reads a and b and writes c, never exp(a)). `pre` is
// UnaryOp::Count where an input is used as it is; Clamp never comes (it has
// parameters). The frontend sends only floating inputs of one dtype, dense
// (ndim 1) or C++ scalars, with an output of that dtype; everything else runs
// op by op. A unary result is rounded to the dtype before the binary op, as
// op by op, except where a device computes 16-bit dtypes in f32 (the shared
// kernels keep the intermediate in f32).
struct BinaryPrologue {
  UnaryOp pre[2] = {UnaryOp::Count, UnaryOp::Count};
  bool any() const noexcept { return pre[0] != UnaryOp::Count || pre[1] != UnaryOp::Count; }
};

// The geometry of a 2-D window op over an [N, C, H, W] image: kernel KH×KW,
// stride SH×SW, zero-or-(-inf) padding PH×PW, output OH×OW, and kernel taps
// DH×DW apart (dilation; conv2d only, the pools keep 1).
struct Window2dGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0, oh = 0, ow = 0;
  std::int64_t dh = 1, dw = 1;
};

// Im2col: cols = windows of `image`, zero outside it.
//   cols[n][c][i][j][oh][ow] = image[n][c][oh*SH - PH + i*DH][ow*SW - PW + j*DW]
// `image` is strided over its 4 dims; `cols` is dense, strided over the six
// dims [N, C, KH, KW, OH, OW]: [N, C*KH*KW, OH*OW] for an NCHW input, one row
// of C*KH*KW (or KH*KW*C) per output pixel for a channels-last one.
// Col2im: the adjoint, image = sum of cols over every window covering each
// pixel; `image` is dense (NCHW or channels-last) and overwritten. Both:
// image and cols share a dtype.
struct Im2colArgs {
  DType dtype = DType::F32;
  Window2dGeometry g;
  KernelOperand image;
  KernelOperand cols;
};

// MaxPool2d: out[n][c][p] = max of the window p of `image` (padding never
// wins), indices[n][c][p] = where it is, as ih*W + iw in its (n, c) plane; the
// first maximum on ties, NaN wins (PyTorch's choice); -1 and -inf for a
// window that lies entirely in padding. `image` strided over its 4 dims; out
// dense [N, C, OH, OW] (NCHW or channels-last), indices (i64) strided.
// MaxPool2dBackward: image (dense, overwritten) = zero, then
// image[n][c][indices[n][c][p]] += out[n][c][p] with `out` holding the
// output's gradient (strided, as indices).
struct Pool2dArgs {
  DType dtype = DType::F32;
  Window2dGeometry g;
  KernelOperand image;
  KernelOperand out;
  KernelOperand indices;
};

// The Conv2d family: a convolution over an [N, C, H, W] image with `groups`
// groups, weight [O, C/G, KH, KW], optional bias [O] (bias.data null: none),
// out [N, O, OH, OW]; zero padding, geometry as in Window2dGeometry. Every
// operand is strided over its dims (any layout) and of `dtype`.
//   Conv2d:               out = conv(image, weight) + bias; reads image,
//                         weight, bias; overwrites out.
//   Conv2dBackwardData:   image = the input gradient from out (holding the
//                         output's gradient) and weight; overwrites image.
//   Conv2dBackwardWeight: weight (and bias, when given) = the weight (and
//                         bias) gradient from image and out (the output's
//                         gradient); overwrites them.
// The frontend asks supports_fused_conv2d() with the geometry (operands
// unset): a backend may take only some convolutions (its fast cases).
struct Conv2dArgs {
  DType dtype = DType::F32;
  Window2dGeometry g;
  std::int64_t out_channels = 0, groups = 1;
  bool has_bias = false;
  KernelOperand image, weight, bias, out;
};

// Note [Fused batch norm]
// Batch norm over a contiguous x [N, C, S] (S: the product of the dims after
// C) in one parallel pass over the channels (issue 12): each channel's
// N * S elements are read from memory once and then reused from the cache,
// where the composite made seven passes forward and about fourteen
// backward, each a parallel region. The CPU's kernel is cpu_norm.cpp, the
// devices' norm.kern (a work-group per channel).

// The fused batch norm's contract: f32 and f64; the
// per-channel sums accumulate in f64 on the CPU (PyTorch's CPU accumulator
// for f32); every [C] operand is contiguous and of param_dtype() (f32 for
// f16 and bf16 inputs, which compute in f32 and round once per element
// stored; `dtype` otherwise); weight and bias may be absent (data null: 1
// and 0). One launch each way (issue 38): training's forward also updates
// the running statistics, and the backward writes the weight's gradient.
//   BatchNorm          training: mean[c], invstd[c] = 1 / sqrt(var[c] + eps)
//                      and, when given, var[c] (biased) of the batch are
//                      written, and running_mean and running_var, when
//                      given, become running * (1 - momentum) + mean *
//                      momentum (var * momentum * unbias, unbias = n / (n - 1));
//                      evaluation: mean and invstd are read (the frontend
//                      passes the running mean and 1 / sqrt(running var + eps)).
//                      y = x * a + (bias - mean * a), a = invstd * weight.
//   BatchNormBackward  from `grad` (the output's gradient, like x), x, mean,
//                      invstd and weight, with sums S over N and S:
//                      sum_g[c] = S(g) is written, and when given
//                      sum_gxc[c] = S(g * (x - mean)), grad_weight[c] =
//                      sum_gxc[c] * invstd[c] and grad_x (data null: not wanted):
//                      a * (g - S(g) / n - (x - mean) * invstd^2 * S(g * (x - mean)) / n)
//                      in training (n = N * S), a * g in evaluation
//                      (Note [Batch norm's gradient]).
//   Fused epilogue     forward: y = relu?(y + residual?) as y is stored;
//                      backward: with relu, g is first masked where the
//                      forward's y (read) is <= 0, and grad_residual (when
//                      given) receives the masked g.
struct BatchNormArgs {
  DType dtype = DType::F32;  // x, y, grad and grad_x
  std::int64_t n = 0, c = 0, s = 0;
  bool training = true;
  double eps = 1e-5;
  double momentum = 0.1, unbias = 1;                        // the running statistics' update
  KernelOperand x, y, mean, var, invstd, weight, bias;      // var: training's forward only
  KernelOperand running_mean, running_var;                  // training's forward only
  KernelOperand grad, grad_x, sum_g, sum_gxc, grad_weight;  // the backward
  KernelOperand residual;                                   // forward: added before the activation
  KernelOperand grad_residual;                              // backward: the masked g (relu only)
  bool relu = false;                                        // forward: applied; backward: y read as the mask
  DType param_dtype() const noexcept { return is_half(dtype) ? DType::F32 : dtype; }
};

// Note [Fused recurrent layers]
// A whole multi-layer RNN, GRU or LSTM over a sequence in one call (issue 30:
// cuDNN's RNN API), where the frontend otherwise runs it one time step at a
// time in separate ops (src/ops/rnn.cpp, the composite every backend runs).

// The fused recurrent layer's contract. The math is PyTorch's, which is also cuDNN's: per layer, G gates of H rows
// in PyTorch's order, RNN 1 (tanh or relu), GRU 3 (r, z, n with
// n = tanh(W_in x + b_in + r * (W_hn h + b_hn))), LSTM 4 (i, f, g, o).
//   rnn_forward   y, hy (and cy) from x, h0 (and c0) and the weights. With
//                 `training` it runs as for a backward: it fills `reserve`
//                 (rnn_reserve_bytes() of it, asked with the same args) and
//                 applies `dropout` to every layer's output but the last.
//   rnn_backward  from dy, dhy, dcy (data null: zero), the forward's x, h0,
//                 c0, weights, y and reserve: dx, and dh0 and dc0 where
//                 given (data null: not wanted); with dweights non-empty
//                 the weight gradients too, overwritten.
// Every operand is contiguous and of `dtype`. The frontend asks
// supports_fused_rnn() with the shape (operands unset), as for Conv2dArgs.
enum class RnnMode : std::uint8_t { Tanh, Relu, Gru, Lstm };
const char* name(RnnMode mode) noexcept;  // "rnn_tanh", "rnn_relu", "gru", "lstm"
constexpr std::int64_t rnn_gates(RnnMode m) noexcept { return m == RnnMode::Gru ? 3 : m == RnnMode::Lstm ? 4 : 1; }
struct RnnArgs {
  RnnMode mode = RnnMode::Lstm;
  DType dtype = DType::F32;
  std::int64_t layers = 1, input_size = 0, hidden_size = 0;
  std::int64_t seq_len = 0, batch = 0;  // T and N
  bool batch_first = false, has_bias = true;
  bool training = false;
  double dropout = 0;              // between layers, when training
  std::uint64_t dropout_seed = 0;  // for a backend's own dropout generator, when it starts one
  KernelOperand x;                 // [T, N, input_size] ([N, T, input_size] when batch_first)
  KernelOperand h0, c0;            // [layers, N, H]; c0 for LSTM only
  KernelOperand y;                 // [T, N, H] ([N, T, H] when batch_first)
  KernelOperand hy, cy;            // [layers, N, H]
  // Per layer l: weight_ih [G*H, l ? H : input_size], weight_hh [G*H, H],
  // then bias_ih and bias_hh [G*H] when has_bias (anvil's parameters as they are).
  std::vector<KernelOperand> weights;
  KernelOperand reserve;  // rnn_reserve_bytes() bytes
  std::size_t reserve_bytes = 0;
  KernelOperand dy, dhy, dcy;           // the backward's incoming gradients (like y, hy, cy)
  KernelOperand dx, dh0, dc0;           // its results (like x, h0, c0)
  std::vector<KernelOperand> dweights;  // like weights; empty: not wanted
};

// Note [Interpolation]
// torch.nn.functional.interpolate over an [N, C, H, W] image, PyTorch's
// meaning (its CPU kernels, 1.13 and 2.x): along each of H and W, output
// index o reads source taps i0 <= i1 <= i0 + 1 with weights 1 - l and l:
//   out size == in size   i0 = i1 = o, l = 0 (a copy, whatever the scale)
//   Nearest               i0 = i1 = min(floor(o * scale), in - 1), in f32
//                         (o >> 1 when out == 2 * in)
//   Bilinear              src = align_corners ? scale * o
//                                             : max(scale * (o + 0.5) - 0.5, 0),
//                         i0 = (i64)src, i1 = min(i0 + 1, in - 1), l = src - i0
// computed in f64 for f64 and in f32 otherwise (the taps of
// src/kernels/interpolate.h, which the CPU compiles too); out =
// (1 - lh) ((1 - lw) x[i0h][i0w] + lw x[i0h][i1w]) + lh (...i1h...).

// scale_h and scale_w are the source step per output pixel as the kernels
// use it: the frontend has already rounded them to f32 where the kernels
// compute in f32 (PyTorch's float(in) / out, float(1 / scale_factor), …).

// The two interpolation primitives:
//   Interpolate          out (contiguous [N, C, OH, OW]) from image (strided).
//   InterpolateBackward  image (contiguous [N, C, H, W], overwritten) = the
//                        adjoint of the output gradient held in `out`
//                        (contiguous): every input pixel gets the weighted
//                        sum over the output pixels that read it, in
//                        output order. Devices gather per input pixel, so
//                        nothing is added concurrently: no atomics, the
//                        same bits every run.
enum class InterpMode : std::uint8_t { Nearest, Bilinear };
struct InterpolateArgs {
  DType dtype = DType::F32;  // f32, f64, f16 or bf16; image and out share it
  InterpMode mode = InterpMode::Nearest;
  bool align_corners = false;
  std::int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  double scale_h = 0, scale_w = 0;
  KernelOperand image, out;
};

// Note [Fused softmax]
// softmax and log_softmax of `rows` contiguous rows of `len` (the frontend
// takes this path for the last dim of a contiguous tensor): one pass for the
// row's max, one for its sum, one to store, instead of five to eight
// elementwise and reduction ops. f16 and bf16 compute in f32. With m the
// row's max and s = Σ exp(x - m):
//   Softmax          y = exp(x - m) / s, or for log: y = x - m - log(s)
//                    (a row holding NaN or +inf, or all -inf, is NaN, as PyTorch's)
//   SoftmaxBackward  grad_x from y and grad (the forward's output and its gradient):
//                    y (g - Σ g y), or for log: g - exp(y) Σ g
struct SoftmaxArgs {
  DType dtype = DType::F32;  // f32, f64, f16 or bf16; every operand has it
  std::int64_t rows = 0, len = 0;
  bool log = false;
  KernelOperand x, y, grad, grad_x;  // forward: x -> y; backward: y, grad -> grad_x
};

// Note [Fused layer norm]
// layer_norm over `rows` contiguous rows of `len` elements (the normalised
// trailing dims) in one call each way, for the composite's ~8 ops forward
// and ~12 backward (a ViT's layer norms: ~10% of its CPU step; on OpenCL
// and CUDA, layer_norm.kern: 1 launch forward and 3 backward, from 8 and 11).
// f32, f64; weight and bias, when given (data non-null), `len` of `dtype`.
//   LayerNorm          mean[r], invstd[r] = 1 / sqrt(var[r] + eps) (biased),
//                      y = (x - mean) * invstd * weight + bias.
//   LayerNormBackward  xhat = (x - mean) * invstd, gxhat = grad * weight:
//                      grad_x = invstd * (gxhat - mean(gxhat) - xhat *
//                      mean(gxhat * xhat)) per row; grad_weight = S(grad *
//                      xhat), grad_bias = S(grad) over rows, each when given,
//                      in an order fixed by `rows` alone, never the threads.
struct LayerNormArgs {
  DType dtype = DType::F32;  // every operand's
  std::int64_t rows = 0, len = 0;
  double eps = 1e-5;
  KernelOperand x, y, weight, bias, mean, invstd;  // mean, invstd: [rows]
  KernelOperand grad, grad_x, grad_weight, grad_bias;
};

// ---- optional fused optimiser steps ------------------------------------------------
// One pass over a parameter for the whole update of SGD or Adam, instead of the
// four to ten elementwise ops (each a round trip through memory) of the
// composite in src/optim (issue 12). Optional like the fused kernels above:
// the optimiser asks supports_optimizer_step() and otherwise runs the
// composite. Every tensor operand is contiguous with `numel` elements of
// `dtype` on one device; the kernel computes in `dtype` with the scalars cast
// to it, in the composite's order of operations (PyTorch's single-tensor
// updates), so both paths agree to rounding:
//
//   SGD   d = grad + weight_decay * param
//         (momentum > 0) buf = first ? d : momentum * buf + (1 - dampening) * d
//                        d = nesterov ? d + momentum * buf : buf
//         param -= lr * d
//   Adam  g = grad + weight_decay * param   (AdamW, decoupled: g = grad and first
//                                            param *= 1 - lr * weight_decay)
//         m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
//         param -= (m / (sqrt(v / bias_correction2) + eps)) * (lr / bias_correction1)
enum class OptimizerKind : std::uint8_t { Sgd, Adam, Count };
const char* name(OptimizerKind kind) noexcept;  // "sgd", "adam"
struct OptimizerStepArgs {
  OptimizerKind kind = OptimizerKind::Sgd;
  DType dtype = DType::F32;
  std::int64_t numel = 0;
  KernelOperand param, grad;
  KernelOperand state0, state1;  // SGD: the momentum buffer (unused without momentum); Adam: m and v
  double lr = 0, weight_decay = 0;
  double momentum = 0, dampening = 0;    // SGD
  bool nesterov = false, first = false;  // SGD: `first` starts the buffer as d
  double beta1 = 0, beta2 = 0, eps = 0, bias_correction1 = 1, bias_correction2 = 1;  // Adam
  bool decoupled = false;  // Adam: AdamW's decoupled weight decay
};

// Note [Multi-tensor optimiser steps]
// PyTorch's foreach path: one step over every parameter of one device and
// dtype in a few launches, where one launch per parameter made ResNet-18's
// SGD step 76 tiny launches (issue 38). OpenCL 1.2 has no pointer arrays,
// so each launch takes up to kOptimizerSlots parameters and gradients as
// buffer arguments (32: 64 buffers and the scalars fit the 1024 bytes of
// arguments OpenCL guarantees) and the optimiser's state flat, one storage
// for all (offsets per tensor); `table` holds what varies per tensor, i64 on
// the device: [N + 1] element prefix sums, then [N] param, [N] grad and [N]
// state offsets (state1 shares state0's). Each tensor's update is the
// one-tensor step's, to the bit. The CPU runs one parallel region and
// ignores the table.
inline constexpr int kOptimizerSlots = 32;
struct OptimizerTensor {
  std::int64_t numel = 0;
  KernelOperand param, grad, state0, state1;
  bool first = false;  // SGD: as OptimizerStepArgs::first
};
struct OptimizerStepListArgs {
  OptimizerStepArgs step;  // kind, dtype and the scalars; its numel and operands are unused
  std::vector<OptimizerTensor> tensors;
  KernelOperand table;  // contiguous i64 [4 N + 1]
  // The step of tensor i alone, as optimizer_step() takes it.
  OptimizerStepArgs one(std::size_t i) const {
    OptimizerStepArgs a = step;
    const OptimizerTensor& t = tensors[i];
    a.numel = t.numel, a.param = t.param, a.grad = t.grad, a.state0 = t.state0, a.state1 = t.state1;
    a.first = t.first;
    return a;
  }
};

// ---- capabilities (DESIGN §2 "Capabilities are asked once") ---------------------
// The op frontend asks supports() before every dispatch, with the primitive
// and each dtype it touches; a backend answers from its device's properties
// (fp64, …), and the frontend raises NotSupported naming the op, the dtype,
// the device and the fix. A kernel compile error is never how a user learns
// what a device lacks.
enum class Primitive : std::uint8_t {
  Fill,
  Arange,
  Copy,
  Unary,
  Binary,
  Where,
  Reduce,
  Gemm,
  Index,
  Random,
  Fused,
  Storage,  // a tensor of this dtype on the device at all: empty(), to(), from_host
  Scan,
  Sort,
  Count
};
struct Support {
  bool ok = true;
  const char* reason = "";     // why not: "the device has no fp64"
  DType instead = DType::F32;  // what to use instead
};

// ---- the interface ----------------------------------------------------------------
class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const noexcept = 0;

  // enumeration: never throws
  virtual int device_count() noexcept = 0;
  virtual std::string unavailable_reason() noexcept = 0;  // "" when devices exist
  // Whether device `index` counts as an accelerator for gpu(i)/try_gpu(i).
  virtual bool is_accelerator(int index) noexcept = 0;
  virtual DeviceProperties properties(int index) = 0;

  // memory: behind the backend's caching allocator. allocate() throws
  // OutOfMemory (after emptying the cache and retrying once).
  virtual void* allocate(int index, std::size_t bytes) = 0;
  virtual void deallocate(int index, void* data, std::size_t bytes) noexcept = 0;
  virtual MemoryStats memory_stats(int index) = 0;
  virtual void reset_peak_memory_stats(int index) = 0;
  virtual void empty_cache(int index) = 0;
  virtual void set_memory_limit(int index, std::uint64_t bytes) = 0;

  // movement, byte offsets, enqueued on the device's queue. to_host waits.
  virtual void copy_from_host(int index, void* dst, std::size_t dst_offset, const void* src, std::size_t bytes) = 0;
  virtual void copy_to_host(int index, void* dst, const void* src, std::size_t src_offset, std::size_t bytes) = 0;
  // Within this backend, possibly between two of its devices.
  virtual void copy_device(int dst_index, void* dst, std::size_t dst_offset, int src_index, const void* src,
                           std::size_t src_offset, std::size_t bytes) = 0;
  // Whether copy_device can go directly from src_index to dst_index
  // (otherwise the frontend goes through the host).
  virtual bool can_copy_direct(int dst_index, int src_index) noexcept = 0;

  // execution
  virtual void synchronize(int index) = 0;

  // optional: timestamps on the device's own clock (queue profiling), for
  // benchmarks. record_timestamp enqueues a marker on the device's queue
  // and returns its handle; timestamp_elapsed waits for both markers and
  // returns the device time between them in seconds; release_timestamp
  // frees a handle. Backends without a device clock keep the defaults.
  // See Note [Device clocks] (core/timer.cpp).
  virtual bool has_device_clock(int /*index*/) noexcept { return false; }
  virtual void* record_timestamp(int index);                            // default: throws NotSupported
  virtual double timestamp_elapsed(int index, void* start, void* end);  // default: throws NotSupported
  virtual void release_timestamp(int /*index*/, void* /*stamp*/) noexcept {}

  // optional: the device's own queue as the native runtime knows it (a
  // cudaStream_t for CUDA), with `index` made the calling thread's current
  // device, for a library that enqueues on it (NCCL in src/dist). Null when
  // the backend has none to give.
  virtual void* native_stream(int /*index*/) noexcept { return nullptr; }

  // primitives
  virtual Support supports(int index, Primitive p, DType t) noexcept = 0;
  virtual void fill(int index, const KernelOperand& out, std::int64_t numel, const Scalar& value) = 0;
  // out[i] = start + i * step, contiguous.
  virtual void arange(int index, const KernelOperand& out, std::int64_t numel, double start, double step) = 0;
  // Strided copy with dtype conversion: out = in[0].
  virtual void copy(int index, const ElementwiseArgs& args) = 0;
  virtual void unary(int index, UnaryOp op, const UnaryParams& params, const ElementwiseArgs& args) = 0;
  virtual void binary(int index, BinaryOp op, const ElementwiseArgs& args) = 0;
  // out = in[0] ? in[1] : in[2]
  virtual void where(int index, const ElementwiseArgs& args) = 0;
  virtual void reduce(int index, ReduceOp op, const ReduceArgs& args) = 0;
  virtual void gemm(int index, const GemmArgs& args) = 0;
  virtual void index(int index, const IndexArgs& args) = 0;
  virtual void random(int index, const RandomArgs& args) = 0;
  virtual void scan(int index, const ScanArgs& args) = 0;
  virtual void argsort(int index, const SortArgs& args) = 0;

  // optional: fused kernels (see FusedOp). The defaults say "not here".
  virtual bool supports_fused(FusedOp, DType, int) noexcept { return false; }
  virtual void im2col(int, const Im2colArgs&) { not_fused(FusedOp::Im2col); }
  virtual void col2im(int, const Im2colArgs&) { not_fused(FusedOp::Col2im); }
  virtual void max_pool2d(int, const Pool2dArgs&) { not_fused(FusedOp::MaxPool2d); }
  virtual void max_pool2d_backward(int, const Pool2dArgs&) { not_fused(FusedOp::MaxPool2dBackward); }
  // Whether the Conv2d family takes this convolution (dtype and geometry of
  // `shape`; its operands are unset). True only where all three are here.
  virtual bool supports_fused_conv2d(int, const Conv2dArgs&) noexcept { return false; }
  virtual void conv2d(int, const Conv2dArgs&) { not_fused(FusedOp::Conv2d); }
  virtual void conv2d_backward_data(int, const Conv2dArgs&) { not_fused(FusedOp::Conv2dBackwardData); }
  virtual void conv2d_backward_weight(int, const Conv2dArgs&) { not_fused(FusedOp::Conv2dBackwardWeight); }
  // Both gradients of one convolution, `data` and `weight` as the two calls
  // above take them, from the same output gradient: a backend may share
  // work between them (the CPU lays the output gradient out once). The
  // default makes the two calls.
  virtual void conv2d_backward(int index, const Conv2dArgs& data, const Conv2dArgs& weight) {
    conv2d_backward_data(index, data);
    conv2d_backward_weight(index, weight);
  }
  // Note [Unary into binary]; asked as supports_fused(FusedOp::UnaryBinary, dtype).
  virtual void unary_binary(int, BinaryOp, const BinaryPrologue&, const ElementwiseArgs&) {
    not_fused(FusedOp::UnaryBinary);
  }
  // Note [Fused batch norm]; asked as supports_fused(FusedOp::BatchNorm, dtype).
  virtual void batch_norm(int, const BatchNormArgs&) { not_fused(FusedOp::BatchNorm); }
  virtual void batch_norm_backward(int, const BatchNormArgs&) { not_fused(FusedOp::BatchNormBackward); }
  // optional: Note [Fused recurrent layers]. Whether this backend takes the
  // recurrent layer `shape` describes (its operands unset); the other three
  // are called only where it said yes.
  virtual bool supports_fused_rnn(int, const RnnArgs&) noexcept { return false; }
  virtual std::size_t rnn_reserve_bytes(int, const RnnArgs&) { not_fused(FusedOp::Rnn); }
  virtual void rnn_forward(int, const RnnArgs&) { not_fused(FusedOp::Rnn); }
  virtual void rnn_backward(int, const RnnArgs&) { not_fused(FusedOp::RnnBackward); }
  // optional: Note [Interpolation]; asked as supports_fused(FusedOp::Interpolate, dtype).
  virtual void interpolate(int, const InterpolateArgs&) { not_fused(FusedOp::Interpolate); }
  virtual void interpolate_backward(int, const InterpolateArgs&) { not_fused(FusedOp::InterpolateBackward); }
  // optional: Note [Fused softmax]; asked as supports_fused(FusedOp::Softmax, dtype).
  virtual void softmax(int, const SoftmaxArgs&) { not_fused(FusedOp::Softmax); }
  virtual void softmax_backward(int, const SoftmaxArgs&) { not_fused(FusedOp::SoftmaxBackward); }
  // optional: Note [Fused layer norm]; asked as supports_fused(FusedOp::LayerNorm, dtype).
  virtual void layer_norm(int, const LayerNormArgs&) { not_fused(FusedOp::LayerNorm); }
  virtual void layer_norm_backward(int, const LayerNormArgs&) { not_fused(FusedOp::LayerNormBackward); }
  // optional: fused optimiser steps (see OptimizerStepArgs).
  virtual bool supports_optimizer_step(OptimizerKind, DType, int) noexcept { return false; }
  virtual void optimizer_step(int, const OptimizerStepArgs& args);  // default: throws NotSupported
  // optional: the multi-tensor step (Note [Multi-tensor optimiser steps]);
  // the default runs optimizer_step() per tensor.
  virtual bool supports_optimizer_step_list(OptimizerKind, DType, int) noexcept { return false; }
  virtual void optimizer_step_list(int index, const OptimizerStepListArgs& args) {
    for (std::size_t i = 0; i < args.tensors.size(); ++i) optimizer_step(index, args.one(i));
  }

 private:
  [[noreturn]] void not_fused(FusedOp op) const;
};

// The table: null where a backend is not compiled in.
Backend* backend_for(DeviceType type) noexcept;
// The backend of `d`, checking that the device exists: throws NotCompiled or
// DeviceError (with the reason) naming `op`.
Backend& backend_checked(Device d, const char* op = "device");

}  // namespace anvil::detail
