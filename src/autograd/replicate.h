// Gradient edges for replicated parameters (nn::DataParallel), internal.
//
// Note [Replica parameters are broadcasts]
// DataParallel keeps one module per device and copies the master's values
// into the others before each forward, as LibTorch's replicate does. When
// that forward records, each replica parameter becomes, in place, a non-leaf
// whose node ("BroadcastBackward") moves its gradient to the master's device
// and hands it to the master parameter: the engine sums what every replica
// sends into the master's .grad (PyTorch's reduce-add). In place, because a
// layer holds its parameters as members (Linear's w_): the same TensorImpl
// must change, so no new tensor can be handed to it.
#pragma once

#include "anvil/tensor.h"

namespace anvil::detail {

// `replica` holds a copy of `source`'s values (made with grad mode off);
// from now on backward through `replica` adds into `source`'s gradient. Call
// with grad mode on and `source` requiring grad.
void set_broadcast_source(const Tensor& replica, const Tensor& source);
// Makes `replica` a leaf that requires grad again (DataParallel::train_step
// runs backward on each replica by itself).
void reset_to_leaf(const Tensor& replica);

}  // namespace anvil::detail
