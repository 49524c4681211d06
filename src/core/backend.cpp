// The backend interface's own definitions (core/backend.h): the names of
// the fused and index ops (the elementwise and reduction ops have theirs in
// anvil/ops.def), and the defaults of its optional members. The op frontend
// (src/ops) and every backend use them; they depend on nothing above the core.
#include "core/backend.h"

#include "anvil/error.h"

namespace anvil::detail {

bool ElementwiseArgs::contiguous() const noexcept {
  if (ndim != 1) return false;
  if (out.strides[0] != 1) return false;
  for (int k = 0; k < nin; ++k)
    if (!in[k].is_scalar && in[k].strides[0] != 1) return false;
  return true;
}

const char* name(FusedOp op) noexcept {
  static const char* names[] = {"im2col",
                                "col2im",
                                "max_pool2d",
                                "max_pool2d_backward",
                                "conv2d",
                                "conv2d_backward_data",
                                "conv2d_backward_weight",
                                "unary_binary",
                                "batch_norm",
                                "batch_norm_backward",
                                "rnn",
                                "rnn_backward",
                                "interpolate",
                                "interpolate_backward",
                                "softmax",
                                "softmax_backward",
                                "gemm_bias",
                                "layer_norm",
                                "layer_norm_backward",
                                "gemm_two_level_batch"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(FusedOp::Count), "one name per FusedOp");
  return names[static_cast<int>(op)];
}

const char* name(RnnMode mode) noexcept {
  static const char* names[] = {"rnn_tanh", "rnn_relu", "gru", "lstm"};
  return names[static_cast<int>(mode)];
}

const char* name(OptimizerKind kind) noexcept {
  static const char* names[] = {"sgd", "adam"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(OptimizerKind::Count), "one name per kind");
  return names[static_cast<int>(kind)];
}

const char* name(IndexOp op) noexcept {
  static const char* names[] = {"index_select", "gather", "index_add", "scatter_add", "index_copy"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<int>(IndexOp::Count), "one name per op");
  return names[static_cast<int>(op)];
}

void Backend::optimizer_step(int, const OptimizerStepArgs& args) {
  throw NotSupported(cat(name(args.kind), " step: no fused kernel on ", to_string(type()),
                         "; expected a backend whose supports_optimizer_step() says yes; run the composite update "
                         "instead"));
}

void Backend::not_fused(FusedOp op) const {
  throw NotSupported(cat(name(op), ": no fused kernel on ", to_string(type()),
                         "; expected a backend whose supports_fused() says yes; build the op from primitives instead"));
}

}  // namespace anvil::detail
