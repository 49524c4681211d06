// Gradient rule of cumsum (src/ops/scan_sort.cpp). sort and topk need none
// of their own: their values are gathered at their indices.
#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "ops/op_common.h"

namespace anvil::detail {

// out[i] = x[0] + ... + x[i], so dx[j] = g[j] + ... + g[n-1]: the same scan
// from the other end (and its gradient the forward scan again).
void record_cumsum(const Tensor& out, const Tensor& x, int dim, bool reverse) {
  if (!is_floating(out.dtype()) || !should_record({&x})) return;
  record("CumsumBackward", out, {&x}, [dim, reverse](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{cumsum_along(g, dim, !reverse)};
  });
}

}  // namespace anvil::detail
