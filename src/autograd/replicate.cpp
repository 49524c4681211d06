// See Note [Replica parameters are broadcasts] in replicate.h.
#include "autograd/replicate.h"

#include "anvil/autograd.h"
#include "autograd/graph.h"

namespace anvil::detail {

void set_broadcast_source(const Tensor& replica, const Tensor& source) {
  ANVIL_ASSERT(requires_grad(source) && grad_mode_enabled(),
               "set_broadcast_source: expected grad mode on and a source "
               "that requires grad");
  const Device d = source.device();
  // make_differentiable builds the node (and its edge to the source's
  // accumulator) on a view; the replica itself takes the node.
  const Tensor view = autograd::make_differentiable(
      "BroadcastBackward", replica.detach(), {source},
      [d](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g.to(d)}; });
  TensorImpl& impl = replica.impl_ref();
  if (!impl.autograd) impl.autograd = std::make_shared<AutogradMeta>();
  impl.autograd->requires_grad = true;
  impl.autograd->grad_fn = view.impl()->autograd->grad_fn;
  impl.autograd->grad = Tensor();
}

void reset_to_leaf(const Tensor& replica) {
  TensorImpl& impl = replica.impl_ref();
  if (!impl.autograd) impl.autograd = std::make_shared<AutogradMeta>();
  impl.autograd->grad_fn.reset();
  impl.autograd->requires_grad = true;
}

}  // namespace anvil::detail
