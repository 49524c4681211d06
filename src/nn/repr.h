// How layers spell their settings in name(), as PyTorch's extra_repr does:
// "Linear(in_features=3, out_features=1, bias=true)", the parts joined by
// detail::cat (anvil/error.h). Private to src/nn.
#pragma once

#include "anvil/error.h"

namespace anvil::nn {

inline const char* bool_text(bool b) { return b ? "true" : "false"; }

}  // namespace anvil::nn
