// The OpenCL fused window kernels (im2col, col2im, max_pool2d and its
// backward) give what the CPU backend gives, forward and backward, on
// strided inputs, with padding, overlapping windows and ties.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "anvil/anvil.h"
#include "anvil/autograd.h"
#include "opencl_test_support.h"

namespace {

using namespace anvil;
using anvil::testing::opencl_count;

struct Grads {
  Tensor y, gx, gw;
};

// conv2d (on a transposed, so strided, input) then max_pool2d, summed with
// random weights; the output and the gradients, all on the host.
Grads run(Device d, const Tensor& x0, const Tensor& w0, const Tensor& mix) {
  Tensor x = x0.copy_to(d).requires_grad_();  // fresh leaves: x0, w0 stay plain
  Tensor w = w0.copy_to(d).requires_grad_();
  Tensor c = conv2d(x.transpose(2, 3), w, {}, {2, 1}, {1, 2});
  Tensor p = max_pool2d(c, {3, 3}, {1, 2}, {1, 1});
  Tensor loss = (p * mix.to(d)).sum();
  loss.backward();
  return {p.cpu(), x.grad().cpu(), w.grad().cpu()};
}

TEST(OpenCLWindow, ConvAndPoolMatchTheCpuForwardAndBackward) {
  ANVIL_REQUIRE_OPENCL(1);
  for (DType t : {f32, f64}) {
    manual_seed(11);
    const Tensor x = randn({2, 3, 8, 9}, cpu(), t);
    const Tensor w = randn({4, 3, 3, 2}, cpu(), t);
    const Tensor mix = randn(run(cpu(), x, w, ones({1}, cpu(), t)).y.shape(), cpu(), t);
    const Grads ref = run(cpu(), x, w, mix);
    for (int i = 0; i < std::min(opencl_count(), 2); ++i) {
      const Device d(DeviceType::OpenCL, i);
      if (t == f64 && !properties(d).fp64) continue;
      SCOPED_TRACE(std::string(to_string(t)) + " on " + d.str());
      const Grads got = run(d, x, w, mix);
      const double tol = t == f32 ? 1e-4 : 1e-10;
      EXPECT_TRUE(allclose(got.y, ref.y, tol, tol));
      EXPECT_TRUE(allclose(got.gx, ref.gx, tol, tol));
      EXPECT_TRUE(allclose(got.gw, ref.gw, tol, tol));
    }
  }
}

TEST(OpenCLWindow, PoolTiesPickTheFirstMaximumAndPaddingNeverWins) {
  ANVIL_REQUIRE_OPENCL(1);
  const Device d(DeviceType::OpenCL, 0);
  // All -5: padding (-inf) must not win, ties go to the first element.
  const Tensor x = full({1, 1, 4, 4}, -5.0, cpu());
  Tensor xd = x.to(d).requires_grad_();
  Tensor xc = x.clone().requires_grad_();
  Tensor pd = max_pool2d(xd, {3, 3}, {2, 2}, {1, 1});
  Tensor pc = max_pool2d(xc, {3, 3}, {2, 2}, {1, 1});
  EXPECT_TRUE(equal(pd.cpu(), pc));
  pd.sum().backward();
  pc.sum().backward();
  EXPECT_TRUE(equal(xd.grad().cpu(), xc.grad()));
}

}  // namespace
