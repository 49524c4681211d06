// HistogramProto in TensorFlow's default buckets (tensorflow/core/lib/histogram/histogram.cc,
// which torch.utils.tensorboard's default bins="tensorflow" copies).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "anvil/error.h"
#include "anvil/tensorboard.h"

namespace anvil::tensorboard {

namespace {

// -DBL_MAX, ..., -1e-12, 0, 1e-12, 1.1e-12, ..., (< 1e20), DBL_MAX.
const std::vector<double>& default_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> pos;
    for (double v = 1e-12; v < 1e20; v *= 1.1) pos.push_back(v);
    pos.push_back(DBL_MAX);
    std::vector<double> all;
    all.reserve(2 * pos.size() + 1);
    for (auto it = pos.rbegin(); it != pos.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  }();
  return limits;
}

}  // namespace

Histogram histogram(std::span<const double> values) {
  ANVIL_CHECK(!values.empty(), ValueError, "histogram: expected at least one value, got none");
  const std::vector<double>& limits = default_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = values[0];
  h.max = values[0];
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    ANVIL_CHECK(std::isfinite(v), ValueError, "histogram: expected finite values; element ", i, " is ", v);
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.sum += v;
    h.sum_squares += v * v;
    // Bucket b holds [limits[b-1], limits[b]); DBL_MAX itself goes in the last.
    const auto b = static_cast<std::size_t>(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
    counts[std::min(b, limits.size() - 1)] += 1;
  }
  h.num = static_cast<double>(values.size());
  std::size_t first = 0, last = counts.size() - 1;
  while (counts[first] == 0) ++first;
  while (counts[last] == 0) --last;
  for (std::size_t b = first; b <= last; ++b) {
    if (counts[b] == 0 && !h.bucket.empty() && h.bucket.back() == 0) {
      h.bucket_limit.back() = limits[b];  // one bucket for a run of empty ones
      continue;
    }
    h.bucket_limit.push_back(limits[b]);
    h.bucket.push_back(counts[b]);
  }
  return h;
}

}  // namespace anvil::tensorboard
