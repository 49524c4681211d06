// searchsorted and unique: composites of comparisons, sums, sort, cumsum and
// the index primitives, so they run on every backend with no kernel of their
// own. The checks are here, once; the ops they call see vetted operands.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "anvil/autograd.h"
#include "core/observer.h"
#include "ops/op_common.h"

namespace anvil {

namespace {

// Note [searchsorted by counting]
// The insertion point of v in a sorted row is the number of row entries
// before it, so searchsorted is a comparison of every value with every row
// entry and a sum: O(K·M) work, in blocks of at most kCompareBlock
// comparisons to bound the bool temporary. A merge through sort would be
// O((K+M) log(K+M)) on the CPU, but the device sort primitive is a rank sort,
// O(len²) per row (rows.kern), which counting always beats; a binary-search
// primitive is the way to go faster when a user needs it.
constexpr std::int64_t kCompareBlock = std::int64_t{1} << 24;

// seq [B, K] and vals [B, M] of one dtype: for each value, the number of its
// row's entries before it, i64 [B, M]. NaN sorts above every number (as in
// sort): a NaN value counts the row's numbers on the left, all K on the right.
Tensor count_before(const Tensor& seq, const Tensor& vals, bool right) {
  const std::int64_t b = seq.size(0), k = seq.size(1), m = vals.size(1);
  const Device d = seq.device();
  if (k == 0 || b * m == 0) return zeros({b, m}, d, DType::I64);
  const bool floating = is_floating(seq.dtype());
  Tensor nan_place;  // [B, 1]: where a NaN value goes
  if (floating) nan_place = right ? full({b, 1}, k, d, DType::I64) : k - sum(ne(seq, seq), 1, true);
  const Tensor row = seq.unsqueeze(1);  // [B, 1, K]
  const std::int64_t step = std::max<std::int64_t>(1, kCompareBlock / (b * k));
  std::vector<Tensor> parts;
  for (std::int64_t m0 = 0; m0 < m; m0 += step) {
    const Tensor v = vals.narrow(1, m0, std::min(step, m - m0));
    const Tensor column = v.unsqueeze(2);  // [B, m, 1]
    Tensor c = sum(right ? le(row, column) : lt(row, column), 2);
    if (floating) c = where(ne(v, v), nan_place, c);
    parts.push_back(std::move(c));
  }
  return parts.size() == 1 ? parts.front() : cat(parts, 1);
}

std::string shape_with_last(const Shape& s, const char* last) {
  std::string out = "[";
  for (int i = 0; i + 1 < s.size(); ++i) out += detail::cat(s[i], ", ");
  return out + last + "]";
}

}  // namespace

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32, bool right,
                    std::optional<std::string> side, const Tensor& sorter) {
  const Tensor& seq = sorted_sequence;
  if (sorter.defined())
    detail::check_same_device("searchsorted", {&seq, &values, &sorter});
  else
    detail::check_same_device("searchsorted", {&seq, &values});
  if (side) {
    ANVIL_CHECK(*side == "left" || *side == "right", ValueError,
                "searchsorted: side must be 'left' or 'right'; expected 'left' or 'right', got '", *side, "'");
    ANVIL_CHECK(!right || *side == "right", ValueError,
                "searchsorted: side and right are opposites; expected side 'right' (or none) with right = true, got "
                "side 'left'");
    right = *side == "right";
  }
  ANVIL_CHECK(seq.dim() >= 1, ShapeError,
              "searchsorted: sorted_sequence must have at least 1 dim; expected [K] or [..., K], got ", seq.shape());
  if (seq.dim() > 1) {
    bool match = values.dim() == seq.dim();
    for (int i = 0; match && i + 1 < seq.dim(); ++i) match = values.size(i) == seq.size(i);
    ANVIL_CHECK(match, ShapeError,
                "searchsorted: values must have the leading dims of a sorted_sequence of more than 1 dim; expected ",
                shape_with_last(seq.shape(), "M"), ", got ", values.shape(), " (sorted_sequence is ", seq.shape(), ")");
  }
  ANVIL_CHECK(seq.dtype() != DType::Bool && values.dtype() != DType::Bool, DTypeError,
              "searchsorted: bool is not ordered here; expected numeric sorted_sequence and values, got ", seq.dtype(),
              " and ", values.dtype());
  if (sorter.defined()) {
    ANVIL_CHECK(sorter.dtype() == DType::I64, DTypeError, "searchsorted: sorter must be i64; expected i64, got ",
                sorter.dtype());
    ANVIL_CHECK(sorter.shape() == seq.shape(), ShapeError,
                "searchsorted: sorter must have sorted_sequence's shape; expected ", seq.shape(), ", got ",
                sorter.shape());
  }
  const std::int64_t k = seq.shape().back();
  ANVIL_CHECK(!out_int32 || k < std::numeric_limits<std::int32_t>::max(), ValueError,
              "searchsorted: out_int32 needs fewer than 2^31 - 1 entries per row; expected K < 2147483647, got ", k);
  NoGradGuard no_grad;
  ANVIL_PROFILE_OP("searchsorted", &seq, &values);
  const DType t = promote(seq.dtype(), values.dtype());
  std::int64_t rows = 1;
  for (int i = 0; i + 1 < seq.dim(); ++i) rows *= seq.size(i);
  const Tensor ordered = sorter.defined() ? gather(seq, -1, sorter) : seq;
  const Tensor s = detail::cast(ordered, t).reshape({rows, k});
  const std::int64_t m = seq.dim() == 1 ? values.numel() : values.shape().back();
  const Tensor v = detail::cast(values, t).reshape({rows, m});
  const Tensor out = count_before(s, v, right).reshape(values.shape());
  return out_int32 ? detail::cast(out, DType::I32) : out;
}

Tensor searchsorted(const Tensor& sorted_sequence, const Scalar& value, bool out_int32, bool right,
                    std::optional<std::string> side, const Tensor& sorter) {
  detail::check_defined("searchsorted", sorted_sequence);
  ANVIL_CHECK(sorted_sequence.dim() == 1, ShapeError,
              "searchsorted: a scalar value needs a 1-D sorted_sequence; expected 1 dim, got ",
              sorted_sequence.shape());
  const Tensor v = scalar_tensor(value, sorted_sequence.device(), promote(sorted_sequence.dtype(), value));
  return searchsorted(sorted_sequence, v, out_int32, right, std::move(side), sorter);
}

UniqueResult unique(const Tensor& x, bool sorted, bool return_inverse, bool return_counts, std::optional<int> dim) {
  detail::check_defined("unique", x);
  (void)sorted;  // always sorted: PyTorch leaves the order unspecified otherwise
  const Device d = x.device();
  const int dd = dim ? detail::wrap_dim(*dim, x.dim(), "unique") : 0;
  NoGradGuard no_grad;
  ANVIL_PROFILE_OP("unique", &x);
  const std::int64_t n = dim ? x.size(dd) : x.numel();
  UniqueResult r;
  if (n == 0) {
    r.values = dim ? x.clone() : x.reshape({0}).clone();
    if (return_inverse) r.inverse_indices = zeros(dim ? Shape{0} : x.shape(), d, DType::I64);
    if (return_counts) r.counts = zeros({0}, d, DType::I64);
    return r;
  }
  ANVIL_CHECK(x.numel() > 0, ValueError, "unique: the slices along dim ", dd,
              " are empty; expected every other dim to be non-empty, got ", x.shape());
  // One row per thing compared: an element, or a slice along dim.
  const Tensor rows = dim ? x.transpose(dd, 0).contiguous().reshape({n, x.numel() / n}) : x.reshape({n, 1});
  const std::int64_t width = rows.size(1);
  // Lexicographic order by stable sorts from the last column to the first.
  Tensor perm = sort(rows.select(1, width - 1)).indices;
  for (std::int64_t c = width - 2; c >= 0; --c)
    perm = perm.index_select(0, sort(rows.select(1, c).index_select(0, perm)).indices);
  const Tensor ordered = rows.index_select(0, perm);
  // A group starts where a row differs from the one before it; NaN differs
  // from everything, itself included, so every NaN is a group of its own.
  Tensor starts = ones({1}, d, DType::Bool);
  if (n > 1) starts = cat({starts, gt(sum(ne(ordered.narrow(0, 1, n - 1), ordered.narrow(0, 0, n - 1)), 1), 0)}, 0);
  const Tensor group = cumsum(starts, 0) - 1;  // each sorted row's group
  const std::int64_t groups = group.select(0, n - 1).item<std::int64_t>() + 1;
  // The last sorted position of each group (index_copy: the last write wins).
  const Tensor last = index_copy(zeros({groups}, d, DType::I64), 0, group, arange(n, d, DType::I64));
  const Tensor counts = last - cat({full({1}, -1, d, DType::I64), last.narrow(0, 0, groups - 1)}, 0);
  const Tensor first = perm.index_select(0, last - counts + 1);
  r.values = dim ? x.index_select(dd, first) : x.reshape({n}).index_select(0, first);
  if (return_inverse) {
    const Tensor inverse = index_copy(zeros({n}, d, DType::I64), 0, perm, group);
    r.inverse_indices = dim ? inverse : inverse.reshape(x.shape());
  }
  if (return_counts) r.counts = counts;
  return r;
}

}  // namespace anvil
