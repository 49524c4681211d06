// The autograd graph (DESIGN §5), internal to src/ops and src/autograd.
//
// Note [Autograd recording]
// Every differentiable op records itself once, in its frontend (src/ops),
// by calling one `record_*` function declared here right after it computed
// its result. A record function does nothing unless grad mode is on and an
// input requires grad; otherwise it builds a Node holding that op's gradient
// rule (src/autograd/rules_*.cpp) and the edges to its inputs' nodes, and
// marks the output as requiring grad. Leaves (tensors the user marked with
// requires_grad_) get an AccumulateGrad node that adds into their .grad.
//
// A Node stores, per input, the shape, dtype and device the input had. The
// engine reduces a rule's gradient to that shape (summing over broadcast
// dims) and converts it to that dtype, so rules may return gradients in the
// broadcast shape and the computation dtype.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/ops.h"
#include "core/tensor_impl.h"
#include "ops/tensor_make.h"

namespace anvil::detail {

struct Node;

// A leaf's post-accumulate-grad hooks (autograd::register_post_accumulate_grad_hook),
// held by shared_ptr so a HookHandle can tell when the leaf is gone.
struct GradHookList {
  std::mutex mutex;
  std::uint64_t next_id = 1;
  std::vector<std::pair<std::uint64_t, std::function<void(const Tensor&)>>> hooks;
};

// Note [Concurrent backward]
// Several threads may run backward over graphs that share leaves (one model
// trained from many threads, Hogwild) or share nodes (retain_graph). A
// leaf's `grad` and its `grad_accumulator` are the only state two passes
// write, so each leaf holds a mutex over exactly those two, as PyTorch's
// AccumulateGrad does; a node's `fn` is taken (or copied, under
// retain_graph) under the node's mutex, so a pass that frees a shared graph
// fails the other with "already freed" instead of calling a freed rule.
// Everything else a pass touches (its ready queue, dependency counts and
// gradient buffers) is its own. Forward ops take no lock.
struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<GradHookList> post_accumulate_hooks;  // null until one is registered
  std::shared_ptr<Node> grad_fn;                        // null for leaves; set once, when the tensor is made
  std::mutex mutex;                                     // guards the two below (Note [Concurrent backward])
  Tensor grad;
  std::weak_ptr<Node> grad_accumulator;  // leaves: their AccumulateGrad, made on first use
};

// grads[i] for input i; an undefined tensor means "no gradient" (zero).
// `needs[i]` says whether input i wants one, so rules can skip work.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad, const std::vector<bool>& needs)>;

struct InputInfo {
  Shape shape;
  DType dtype = DType::F32;
  Device device;
};

struct Node {
  virtual ~Node() = default;
  std::string name;
  // Creation order (see Note [Backward order] in engine.cpp); AccumulateGrad
  // nodes hold the largest value so leaves are served as soon as they are ready.
  std::uint64_t sequence_nr = 0;
  std::vector<std::shared_ptr<Node>> next;  // per input; null when it needs no grad
  std::vector<InputInfo> inputs;
  BackwardFn fn;     // released after backward unless retain_graph; see take_fn
  std::mutex mutex;  // guards fn while a backward pass runs (Note [Concurrent backward])
  // Views that select part of their one input (slice, select) also say
  // where: place(input's gradient) is the view that receives this node's
  // gradient, and the engine adds into it (Note [Gradients of views]).
  std::function<Tensor(const Tensor&)> place;
  // Runs the rule; without retain_graph the rule is freed first.
  virtual std::vector<Tensor> apply(const Tensor& grad, bool retain_graph);
  // The rule, for one use: moved out (freeing the node's saved tensors) or,
  // under retain_graph, copied. ValueError once a backward pass freed it.
  BackwardFn take_fn(bool retain_graph);
  void release() noexcept;  // frees the rule (no-op when already freed)
};

// Adds incoming gradients into a leaf's .grad, under the leaf's mutex.
struct AccumulateGrad final : Node {
  std::shared_ptr<TensorImpl> leaf;
  std::vector<Tensor> apply(const Tensor& grad, bool retain_graph) override;
};

bool grad_mode_enabled() noexcept;
// The next creation number for a Node (process-wide, thread-safe).
std::uint64_t next_sequence_nr() noexcept;

// Whether `t` is part of a graph that wants gradients.
inline bool requires_grad(const Tensor& t) noexcept {
  return t.defined() && t.impl()->autograd && t.impl()->autograd->requires_grad;
}
inline bool should_record(std::initializer_list<const Tensor*> inputs) noexcept {
  if (!grad_mode_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && requires_grad(*t)) return true;
  return false;
}

// Attaches a node named `name` with rule `fn` to `out` (inputs may hold
// nullptr for "not a tensor"). Call only when should_record(inputs).
void record(const char* name, const Tensor& out, const std::vector<const Tensor*>& inputs, BackwardFn fn);
inline void record(const char* name, const Tensor& out, std::initializer_list<const Tensor*> inputs, BackwardFn fn) {
  record(name, out, std::vector<const Tensor*>(inputs), std::move(fn));
}

// record() for a view that selects part of its one input `x`: `place` is
// that view of a tensor of x's shape (see Node::place).
void record_view(const char* name, const Tensor& out, const Tensor& x, BackwardFn fn,
                 std::function<Tensor(const Tensor&)> place);

// A handle to `t`'s data without its autograd history: what rules save, so
// a node never keeps its own output (or the graph above an input) alive.
Tensor saved(const Tensor& t);

// PyTorch's in-place rules, simplified: an in-place op may not write into or
// read from a tensor that requires grad while grad mode is on, nor write into
// a tensor whose elements share memory (a stride of 0 over a dim of size > 1).
// Errors name the op as `op` then `suffix` ("add", "_" for add_).
void check_inplace(const char* op, const Tensor& self, const Tensor* other = nullptr, const char* suffix = "");

// --- one record function per primitive (src/autograd/rules_*.cpp) --------------------
void record_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void record_binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, const Scalar& s, bool scalar_first);
void record_unary(UnaryOp op, const Tensor& out, const Tensor& x, const UnaryParams& params);
void record_where(const Tensor& out, const Tensor& cond, const Tensor* a, const Tensor* b);
void record_reduce(ReduceOp op, const Tensor& out, const Tensor& x, const Dims& dims, bool keepdim, double scale);
void record_norm(const Tensor& out, const Tensor& x, const Dims& dims);  // 0 gradient where the norm is 0
void record_matmul(const Tensor& out, const Tensor& a, const Tensor& b);
void record_addmm(const Tensor& out, const Tensor& bias, const Tensor& a, const Tensor& b, double beta, double alpha);
void record_cast(const Tensor& out, const Tensor& x);
void record_to_device(const Tensor& out, const Tensor& x);
void record_clone(const Tensor& out, const Tensor& x);
void record_reshape(const char* name, const Tensor& out, const Tensor& x);  // view, reshape, (un)squeeze
void record_transpose(const Tensor& out, const Tensor& x, int dim0, int dim1);
void record_permute(const Tensor& out, const Tensor& x, const Dims& dims);
void record_slice(const Tensor& out, const Tensor& x, int dim, std::int64_t start, std::int64_t end, std::int64_t step);
void record_select(const Tensor& out, const Tensor& x, int dim, std::int64_t index);
void record_expand(const Tensor& out, const Tensor& x);
void record_cat(const Tensor& out, const std::vector<Tensor>& inputs, int dim);
void record_index_select(const Tensor& out, const Tensor& x, int dim, const Tensor& index);
void record_gather(const Tensor& out, const Tensor& x, int dim, const Tensor& index);
void record_index_add(const Tensor& out, const Tensor& x, const Tensor& source, int dim, const Tensor& index,
                      double alpha);
// index_copy: the gradient reaches x where no row was written and source's
// rows that were written last.
void record_index_copy(const Tensor& out, const Tensor& x, const Tensor& source, int dim, const Tensor& index);
void record_scatter_add(const Tensor& out, const Tensor& x, const Tensor& src, int dim, const Tensor& index);

// The scan `op` (anvil/ops.def) along `dim` of an f32/f64/i64 tensor (from the
// row's end when `reverse`), recorded; a view with the scanned dim moved back in
// place.
Tensor scan_along(ScanOp op, const Tensor& x, int dim, bool reverse);
void record_scan(ScanOp op, const Tensor& out, const Tensor& x, int dim, bool reverse);

// Window geometry of conv2d and the pools over a (padded) [N, C, H, W] input;
// n, c, h, w are the unpadded input's. The fused kernels take the same struct.
using Window2d = Window2dGeometry;
void record_conv2d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& cols,
                   const Window2d& win);
void record_max_pool2d(const Tensor& out, const Tensor& x, const Tensor& windows, const Window2d& win);
void record_avg_pool2d(const Tensor& out, const Tensor& x, const Window2d& win);
void record_cross_entropy(const Tensor& out, const Tensor& logits, const Tensor& log_probs, const Tensor& target);

// The fused-kernel paths of conv2d and max_pool2d (used when the backend's
// supports_fused() says so; src/ops/nn_ops.cpp). im2col's gradient is col2im;
// the fused max_pool2d keeps its argmax indices for its backward.
// `cols_strides`: the six dims [N, C, KH, KW, OH, OW] of the contiguous cols.
void record_im2col(const Tensor& out, const Tensor& x, const Window2d& win, const Strides& cols_strides);
void record_max_pool2d_indices(const Tensor& out, const Tensor& x, const Tensor& indices, const Window2d& win);
// contiguous cols (laid out as cols_strides say) → [N, C, H, W] in `format`,
// summing overlapping windows.
Tensor col2im(const Tensor& cols, const Window2d& win, const Strides& cols_strides, MemoryFormat format);
// [N, C, OH, OW] output gradient (any strides) → [N, C, H, W] input gradient in `format`.
Tensor max_pool2d_backward(const Tensor& grad, const Tensor& indices, const Window2d& win, MemoryFormat format);

// interpolate's kernel path (Note [Interpolation] in core/backend.h; taken
// when the backend's supports_fused() says so; src/ops/interpolate.cpp),
// `shape` as interpolate validated it, operands unset. Its gradient is
// interpolate_backward, the adjoint [N, C, OH, OW] -> [N, C, H, W] (not
// itself recorded: backward runs without grad).
void record_interpolate(const Tensor& out, const Tensor& x, const InterpolateArgs& shape);
// softmax or log_softmax over the last dim by the fused kernel (Note [Fused
// softmax]); its gradient from the saved output, by the backward kernel.
void record_softmax(const Tensor& out, const Tensor& x, bool log);
Tensor softmax_backward(const Tensor& grad, const Tensor& y, bool log);
Tensor interpolate_backward(const Tensor& grad, const InterpolateArgs& shape);

// batch_norm's rule. xc = x - mean (computed in `compute`, the dtype the op
// computed in) and invstd = 1 / sqrt(var + eps) shaped [1, C, 1, ...];
// `training`: mean and var were the batch's own, so they depend on x too.
void record_batch_norm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& xc,
                       const Tensor& invstd, bool training);

// The fused path of batch_norm (Note [Fused batch norm]; used when the
// backend's supports_fused() says so): x contiguous f32 or f64, mean and
// invstd [C] (the batch's in training, else the running mean and
// 1 / sqrt(running var + eps)), weight of x's dtype or undefined.
// batch_norm_backward returns the input gradient (when want_input), the
// per-channel sum S(g) (the bias's gradient) and, when want_weight, the
// weight's S(g * (x - mean)) * invstd, in one launch; nothing it returns is
// recorded. The fused epilogue: out = relu?(bn(x) + residual?); with relu,
// batch_norm_backward is given the output (relu_output) and masks grad by it
// (y <= 0: 0) in that launch, which also writes the residual's gradient, the
// masked grad (when want_residual); without relu that gradient is grad.
void record_batch_norm_fused(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const Tensor& mean, const Tensor& invstd, bool training, const Tensor& residual = {},
                             bool relu = false);
struct BatchNormGrads {
  Tensor input, sum_g, weight, residual;
};
BatchNormGrads batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                   const Tensor& weight, bool training, bool want_input, bool want_weight,
                                   const Tensor& relu_output = {}, bool want_residual = false);

// The fused path of layer_norm (Note [Fused layer norm]): x contiguous f32
// or f64 as rows of normalized.numel(), mean and invstd [rows], weight and
// bias of x's dtype (shaped `normalized`, any strides) or undefined.
// layer_norm_backward computes every wanted gradient in one call; nothing it
// returns is recorded.
void record_layer_norm_fused(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const Tensor& mean, const Tensor& invstd, const Shape& normalized);
struct LayerNormGrads {
  Tensor input, weight, bias;
};
LayerNormGrads layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& invstd, const Shape& normalized, bool want_input, bool want_weight,
                                   bool want_bias);

// layer_norm's rule: xhat = (x - mean) * invstd over the k trailing dims
// (the shape weight and bias have when defined), invstd with them kept as 1.
void record_layer_norm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& xhat,
                       const Tensor& invstd, int k);

// The direct-convolution path of conv2d (the backend's Conv2d family; its
// shape as conv2d validated it, operands unset). The output and the input
// gradient are contiguous; the gradients are not themselves recorded (no
// double backward through this path).
Tensor conv2d_fused(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dArgs& shape);
void record_conv2d_fused(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Conv2dArgs& shape);
Tensor conv2d_backward_data(const Tensor& grad, const Tensor& weight, const Conv2dArgs& shape);
// The weight gradient (weight's shape and memory format) and, when
// want_bias, the bias's.
std::pair<Tensor, Tensor> conv2d_backward_weight(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                                 const Conv2dArgs& shape, bool want_bias);
// Both at once (Backend::conv2d_backward), the bias's when want_bias.
struct ConvGrads {
  Tensor input, weight, bias;
};
ConvGrads conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Conv2dArgs& shape,
                          bool want_bias);

// The fused recurrent layers (Note [Fused recurrent layers]; src/ops/rnn.cpp):
// rnn_fused runs the backend's forward on validated operands (`shape` with
// its operands unset) and returns y, hy (and cy) as views of one recorded
// tensor (Note [One tensor for the fused RNN's outputs]). Its rule calls
// rnn_backward with that tensor's gradient, the forward's contiguous inputs,
// the tensor itself (y) and the reserve; nothing it returns is recorded (no
// double backward through this path).
std::vector<Tensor> rnn_fused(const RnnArgs& shape, const Tensor& x, const Tensor& h0, const Tensor& c0,
                              const std::vector<Tensor>& weights);
void record_rnn_fused(const Tensor& packed, const RnnArgs& shape, const Tensor& x, const Tensor& h0, const Tensor& c0,
                      const std::vector<Tensor>& weights, const Tensor& reserve);
struct RnnGrads {
  Tensor x, h0, c0;
  std::vector<Tensor> weights;  // empty unless asked for
};
RnnGrads rnn_backward(const Tensor& grad, const RnnArgs& shape, const Tensor& x, const Tensor& h0, const Tensor& c0,
                      const std::vector<Tensor>& weights, const Tensor& packed, const Tensor& reserve, bool want_h0,
                      bool want_c0, bool want_weights);

}  // namespace anvil::detail
