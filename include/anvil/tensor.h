// anvil/tensor.h — the Tensor handle.
//
//   auto x = anvil::ones({2, 3}, anvil::try_gpu());   // lives where you say
//   auto y = (x + 2).exp() * x;                        // runs where x lives
//   auto h = y.cpu();                                  // moves only on purpose
//   std::cout << h << "\n";
//
// A Tensor is a cheap, reference-counted handle to a view (shape, strides,
// offset, dtype) over a Storage that owns bytes on one device. Copying a
// Tensor copies the handle, not the data (like torch.Tensor in Python);
// `clone()` and `copy_to()` copy data. A default-constructed Tensor is
// undefined (`defined() == false`); every op rejects it with ValueError.
// Thread safety: distinct tensors may be used from distinct threads; one
// tensor written from two threads at once is a data race.
#pragma once

#include <anvil/source_location.h>

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "anvil/device.h"
#include "anvil/dtype.h"
#include "anvil/error.h"
#include "anvil/shape.h"

namespace anvil {

namespace detail {
class TensorImpl;
}
struct ValuesIndices;

// How a 4-d [N, C, H, W] tensor's elements lie in memory
// (torch.memory_format). Contiguous: row-major NCHW, the default.
// ChannelsLast: NHWC in memory, strides [H*W*C, 1, W*C, C], the shape still
// [N, C, H, W]; convolutions, pooling, activations and the residual add keep
// it, so cuDNN's tensor-core kernels read it without a transpose. Preserve:
// the input's own (an argument default, as PyTorch's).
enum class MemoryFormat { Contiguous, ChannelsLast, Preserve };

class Tensor {
 public:
  Tensor() noexcept = default;
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) noexcept : impl_(std::move(impl)) {}

  // --- what it is ------------------------------------------------------------
  bool defined() const noexcept { return impl_ != nullptr; }
  const Shape& shape() const;
  const Strides& strides() const;
  std::int64_t size(int dim) const;  // negative dims count from the end
  std::int64_t stride(int dim) const;
  int dim() const;
  std::int64_t numel() const;
  DType dtype() const;
  Device device() const;
  std::int64_t offset() const;  // into the storage, in elements
  bool is_contiguous() const;
  // Dense in `format`'s order (ChannelsLast: 4-d only); Preserve is rejected.
  bool is_contiguous(MemoryFormat format) const;
  // ChannelsLast for a 4-d tensor laid out channels-last (and not also
  // row-major, as for C == 1), else Contiguous: the format ops keep.
  MemoryFormat suggest_memory_format() const;
  std::size_t nbytes() const;  // numel * element size
  // Same TensorImpl: `t.to(t.device()).is_same(t)` is true.
  bool is_same(const Tensor& other) const noexcept { return impl_ == other.impl_; }
  // Views of one storage share it.
  bool shares_storage(const Tensor& other) const;

  // --- moving between devices and dtypes (DESIGN §4.6) ------------------------
  // `loc` (here and in the host reads below) is the caller's line, for the
  // profiler's sync report and SyncGuard (anvil/profiler.h); leave it out.
  // This tensor itself when already on `d`; else a copy on `d`.
  Tensor to(Device d, SourceLocation loc = SourceLocation::current()) const;
  // This tensor itself when already `t`; else a converted copy.
  Tensor to(DType t) const;
  Tensor to(Device d, DType t) const;
  // Always new storage, even on the same device.
  Tensor copy_to(Device d, SourceLocation loc = SourceLocation::current()) const;
  Tensor cpu(SourceLocation loc = SourceLocation::current()) const { return to(anvil::cpu(), loc); }

  // --- host access (copies to the host and waits; counted by the ledger) -------
  // T: bool, float, double or an integer type of a dtype's width (int,
  // long, long long, std::int64_t, unsigned char, ...; see dtype_of).
  template <HasDType T>
  T item(SourceLocation loc = SourceLocation::current()) const;
  template <HasDType T>
  std::vector<T> to_vector(SourceLocation loc = SourceLocation::current()) const;
  // Pointer to the first element; CPU tensors only (NotSupported otherwise).
  template <typename T>
  T* data_ptr() const;
  void* raw_data_ptr() const;

  // --- views (share storage) ------------------------------------------------
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor view(const Shape& shape) const;     // a view or ShapeError
  Tensor transpose(int dim0, int dim1) const;
  Tensor permute(const Dims& dims) const;
  Tensor t() const;  // transpose of a ≤2-D tensor
  Tensor slice(int dim, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  Tensor narrow(int dim, std::int64_t start, std::int64_t length) const;
  Tensor select(int dim, std::int64_t index) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a dim
  Tensor repeat(const Shape& sizes) const;  // a tiled copy (ops.h)
  Tensor squeeze() const;
  Tensor squeeze(const Dims& dims) const;  // those of `dims` that are size 1
  Tensor unsqueeze(int dim) const;
  Tensor flatten(int start_dim = 0, int end_dim = -1) const;
  Tensor contiguous() const;  // this tensor when already contiguous
  // This tensor when already dense in `format`, else a copy laid out so.
  Tensor contiguous(MemoryFormat format) const;
  // A copy on the same device: channels-last stays so, anything else becomes contiguous.
  Tensor clone(MemoryFormat format = MemoryFormat::Preserve) const;
  Tensor operator[](std::int64_t index) const { return select(0, index); }
  Tensor index_select(int dim, const Tensor& index) const;
  Tensor gather(int dim, const Tensor& index) const;
  Tensor index_add(int dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1) const;
  Tensor scatter_add(int dim, const Tensor& index, const Tensor& src) const;
  Tensor index_copy(int dim, const Tensor& index, const Tensor& source) const;
  Tensor flip(const Dims& dims) const;
  std::vector<Tensor> split(std::int64_t split_size, int dim = 0) const;
  std::vector<Tensor> split(const std::vector<std::int64_t>& sizes, int dim = 0) const;
  std::vector<Tensor> chunk(std::int64_t chunks, int dim = 0) const;
  Tensor as_strided(const Shape& shape, const Strides& strides, std::int64_t offset) const;

  // --- elementwise ------------------------------------------------------------
  // x.exp(), x.relu(), … : each elementwise op of one tensor in anvil/ops.def, as
  // the free function of its name.
#define ANVIL_UNARY_OP(Op, name, ...) Tensor name() const;
#define ANVIL_UNARY_OP_WITH_PARAMS(...)
#include "anvil/ops.def"
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor tril(std::int64_t diagonal = 0) const;
  Tensor triu(std::int64_t diagonal = 0) const;
  Tensor clamp(std::optional<Scalar> lo, std::optional<Scalar> hi = std::nullopt) const;
  // x.add(y), x.add(2), x.atan2(y), … : each elementwise op of two operands in
  // anvil/ops.def, as the free function of its name with this tensor first.
#define ANVIL_BINARY_TENSOR(Op, name) Tensor name(const Tensor& other) const;
#define ANVIL_BINARY_SCALAR(Op, name) Tensor name(const Scalar& other) const;
#include "anvil/ops.def"
  Tensor add(const Tensor& o, const Scalar& alpha) const;  // x + alpha * o
  // condition ? this : other (torch.Tensor.where).
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor where(const Tensor& condition, const Scalar& other) const;

  // In place: write the result into this tensor (its dtype must hold it).
  Tensor& add_(const Tensor& o);
  Tensor& add_(const Scalar& o);
  Tensor& sub_(const Tensor& o);
  Tensor& sub_(const Scalar& o);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(const Scalar& o);
  Tensor& div_(const Tensor& o);
  Tensor& div_(const Scalar& o);
  Tensor& pow_(const Scalar& o);
  Tensor& clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi);
  Tensor& relu_();
  Tensor& exp_();
  Tensor& neg_();
  Tensor& fill_(const Scalar& v);
  Tensor& zero_();
  // Copies `src` (broadcast, converted) into this tensor; same device.
  Tensor& copy_(const Tensor& src);
  // index_add and scatter_add (ops.h) accumulating into this tensor, and
  // index_copy (the last of repeated indices wins) writing into it.
  Tensor& index_add_(int dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
  Tensor& index_copy_(int dim, const Tensor& index, const Tensor& source);
  Tensor& scatter_add_(int dim, const Tensor& index, const Tensor& src);

  // --- reductions (ops.h): dims are one dim or a list, x.sum(1), x.sum({0, 1}) ---
  Tensor sum(const Dims& dims = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(const Dims& dims = {}, bool keepdim = false) const;
  Tensor prod(const Dims& dims = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor amax(const Dims& dims = {}, bool keepdim = false) const;
  Tensor amin(const Dims& dims = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  // Values and indices along one dim: `auto [values, indices] = x.max(1);`.
  ValuesIndices max(int dim, bool keepdim = false) const;
  ValuesIndices min(int dim, bool keepdim = false) const;
  // x.cumsum(dim), … : each scan of anvil/ops.def.
#define ANVIL_SCAN_OP(Op, name, ...) Tensor name(int dim) const;
#include "anvil/ops.def"
  ValuesIndices sort(int dim = -1, bool descending = false) const;
  ValuesIndices topk(std::int64_t k, int dim = -1, bool largest = true, bool sorted = true) const;
  Tensor argmax() const;
  Tensor argmax(int dim, bool keepdim = false) const;
  Tensor argmin() const;
  Tensor argmin(int dim, bool keepdim = false) const;
  Tensor var(const Dims& dims = {}, bool keepdim = false, std::int64_t correction = 1) const;
  Tensor std(const Dims& dims = {}, bool keepdim = false, std::int64_t correction = 1) const;
  Tensor norm(const Dims& dims = {}, bool keepdim = false) const;
  Tensor logsumexp(const Dims& dims, bool keepdim = false) const;
  Tensor softmax(int dim) const;
  Tensor log_softmax(int dim) const;

  // --- linear algebra ---------------------------------------------------------
  Tensor matmul(const Tensor& o) const;
  Tensor mm(const Tensor& o) const;
  Tensor bmm(const Tensor& o) const;
  Tensor dot(const Tensor& o) const;
  Tensor outer(const Tensor& o) const;
  // beta * this + alpha * (a @ b), this the bias (torch.Tensor.addmm).
  Tensor addmm(const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1) const;
  // beta * this + alpha * (b1 @ b2), batched (torch.Tensor.baddbmm).
  Tensor baddbmm(const Tensor& b1, const Tensor& b2, const Scalar& beta = 1, const Scalar& alpha = 1) const;

  // --- comparing (ops.h) ------------------------------------------------------
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8) const;
  bool equal(const Tensor& other) const;

  // --- autograd (anvil/autograd.h) --------------------------------------------
  bool requires_grad() const;
  // Marks a floating-point leaf as needing gradients; returns *this.
  Tensor& requires_grad_(bool requires_grad = true);
  // Accumulated gradient (undefined until a backward pass reaches it).
  Tensor grad() const;
  // Replaces the gradient (an undefined tensor clears it).
  void set_grad(const Tensor& grad) const;
  // Zeroes the gradient in place when there is one.
  void zero_grad() const;
  // Not produced by a recorded op (created by the user, or detached).
  bool is_leaf() const;
  // The recording op's backward name ("AddmmBackward"), "" for leaves.
  std::string grad_fn_name() const;
  // Gradients of this tensor w.r.t. the graph's leaves; `gradient` may be
  // left out for a one-element tensor.
  void backward(const Tensor& gradient = {}, bool retain_graph = false) const;
  // The same data without history (shares storage).
  Tensor detach() const;
  // Makes this tensor (the same handle, every copy of it, its autograd
  // state) view `src`'s data instead: what nn::Module::to uses so that a
  // parameter keeps its identity while moving between devices.
  void set_data(const Tensor& src) const;

  std::shared_ptr<detail::TensorImpl> const& impl() const noexcept { return impl_; }
  detail::TensorImpl& impl_ref() const;  // ValueError when undefined

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
};

// What max / min along a dim return, as torch.max(x, dim) does:
//   auto [values, indices] = x.max(1);   // or r.values, r.indices
struct ValuesIndices {
  Tensor values;
  Tensor indices;  // i64
};

// A tensor being printed, with the line that prints it: `std::cout << t`
// converts t to this implicitly, and the conversion's default argument is
// the caller's location (an operator cannot take a defaulted parameter).
struct PrintedTensor {
  PrintedTensor(const Tensor& t, SourceLocation loc = SourceLocation::current()) noexcept : tensor(t), location(loc) {}
  const Tensor& tensor;
  SourceLocation location;
};

// PyTorch's format: tensor([[1., 1.],\n        [1., 1.]], device='opencl:0').
// Printing a device tensor is exactly one device→host copy.
std::ostream& operator<<(std::ostream& os, const PrintedTensor& t);
std::string to_string(const Tensor& t, SourceLocation loc = SourceLocation::current());

// Print options, like torch.set_printoptions.
struct PrintOptions {
  int precision = 4;
  std::int64_t threshold = 1000;  // summarise past this many elements
  int edgeitems = 3;
  int linewidth = 80;
};
void set_printoptions(const PrintOptions& options);
PrintOptions printoptions();

}  // namespace anvil
