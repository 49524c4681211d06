// softmax and log_softmax by the fused kernel (Note [Fused softmax] in
// core/backend.h) on every device: values and gradients against the
// composite of primitives (ANVIL_NO_FUSED=1) for each floating dtype and
// for rows short and long, non-contiguous and empty; PyTorch's special
// values; one launch each way; PyTorch's node names.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "anvil/anvil.h"
#include "core/backend.h"
#include "device_test.h"
#include "env_guard.h"

namespace {

using namespace anvil;
using anvil::testing::EnvGuard;

class Softmax : public anvil::testing::DeviceTest {};

std::vector<DType> dtypes(Device d) {
  std::vector<DType> out{f32, f16, bf16};
  if (properties(d).fp64) out.push_back(f64);
  return out;
}

// The composite rounds after every op; the kernel once, from f32 for the
// 16-bit floats.
double tolerance(DType t) {
  if (t == f64) return 1e-12;
  if (t == f32) return 2e-6;
  return t == f16 ? 4e-3 : 3e-2;
}

Tensor apply(const Tensor& x, bool log) { return log ? log_softmax(x, -1) : softmax(x, -1); }

struct Result {
  Tensor y, grad;
};

// y and x's gradient for sum(y * w), by the fused kernels or, with
// `composite`, by the primitives.
Result run(const Tensor& x0, const Tensor& w, bool log, bool composite) {
  EnvGuard env("ANVIL_NO_FUSED", composite ? "1" : nullptr);
  Tensor x = x0.detach().requires_grad_();
  const Tensor y = apply(x, log);
  sum(y * w).backward();
  return {y.detach().cpu().to(f64), x.grad().cpu().to(f64)};
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const char* what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  if (got.numel() == 0) return;
  const double err = (got - want).abs().max().item<double>();
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LE(err, tol * scale) << what;
}

TEST_P(Softmax, TheDeviceHasTheKernels) {
  const Device d = device();
  for (DType t : dtypes(d))
    for (detail::FusedOp op : {detail::FusedOp::Softmax, detail::FusedOp::SoftmaxBackward})
      EXPECT_TRUE(detail::backend_for(d.type())->supports_fused(op, t, d.index())) << d << " " << to_string(t);
}

TEST_P(Softmax, ValuesAndGradientsEqualTheComposite) {
  const Device d = device();
  manual_seed(5);
  // A classifier's rows, attention's, one long row (several vector widths
  // and a tail), a row of one, and empty tensors.
  for (const Shape& s : {Shape{7, 10}, Shape{2, 3, 4, 9}, Shape{3, 1000}, Shape{5, 1}, Shape{0, 4}, Shape{3, 0}})
    for (DType t : dtypes(d))
      for (bool log : {false, true}) {
        SCOPED_TRACE(::testing::Message() << s << " " << to_string(t) << (log ? " log_softmax" : " softmax"));
        const Tensor x = (randn(s, d) * 3).to(t), w = randn(s, d).to(t);
        const Result fused = run(x, w, log, false), composite = run(x, w, log, true);
        expect_close(fused.y, composite.y, tolerance(t), "output");
        expect_close(fused.grad, composite.grad, 4 * tolerance(t), "gradient");
      }
}

TEST_P(Softmax, NonContiguousRowsAndOtherDims) {
  const Device d = device();
  manual_seed(6);
  const Tensor x = randn({9, 6}, d);
  const Tensor xt = x.t();  // its last dim is strided
  ASSERT_FALSE(xt.is_contiguous());
  const Tensor want = softmax(xt.contiguous(), -1);
  EXPECT_TRUE(allclose(softmax(xt, 1), want, 1e-6, 1e-6));
  // A dim other than the last runs the composite: the same values.
  EXPECT_TRUE(allclose(softmax(x, 0), want.t(), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(log_softmax(x, 0), log_softmax(xt, 1).t(), 1e-6, 1e-6));
}

TEST_P(Softmax, SpecialValuesAsPyTorch) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  // torch 1.13: softmax / log_softmax of each row (NaN spreads over its row).
  const std::vector<double> rows = {inf, 1, -inf, -inf, inf, inf, -inf, 1, nan, 1};
  const Tensor x = tensor<double>(rows, {5, 2}, device(), f32);
  const std::vector<double> y = softmax(x, -1).to(f64).to_vector<double>();
  const std::vector<double> ly = log_softmax(x, -1).to(f64).to_vector<double>();
  for (int i : {0, 1, 2, 3, 4, 5, 8, 9}) {
    EXPECT_TRUE(std::isnan(y[i])) << i;
    EXPECT_TRUE(std::isnan(ly[i])) << i;
  }
  EXPECT_EQ(y[6], 0.0);
  EXPECT_EQ(y[7], 1.0);
  EXPECT_EQ(ly[6], -inf);
  EXPECT_EQ(ly[7], 0.0);
}

TEST_P(Softmax, OneLaunchEachWay) {
  const Device d = device();
  Tensor x = randn({64, 10}, d).requires_grad_();
  const Tensor w = randn({64, 10}, d);
  for (bool log : {false, true}) {
    (void)apply(x, log);  // kernels compiled, outside the count
    synchronize(d);
    Ledger forward;
    const Tensor y = apply(x, log);
    synchronize(d);
    EXPECT_EQ(forward.report().device_work(d).launches, 1u) << forward.report();
    Ledger backward;
    y.backward(w);
    synchronize(d);
    // The backward kernel, and the leaf's gradient accumulated on the second pass.
    EXPECT_LE(backward.report().device_work(d).launches, 2u) << backward.report();
  }
}

TEST_P(Softmax, RecordsPyTorchsNodes) {
  const Tensor x = ones({2, 3}, device()).requires_grad_();
  EXPECT_EQ(softmax(x, -1).grad_fn_name(), "SoftmaxBackward");
  EXPECT_EQ(log_softmax(x, 1).grad_fn_name(), "LogSoftmaxBackward");
}

// Note [Softmax over short rows] (cpu_norm.cpp): the CPU's forward over
// rows shorter than 32 works across rows, and must give each row the bits
// of the row-by-row path. Padding a row with -inf columns to 40 elements
// sends it down the row-by-row path and adds only zeros to its sum, so the
// first columns must be equal bit for bit; likewise for each dtype and for
// row counts around the 16-row blocks.
TEST(SoftmaxCpu, ShortRowsHaveTheBitsOfTheRowByRowPath) {
  manual_seed(8);
  constexpr std::int64_t kPadded = 40;
  for (DType t : {f32, f64, bf16, f16})
    for (std::int64_t rows : {1, 15, 16, 17, 37})
      for (std::int64_t len : {1, 7, 10, 17, 28, 31}) {
        SCOPED_TRACE(::testing::Message() << to_string(t) << " [" << rows << ", " << len << "]");
        const Tensor x = (randn({rows, len}) * 4).to(t);
        const Tensor padded =
            cat({x, full({rows, kPadded - len}, -std::numeric_limits<double>::infinity(), cpu(), t)}, 1);
        for (bool log : {false, true}) {
          const Tensor want = apply(padded, log).narrow(1, 0, len).contiguous();
          EXPECT_TRUE(equal(apply(x, log), want)) << (log ? "log_softmax" : "softmax");
        }
      }
}

}  // namespace

ANVIL_INSTANTIATE_DEVICE_TEST(Softmax);
