// anvil/ops.h — every op, as free functions (PyTorch/NumPy names).
//
//   auto a = anvil::rand({256, 256}, anvil::try_gpu());
//   auto b = anvil::randn({256, 256}, a.device());
//   auto c = anvil::matmul(a, b).relu().sum(1);    // or sum(c, {0, 1}), x.mean(0, true)
//
// Ops run where their operands are and put the result there (DESIGN §4.4).
// Operands on different devices raise DeviceMismatch before anything runs
// (§4.5). Shapes broadcast as in NumPy; dtypes promote as in PyTorch.
// Factories create on `default_device()` (the CPU unless a DeviceScope says
// otherwise) when no device is given; the default dtype is f32.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "anvil/tensor.h"

namespace anvil {

namespace detail {
struct LazyAccess;
}

// --- factories -----------------------------------------------------------------
Tensor empty(const Shape& shape, Device d = default_device(), DType t = f32);
Tensor empty(const Shape& shape, DType t, Device d = default_device());
Tensor zeros(const Shape& shape, Device d = default_device(), DType t = f32);
Tensor zeros(const Shape& shape, DType t, Device d = default_device());
Tensor ones(const Shape& shape, Device d = default_device(), DType t = f32);
Tensor ones(const Shape& shape, DType t, Device d = default_device());
// dtype: that of `value` (f32 for a floating value, i64 for an integer, bool)
// unless given.
Tensor full(const Shape& shape, const Scalar& value, Device d = default_device(),
            std::optional<DType> t = std::nullopt);
// [start, end) by step; dtype i64 when all three are integers, else f32.
Tensor arange(const Scalar& end, Device d = default_device(), std::optional<DType> t = std::nullopt);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, Device d = default_device(),
              std::optional<DType> t = std::nullopt);
// `steps` evenly spaced values from start to end, both included (end exactly).
Tensor linspace(double start, double end, std::int64_t steps, Device d = default_device(), DType t = f32);
Tensor eye(std::int64_t n, std::optional<std::int64_t> m = std::nullopt, Device d = default_device(), DType t = f32);
// Random (DESIGN §4.10): Philox 4x32-10, so one seed and shape give the same
// numbers on every device. Each call advances the global generator.
Tensor rand(const Shape& shape, Device d = default_device(), DType t = f32);   // U[0, 1)
Tensor randn(const Shape& shape, Device d = default_device(), DType t = f32);  // N(0, 1)
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Device d = default_device(),
               DType t = i64);  // [low, high)
void manual_seed(std::uint64_t seed);

Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
Tensor randint_like(const Tensor& t, std::int64_t low, std::int64_t high);

// From host data; copied to `d` (the buffer may be reused as soon as this
// returns). dtype from the C++ type unless given.
Tensor from_host(const void* data, const Shape& shape, DType t, Device d = default_device());
template <HasDType T>
Tensor tensor(const std::vector<T>& values, Device d = default_device(), std::optional<DType> t = std::nullopt);
template <HasDType T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, Device d = default_device(),
              std::optional<DType> t = std::nullopt);
// A 0-dim tensor.
Tensor scalar_tensor(const Scalar& value, Device d = default_device(), std::optional<DType> t = std::nullopt);

// Nested initializer lists: tensor({{1, 2}, {3, 4}}). The dtype follows
// torch.tensor: any floating literal makes it f32, else integers give i64,
// else bool.
struct NestedList {
  std::vector<Scalar> values;
  Shape shape;
  template <typename T>
  requires std::is_arithmetic_v<T> NestedList(T v) : values{Scalar(v)} {}  // NOLINT: a leaf converts implicitly
  NestedList(std::initializer_list<NestedList> children);
};
Tensor tensor(const NestedList& values, Device d = default_device(), std::optional<DType> t = std::nullopt);

// --- elementwise -------------------------------------------------------------------
// The elementwise ops of two operands, one per public row of anvil/ops.def (its
// doc column says what each computes: add, sub, mul, div, pow, maximum, minimum,
// atan2, copysign, bitwise_and, …, eq, ne, lt, le, gt, ge, hypot, logaddexp,
// floor_divide, remainder, …): name(a, b) of two tensors, broadcast and promoted
// as in PyTorch, and, as the row's forms say, name(a, s) and name(s, b) with a
// number.
#define ANVIL_BINARY_TENSOR(Op, name) Tensor name(const Tensor& a, const Tensor& b);
#define ANVIL_BINARY_SCALAR(Op, name) Tensor name(const Tensor& a, const Scalar& b);
#define ANVIL_BINARY_SCALAR_FIRST(Op, name) Tensor name(const Scalar& a, const Tensor& b);
#include "anvil/ops.def"
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha);  // a + alpha * b

// The elementwise ops of one tensor, one per row of anvil/ops.def (its last
// column says what each computes: neg, abs, exp, log, sqrt, rsqrt, sin, cos, tanh,
// sigmoid, relu, sign, square, reciprocal, logical_not, log1p, expm1, erf, gelu,
// softplus, floor, ceil, round, atan, asin, acos, …): Tensor name(const Tensor& x).
#define ANVIL_UNARY_OP(Op, name, ...) Tensor name(const Tensor& x);
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi = std::nullopt);
// cond ? a : b, broadcast; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
// value where mask (bool, broadcast with x) is true, x elsewhere; x's dtype
// (value converted to it, as torch.masked_fill). Gradient to x where mask is false.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
// The lower (tril: column - row <= diagonal) or upper (triu: >= diagonal)
// triangle of the last two dims, zero elsewhere; x has at least 2 dims.
Tensor tril(const Tensor& x, std::int64_t diagonal = 0);
Tensor triu(const Tensor& x, std::int64_t diagonal = 0);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator&(const Tensor& a, const Scalar& b);
Tensor operator|(const Tensor& a, const Scalar& b);
Tensor operator^(const Tensor& a, const Scalar& b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Scalar& b);
Tensor& operator-=(Tensor& a, const Scalar& b);
Tensor& operator*=(Tensor& a, const Scalar& b);
Tensor& operator/=(Tensor& a, const Scalar& b);

// Writes into `out` (no allocation); out's shape must be the broadcast shape.
void add_out(Tensor& out, const Tensor& a, const Tensor& b);
void mul_out(Tensor& out, const Tensor& a, const Tensor& b);

// --- a unary op fused into a binary op: one pass over memory ---------------------------
// lazy(x).exp() is exp(x) not yet computed; the + - * / it meets computes
// both at once:
//
//   Tensor c = anvil::lazy(a).exp() * b;  // reads a and b, writes c: exp(a) is never stored
//   Tensor g = anvil::lazy(x).sigmoid() * anvil::lazy(y).tanh();
//
// A plain Tensor converts to a Lazy with no op. The fused kernel runs when
// the tensors share one floating dtype, one shape and dense layouts, with no
// gradient to record and autocast off (and not under ANVIL_NO_FUSED=1);
// otherwise the expression runs op by op, so a Lazy always gives the
// op-by-op result (on a device that computes f16 and bf16 in f32, the fused
// kernel keeps the unary result in f32 rather than rounding it first). A
// second unary op computes the first: lazy(a).exp().log() stores exp(a).
class Lazy {
 public:
  Lazy(Tensor x) : x_(std::move(x)) {}  // NOLINT: a tensor is a Lazy with no op
  // lazy(x).exp(), … : each elementwise op of one tensor (anvil/ops.def).
#define ANVIL_UNARY_OP(Op, name, ...) Lazy name() const;
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"
  // The unary op alone (the tensor itself when there is none).
  Tensor eval() const;

  friend Tensor operator+(const Lazy& a, const Lazy& b);
  friend Tensor operator-(const Lazy& a, const Lazy& b);
  friend Tensor operator*(const Lazy& a, const Lazy& b);
  friend Tensor operator/(const Lazy& a, const Lazy& b);
  friend Tensor operator+(const Lazy& a, const Scalar& b);
  friend Tensor operator-(const Lazy& a, const Scalar& b);
  friend Tensor operator*(const Lazy& a, const Scalar& b);
  friend Tensor operator/(const Lazy& a, const Scalar& b);
  friend Tensor operator+(const Scalar& a, const Lazy& b);
  friend Tensor operator-(const Scalar& a, const Lazy& b);
  friend Tensor operator*(const Scalar& a, const Lazy& b);
  friend Tensor operator/(const Scalar& a, const Lazy& b);

 private:
  static constexpr std::uint8_t kNoOp = 0xff;
  Lazy(Tensor x, std::uint8_t op) : x_(std::move(x)), op_(op) {}
  Lazy then(std::uint8_t op) const;
  friend struct detail::LazyAccess;
  Tensor x_;
  std::uint8_t op_ = kNoOp;  // a detail::UnaryOp
};
inline Lazy lazy(Tensor x) { return Lazy(std::move(x)); }

// --- reductions ----------------------------------------------------------------------
// `dims` is one dim or a list (Dims): sum(x, 1) is sum(x, {1}); dims may be
// negative; empty dims = all. sum and prod of integers and bool give i64,
// of floats their own dtype; `dtype` (torch.sum's) converts x to it first and
// gives a result of that dtype (integers wrap modulo 2^bits, as they add).
Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Dims& dims = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
// Largest / smallest values over `dims` (torch.amax / amin).
Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// Of all elements, a 0-dim tensor (torch.max(x)).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// Along one dim, the values and the (i64) index of the first max / min, as
// torch.max(x, dim): `auto [values, indices] = max(x, 1);`. The gradient
// goes to that index alone.
ValuesIndices max(const Tensor& x, int dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int dim, bool keepdim = false);
// Index (i64) of the first max/min; over the flattened tensor without a dim.
Tensor argmax(const Tensor& x, std::optional<int> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int> dim = std::nullopt, bool keepdim = false);
// --- scans and sorting ----------------------------------------------------------
// The scans, one per row of anvil/ops.def (its doc column says what each
// computes: cumsum): Tensor name(const Tensor& x, int dim).
#define ANVIL_SCAN_OP(Op, name, ...) Tensor name(const Tensor& x, int dim);
#include "anvil/ops.def"
// Along dim, the values in ascending (descending) order and their i64
// positions in x: `auto [values, indices] = sort(x, 1);`. Stable (equal
// elements keep their order) with NaN above every number, as torch.sort(...,
// stable=True). The gradient goes back to where each value came from.
ValuesIndices sort(const Tensor& x, int dim = -1, bool descending = false);
// The k largest (smallest) along dim with their indices, in order (the
// order is PyTorch's "unspecified" when sorted = false; here always sorted).
ValuesIndices topk(const Tensor& x, std::int64_t k, int dim = -1, bool largest = true, bool sorted = true);
// For each entry of `values`, the index at which inserting it keeps the
// innermost dim of sorted_sequence sorted (torch.searchsorted): the first such
// index, or with right = true (or side = "right") the last. sorted_sequence is
// 1-D [K], or [..., K] with values [..., M] of the same leading dims (each row
// searched with its own); the result has values' shape, i64 (i32 with
// out_int32). sorter (i64, sorted_sequence's shape) lists, per row, the
// positions that sort it ascending: sorted_sequence need not be sorted then.
// Both operands promote as in add. NaN sorts above every number, as in sort
// (the array API's rule): a NaN value goes before the row's NaNs on the left,
// after them on the right (PyTorch's binary search has no defined answer
// there). ValueError for a side other than "left"/"right" or one opposite to
// `right`; ShapeError, DTypeError (bool, a sorter not i64) and DeviceMismatch
// name searchsorted. A sorter entry outside [0, K) is an IndexError of the
// gather that reads through it. Counts comparisons (O(K·M) per row, in chunks
// of bounded memory) on every device; no host sync; no gradient.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32 = false, bool right = false,
                    std::optional<std::string> side = std::nullopt, const Tensor& sorter = {});
// The same for one value (sorted_sequence 1-D): a 0-dim result.
Tensor searchsorted(const Tensor& sorted_sequence, const Scalar& value, bool out_int32 = false, bool right = false,
                    std::optional<std::string> side = std::nullopt, const Tensor& sorter = {});
// torch.unique's three results, as LibTorch's at::_unique2 returns them:
// `auto [values, inverse, counts] = unique(x, true, true, true);`.
struct UniqueResult {
  Tensor values;           // the distinct values (slices along dim), ascending
  Tensor inverse_indices;  // i64: where each element (slice) of x went; undefined unless asked
  Tensor counts;           // i64: how often each value occurs; undefined unless asked
};
// The distinct elements of x, flattened and ascending (torch.unique); with a
// dim, the distinct slices along it, in lexicographic order, values then
// keeping x's other dims. inverse_indices has x's shape (without a dim) or
// [x.size(dim)] (with one), so values[inverse] rebuilds x. Every NaN is a
// value of its own (the array API's rule; PyTorch 1.13's CPU unique counts
// [1, nan, nan, 1] as [2, 0, 0]). Always sorted: `sorted` is accepted as
// PyTorch's hint (its unsorted order is unspecified). The number of values is read on the host (one sync, as in
// PyTorch). No gradient. IndexError for a dim out of range; ValueError, as in
// PyTorch, for a dim whose slices are empty while the dim is not.
UniqueResult unique(const Tensor& x, bool sorted = true, bool return_inverse = false, bool return_counts = false,
                    std::optional<int> dim = std::nullopt);
// correction = 1: the unbiased estimator, as torch.var.
Tensor var(const Tensor& x, const Dims& dims = {}, bool keepdim = false, std::int64_t correction = 1);
Tensor std(const Tensor& x, const Dims& dims = {}, bool keepdim = false, std::int64_t correction = 1);
// Frobenius / L2 norm.
Tensor norm(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false);

// --- linear algebra -------------------------------------------------------------
// torch.matmul: 1-D·1-D dot, 2-D mm, batched with broadcasting of batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);     // 2-D only
Tensor bmm(const Tensor& a, const Tensor& b);    // 3-D, equal batch
Tensor dot(const Tensor& a, const Tensor& b);    // 1-D only
Tensor outer(const Tensor& a, const Tensor& b);  // 1-D × 1-D → 2-D
// beta * bias + alpha * (a @ b), a and b 2-D, bias broadcast to the
// product (torch.addmm; what nn::Linear runs: grad_fn=<AddmmBackward>).
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1);
// x @ weight^T + bias (torch.nn.functional.linear; what nn::Linear runs):
// addmm for a matrix with a bias, matmul (and a broadcast add) otherwise.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// out = a @ b into an existing tensor (no allocation), 2-D.
void mm_out(Tensor& out, const Tensor& a, const Tensor& b);
// beta * input + alpha * (batch1 @ batch2): [B, N, M] @ [B, M, P], input
// broadcast to [B, N, P] (torch.baddbmm; beta = 0 ignores input).
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
               const Scalar& alpha = 1);

// --- movement, views and indexing ---------------------------------------------------
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor view(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int dim0, int dim1);
Tensor permute(const Tensor& x, const Dims& dims);
Tensor t(const Tensor& x);
Tensor slice(const Tensor& x, int dim, std::int64_t start, std::int64_t end, std::int64_t step = 1);
Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length);
Tensor select(const Tensor& x, int dim, std::int64_t index);
Tensor expand(const Tensor& x, const Shape& shape);
// torch.repeat: a copy of x tiled sizes[i] times along dim i; sizes may have
// more entries than x has dims (x gains leading dims of size 1).
Tensor repeat(const Tensor& x, const Shape& sizes);
// torch.flip / numpy.flip: a copy of x with the order of `dims` reversed
// (every dim when dims is empty). What x[::-1] is in Python (a copy, not a
// view, as anvil's strides are never negative). Differentiable.
Tensor flip(const Tensor& x, const Dims& dims);
// Without dims, every size-1 dim goes; with dims, those of them that are
// size 1 (the others stay, as in PyTorch).
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, const Dims& dims);
Tensor unsqueeze(const Tensor& x, int dim);
Tensor flatten(const Tensor& x, int start_dim = 0, int end_dim = -1);
Tensor contiguous(const Tensor& x);
Tensor contiguous(const Tensor& x, MemoryFormat format);
// A copy on x's device, laid out in `format`; Preserve (PyTorch's default)
// keeps a channels-last tensor channels-last and makes anything else contiguous.
Tensor clone(const Tensor& x, MemoryFormat format = MemoryFormat::Preserve);
// index: 1-D integer tensor on x's device, entries in [0, x.size(dim)).
Tensor index_select(const Tensor& x, int dim, const Tensor& index);
// out[i][j] = x[index[i][j]][j] for dim 0, etc. (torch.gather).
Tensor gather(const Tensor& x, int dim, const Tensor& index);
// x with alpha * source[.., i, ..] added to row index[i] of `dim`
// (torch.index_add): index 1-D integer with entries in [0, x.size(dim)),
// source x's shape but index.numel() along dim, x's dtype. Duplicates add
// up, deterministically (in index order on every device).
Tensor index_add(const Tensor& x, int dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
// x with src[i][j] added at [index[i][j]][j] for dim 0, etc.
// (torch.scatter_add, the transpose of gather): index i64/i32 with x's
// number of dims, index.size(d) <= src.size(d) and, for d != dim,
// <= x.size(d); only src's leading index.shape block is used.
Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src);
// x with row index[i] of `dim` replaced by source[.., i, ..]
// (torch.index_copy): index and source as in index_add. Repeated indices:
// the last write wins, deterministically on every device (NumPy's
// x[idx] = v; torch leaves it undefined on CUDA). The gradient reaches only
// the rows that were written last.
Tensor index_copy(const Tensor& x, int dim, const Tensor& index, const Tensor& source);
Tensor cat(const std::vector<Tensor>& tensors, int dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int dim = 0);
std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, int dim = 0);
// Pieces of the given sizes along `dim`, which must add up to its size
// (torch.split with a list; views of x).
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int dim = 0);
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int dim = 0);
Tensor to_dtype(const Tensor& x, DType t);
// Shape both would broadcast to; ShapeError naming `op` otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast_shapes");

// A view with the given shape, strides and storage offset (in elements):
// torch.as_strided. Not differentiable; every element must lie inside the
// storage (IndexError otherwise).
Tensor as_strided(const Tensor& x, const Shape& shape, const Strides& strides, std::int64_t offset);

// --- neural-network ops (composites of the primitives above; differentiable) ----------
Tensor softmax(const Tensor& x, int dim);
Tensor log_softmax(const Tensor& x, int dim);
// Mean over the batch of -log softmax(logits)[i, target[i]]: logits [N, C]
// (floating), target [N] integer class indices in [0, C). Fused and stable:
// one log-sum-exp pass forward, softmax - one_hot backward.
Tensor cross_entropy(const Tensor& logits, const Tensor& target);
Tensor mse_loss(const Tensor& input, const Tensor& target);  // mean((input - target)^2)
// 2-D convolution (cross-correlation), torch.conv2d: x [N, C, H, W],
// weight [O, C / groups, KH, KW], bias [O] or undefined; kernel taps
// `dilation` apart; `groups` splits C and O into that many independent
// convolutions (C and O divisible by it). im2col through a strided view (or
// the backend's fused im2col) plus one GEMM, so it runs on every backend.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              std::array<std::int64_t, 2> stride = {1, 1}, std::array<std::int64_t, 2> padding = {0, 0},
              std::array<std::int64_t, 2> dilation = {1, 1}, std::int64_t groups = 1);
// torch.conv1d: x [N, C, L], weight [O, C / groups, K]; conv2d over rows of height 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, std::int64_t stride = 1,
              std::int64_t padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1);
// Pooling over [N, C, H, W]; max pads with -inf, avg with 0 (counted).
Tensor max_pool2d(const Tensor& x, std::array<std::int64_t, 2> kernel, std::array<std::int64_t, 2> stride,
                  std::array<std::int64_t, 2> padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, std::array<std::int64_t, 2> kernel, std::array<std::int64_t, 2> stride,
                  std::array<std::int64_t, 2> padding = {0, 0});
// Average pooling to a fixed output size (torch adaptive_avg_pool2d): x
// [N, C, H, W] or [C, H, W] to [..., OH, OW], output cell (i, j) the mean of
// rows [floor(i*H/OH), ceil((i+1)*H/OH)) and the same for columns (PyTorch's
// bins, so OH may exceed H). A composite: a mean over H and W for {1, 1},
// otherwise two GEMMs with bin-averaging matrices built on x's device.
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<std::int64_t, 2> output_size);
// Max pooling to a fixed output size (torch adaptive_max_pool2d, values
// only), over the same bins. NaN wins. A regular max_pool2d when H and W
// divide evenly, otherwise a max over rows then columns of each bin (the
// gradient then shares a tie evenly, as amax does).
Tensor adaptive_max_pool2d(const Tensor& x, std::array<std::int64_t, 2> output_size);
// torch.nn.functional.interpolate's arguments, its names and defaults. Give
// exactly one of size and scale_factor ({0, 0} is "not given"):
//   anvil::interpolate(x, {.size = {96, 96}, .mode = "bilinear"});
//   anvil::interpolate(x, {.scale_factor = {2, 2}});   // nearest
struct InterpolateOptions {
  std::array<std::int64_t, 2> size = {0, 0};    // the output's [OH, OW]
  std::array<double, 2> scale_factor = {0, 0};  // OH = floor(H * scale_factor[0]), OW likewise
  std::string mode = "nearest";                 // "nearest" or "bilinear"
  std::optional<bool> align_corners;            // bilinear only (unset: false)
  // With scale_factor: map pixels by the sizes' ratio H / OH rather than by
  // 1 / scale_factor (PyTorch's recompute_scale_factor=True).
  bool recompute_scale_factor = false;
};
// Resamples x [N, C, H, W] (f16, bf16, f32, f64) to [N, C, OH, OW] as
// torch.nn.functional.interpolate does: "nearest" takes pixel
// floor(o * H / OH) (PyTorch's legacy nearest), "bilinear" weighs the four
// pixels around the source point, half-pixel centres unless align_corners.
// On every device (one kernel per direction where the backend has it, Note
// [Interpolation]); differentiable, its gradient the adjoint, deterministic.
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

// --- sequence models (composites; differentiable) -----------------------------------------
// Rows of weight [num_embeddings, embedding_dim] picked by integer indices
// (any shape): indices.shape + [embedding_dim] (torch.nn.functional.embedding).
// The gradient adds into weight's rows with index_add.
Tensor embedding(const Tensor& indices, const Tensor& weight);
// (x - mean) / sqrt(var + eps) * weight + bias over the trailing
// normalized_shape dims of x (biased variance, torch layer_norm); weight and
// bias have normalized_shape, or are undefined. 16-bit inputs compute in
// f32. Like batch_norm, its gradient is one rule.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// What batch_norm's fused epilogue applies last (None: nothing).
enum class Activation : std::uint8_t { None, ReLU };
// torch.nn.functional.batch_norm over x [N, C, ...]: (x - mean) /
// sqrt(var + eps) * weight + bias per channel. Training: mean and the biased
// variance of this batch over every dim but C, and running_mean and
// running_var (when defined) move `momentum` of the way to them, the
// variance unbiased, in place. Evaluation: the running statistics, which
// must then be defined. weight, bias and the running statistics are [C] or
// undefined. 16-bit inputs compute in f32; under autocast, always in f32.
// Its gradient is one rule (two reductions and three elementwise passes),
// not the chain of the composite; in f32 and f64 the forward and the
// gradient are each one pass over the channels (Note [Fused batch norm]).
//
// Fused epilogue (no torch counterpart): with `residual` (x's shape, dtype
// and device) and/or `activation`, the result is act(bn(x) + residual),
// PyTorch's relu(bn(x) + r) of a ResNet block, in the same launch as the
// normalisation, and the gradient's ReLU mask (from the saved output: y > 0)
// folds into batch norm's backward, which also writes the residual's
// gradient. Values and gradients equal the unfused composition's within
// rounding; training and evaluation alike.
//   y = anvil::batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5, shortcut, anvil::Activation::ReLU);
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5,
                  const Tensor& residual = {}, Activation activation = Activation::None);
// softmax(q k^T / sqrt(E) masked) over q [..., L, E], k [..., S, E] with
// v [..., S, Ev] -> [..., L, Ev] (torch scaled_dot_product_attention, PyTorch
// 2.x semantics; no dropout: apply it to attention_weights yourself).
// attn_mask broadcasts to [..., L, S]: bool (true = may attend) or added
// floats; is_causal keeps column <= row and excludes attn_mask. A row with
// nothing to attend to is 0, as in PyTorch 2.5+ (1.13 gave NaN).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = {},
                                    bool is_causal = false);
// The [..., L, S] softmax weights that scaled_dot_product_attention applies to v.
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& attn_mask = {}, bool is_causal = false);
// Zeroes each element with probability p and scales the rest by 1/(1-p)
// when training; x itself otherwise (torch.nn.functional.dropout).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

// The recurrent layers' whole computation, the body of nn::RNN, GRU and
// LSTM (anvil/nn/sequence.h; PyTorch's _VF.rnn_tanh, rnn_relu, gru, lstm):
// x [T, N, input_size] ([N, T, input_size] with batch_first); h0 (and, for
// LSTM, c0) [num_layers, N, H] or undefined for zeros; `weights` per layer
// weight_ih [G*H, input_size or H], weight_hh [G*H, H], then bias_ih and
// bias_hh [G*H] when has_bias (G gates: 1, GRU's r, z, n, LSTM's i, f, g,
// o). Returns output [T, N, H] ([N, T, H]), h_n and (LSTM) c_n
// [num_layers, N, H]; dropout on every layer's output but the last when
// training. Where the device's backend has a fused recurrent layer (cuDNN on
// CUDA) the whole stack is one op forward and one backward (Note [Fused
// recurrent layers]); elsewhere, or with ANVIL_FUSED_RNN=0, it runs one time
// step at a time from matmul and elementwise ops, differentiable as they are.
enum class RnnMode : std::uint8_t { Tanh, ReLU, GRU, LSTM };
struct RnnResult {
  Tensor output, h_n, c_n;
};
RnnResult rnn(RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
              std::int64_t num_layers, bool has_bias, bool batch_first, double dropout = 0.0, bool training = false);

// --- equality helpers for tests and users --------------------------------------------
// Same shape and |a - b| <= atol + rtol * |b| everywhere (on the host).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);  // same shape, dtype and values

}  // namespace anvil
