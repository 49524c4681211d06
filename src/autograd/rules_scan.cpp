// Gradient rules of the scans (anvil/ops.def, src/ops/scan_sort.cpp). sort
// and topk need none of their own: their values are gathered at their indices.
#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "ops/op_common.h"

namespace anvil::detail {

// The running sum: out[i] = x[0] + ... + x[i], so dx[j] = g[j] + ... + g[n-1]:
// the same scan from the other end (and its gradient the forward scan again).
void record_scan(ScanOp op, const Tensor& out, const Tensor& x, int dim, bool reverse) {
  if (!is_floating(out.dtype()) || !should_record({&x})) return;
  ANVIL_ASSERT(row(op).kind == ScanKind::Sum, "record_scan: no rule for ", name(op));
  record(row(op).grad, out, {&x}, [op, dim, reverse](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{scan_along(op, g, dim, !reverse)};
  });
}

}  // namespace anvil::detail
