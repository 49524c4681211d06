// The rest of the book's ops (issue 13) on every device: conv2d with groups
// and dilation, conv1d, adaptive_max_pool2d, repeat, baddbmm, cumsum,
// sort and topk. Each against a float64 plain-loop reference (PyTorch's
// definition written out), on contiguous, strided, zero-size and odd-size
// inputs, with its errors and a gradcheck. ctest runs this suite a second
// time with ANVIL_NO_FUSED=1, so conv2d's composite path is checked too.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "anvil/autograd.h"
#include "anvil/nn.h"
#include "device_test.h"
#include "host_values.h"

using namespace anvil;
using anvil::testing::host_f64;

namespace {

::testing::AssertionResult near_all(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << ", expected " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (!both_nan && got[i] != want[i] && !(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]))))
      return ::testing::AssertionFailure() << "at " << i << ": got " << got[i] << ", expected " << want[i];
  }
  return ::testing::AssertionSuccess();
}

struct ConvCase {
  std::int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool strided_input;
};

// torch.conv2d from its definition, in f64 on the host.
std::vector<double> conv2d_ref(const std::vector<double>& x, const std::vector<double>& wt,
                               const std::vector<double>& b, const ConvCase& k, std::int64_t oh, std::int64_t ow) {
  const std::int64_t cg = k.c / k.groups, og = k.o / k.groups;
  std::vector<double> out;
  for (std::int64_t n = 0; n < k.n; ++n)
    for (std::int64_t o = 0; o < k.o; ++o)
      for (std::int64_t p = 0; p < oh; ++p)
        for (std::int64_t q = 0; q < ow; ++q) {
          double acc = b.empty() ? 0.0 : b[static_cast<std::size_t>(o)];
          const std::int64_t g = o / og;
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t i = 0; i < k.kh; ++i)
              for (std::int64_t j = 0; j < k.kw; ++j) {
                const std::int64_t ih = p * k.sh - k.ph + i * k.dh, iw = q * k.sw - k.pw + j * k.dw;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                const std::int64_t c = g * cg + ci;
                acc += wt[static_cast<std::size_t>(((o * cg + ci) * k.kh + i) * k.kw + j)] *
                       x[static_cast<std::size_t>(((n * k.c + c) * k.h + ih) * k.w + iw)];
              }
          out.push_back(acc);
        }
  return out;
}

}  // namespace

class BookOps : public anvil::testing::DeviceTest {};

// --- conv2d: groups and dilation ---------------------------------------------------------

TEST_P(BookOps, Conv2dGroupsDilationMatchDefinition) {
  const Device d = device();
  const std::vector<ConvCase> cases = {
      {2, 4, 7, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, false},  // groups
      {2, 3, 9, 8, 4, 3, 2, 2, 1, 2, 1, 2, 3, 1, true},   // dilation, strided input
      {1, 6, 10, 7, 6, 3, 3, 1, 2, 2, 0, 2, 1, 6, true},  // depthwise, dilation
      {3, 4, 5, 5, 8, 1, 1, 1, 1, 0, 0, 1, 1, 4, false},  // grouped 1x1
      {1, 2, 5, 5, 2, 2, 2, 1, 1, 0, 0, 4, 4, 1, false},  // dilated kernel spans the input
      {0, 4, 5, 5, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, false},  // zero batch
  };
  for (DType t : {f32, f64}) {
    if (t == f64 && !properties(d).fp64) continue;
    for (const ConvCase& k : cases) {
      SCOPED_TRACE(::testing::Message() << "conv2d case c=" << k.c << " groups=" << k.groups << " dilation={" << k.dh
                                        << ", " << k.dw << "} dtype=" << t);
      manual_seed(11);
      const Tensor x =
          k.strided_input ? randn({k.n, k.c, k.w, k.h}, d, t).transpose(2, 3) : randn({k.n, k.c, k.h, k.w}, d, t);
      const Tensor wt = randn({k.o, k.c / k.groups, k.kh, k.kw}, d, t), b = randn({k.o}, d, t);
      const Tensor y = conv2d(x, wt, b, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
      const std::int64_t oh = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
      const std::int64_t ow = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
      ASSERT_EQ(y.shape(), Shape({k.n, k.o, oh, ow}));
      EXPECT_EQ(y.device(), d);
      EXPECT_TRUE(near_all(host_f64(y), conv2d_ref(host_f64(x), host_f64(wt), host_f64(b), k, oh, ow),
                           t == f32 ? 1e-4 : 1e-10));
      // Without bias.
      const Tensor y0 = conv2d(x, wt, {}, {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}, k.groups);
      EXPECT_TRUE(
          near_all(host_f64(y0), conv2d_ref(host_f64(x), host_f64(wt), {}, k, oh, ow), t == f32 ? 1e-4 : 1e-10));
    }
  }
}

// Integer-valued data (exact in f32): values[i] = i % mod - shift.
Tensor ramp(const Shape& shape, int mod, int shift, Device d) {
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i) % mod - shift);
  return tensor(v, shape, d);
}

// PyTorch 1.13's numbers, from:
//   x = torch.arange(2*4*6*5.).reshape(2,4,6,5) % 7 - 3
//   w = torch.arange(4*2*2*3.).reshape(4,2,2,3) % 5 - 2
//   torch.conv2d(x, w, torch.tensor([1.,-1,2,0]), stride=(2,1), padding=(1,2), dilation=(2,2), groups=2)
//   x1 = torch.arange(2*4*9.).reshape(2,4,9) % 5 - 2;  w1 = torch.arange(6*2*3.).reshape(6,2,3) % 3 - 1
//   torch.conv1d(x1, w1, None, stride=2, padding=3, dilation=2, groups=2)
TEST_P(BookOps, ConvMatchesPyTorch) {
  const Device d = device();
  const Tensor y = conv2d(ramp({2, 4, 6, 5}, 7, 3, d), ramp({4, 2, 2, 3}, 5, 2, d),
                          tensor({1.0f, -1.0f, 2.0f, 0.0f}, d), {2, 1}, {1, 2}, {2, 2}, 2);
  ASSERT_EQ(y.shape(), Shape({2, 4, 3, 5}));
  EXPECT_EQ(host_f64(y[1][3]), (std::vector<double>{-4, -8, -2, -8, 17, -4, 10, 6, -6, -9, -4, -4, -11, -1, -4}));
  EXPECT_EQ(host_f64(y[0][0]), (std::vector<double>{18, 15, -6, -4, -8, -8, -11, -3, -4, 23, -3, 22, 23, -7, -8}));
  const Tensor y1 = conv1d(ramp({2, 4, 9}, 5, 2, d), ramp({6, 2, 3}, 3, 1, d), {}, 2, 3, 2, 2);
  ASSERT_EQ(y1.shape(), Shape({2, 6, 6}));
  const std::vector<double> want1 = {-3, 1,  3,  -2, 0,  1,  -3, 1,  3,  -2, 0,  1,  -3, 1,  3,  -2, 0,  1,
                                     3,  -3, -2, 3,  -1, 0,  3,  -3, -2, 3,  -1, 0,  3,  -3, -2, 3,  -1, 0,
                                     -1, 3,  -2, -2, 3,  -1, -1, 3,  -2, -2, 3,  -1, -1, 3,  -2, -2, 3,  -1,
                                     0,  -1, 3,  -2, -3, 3,  0,  -1, 3,  -2, -3, 3,  0,  -1, 3,  -2, -3, 3};
  EXPECT_EQ(host_f64(y1), want1);
}

TEST_P(BookOps, Conv1dIsConv2dOverRows) {
  const Device d = device();
  manual_seed(5);
  const Tensor x = randn({2, 6, 11}, d), w = randn({4, 3, 3}, d), b = randn({4}, d);
  const Tensor y = conv1d(x, w, b, 2, 1, 2, 2);
  const Tensor want = conv2d(x.unsqueeze(2), w.unsqueeze(2), b, {1, 2}, {0, 1}, {1, 2}, 2).squeeze(2);
  ASSERT_EQ(y.shape(), Shape({2, 4, 5}));
  EXPECT_TRUE(allclose(y, want));
  // Strided (transposed) input.
  const Tensor xt = randn({2, 11, 6}, d).transpose(1, 2);
  EXPECT_TRUE(allclose(conv1d(xt, w, b, 1, 0, 1, 2), conv1d(xt.contiguous(), w, b, 1, 0, 1, 2), 1e-5, 1e-5));
}

TEST_P(BookOps, ConvErrorsNameTheOp) {
  const Device d = device();
  const Tensor x = randn({1, 4, 5, 5}, d);
  EXPECT_THROW(conv2d(x, randn({4, 4, 3, 3}, d), {}, {1, 1}, {0, 0}, {1, 1}, 2), ShapeError);  // C/groups = 2
  EXPECT_THROW(conv2d(x, randn({3, 2, 3, 3}, d), {}, {1, 1}, {0, 0}, {1, 1}, 2), ValueError);  // O % groups
  EXPECT_THROW(conv2d(x, randn({3, 4, 3, 3}, d), {}, {1, 1}, {0, 0}, {1, 1}, 3), ValueError);  // C % groups
  EXPECT_THROW(conv2d(x, randn({2, 4, 3, 3}, d), {}, {1, 1}, {0, 0}, {1, 1}, 0), ValueError);
  EXPECT_THROW(conv2d(x, randn({2, 4, 3, 3}, d), {}, {1, 1}, {0, 0}, {0, 1}), ValueError);
  EXPECT_THROW(conv2d(x, randn({2, 4, 3, 3}, d), {}, {1, 1}, {0, 0}, {3, 1}), ShapeError);  // 7 > 5
  EXPECT_THROW(conv1d(x, randn({2, 4, 3}, d)), ShapeError);
  EXPECT_THROW(conv1d(randn({1, 4, 5}, d), randn({2, 4, 3, 3}, d)), ShapeError);
  try {
    conv2d(x, randn({4, 4, 3, 3}, d), {}, {1, 1}, {0, 0}, {1, 1}, 2);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d: weight must be [O, C / groups, KH, KW]; expected C / groups = 2"),
              std::string::npos)
        << e.what();
  }
  try {
    conv2d(x, randn({2, 4, 3, 3}, d), {}, {1, 1}, {0, 0}, {3, 1});
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("got 7x3"), std::string::npos) << e.what();
  }
}

TEST_P(BookOps, ConvLayers) {
  const Device d = device();
  manual_seed(1);
  nn::Conv2d grouped(4, 6, 3, 1, 2, 2, 2);
  EXPECT_EQ(grouped.parameters()[0].shape(), Shape({6, 2, 3, 3}));
  EXPECT_EQ(grouped.name(),
            "Conv2d(4, 6, kernel_size=(3, 3), stride=(1, 1), padding=(2, 2), dilation=(2, 2), groups=2, bias=true)");
  nn::Conv2d no_bias(4, 6, 3, 1, 1, false);  // the pre-dilation form: bool is bias
  EXPECT_EQ(no_bias.parameters().size(), 1u);
  nn::Conv2d plain(4, 6, 3, 1, 1);
  EXPECT_EQ(plain.name(), "Conv2d(4, 6, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=true)");
  // PyTorch's bound: 1 / sqrt(in / groups * k * k).
  const double bound = 1.0 / std::sqrt(2.0 * 9.0);
  for (double v : host_f64(grouped.parameters()[0])) EXPECT_LE(std::abs(v), bound);
  grouped.to(d);
  const Tensor x = randn({2, 4, 8, 8}, d);
  EXPECT_EQ(grouped.forward(x).shape(), Shape({2, 6, 8, 8}));

  nn::Conv1d c1(4, 2, 3, 2, 1, 1, 2, false);
  EXPECT_EQ(c1.parameters().size(), 1u);
  EXPECT_EQ(c1.parameters()[0].shape(), Shape({2, 2, 3}));
  EXPECT_EQ(c1.name(), "Conv1d(4, 2, kernel_size=(3,), stride=(2,), padding=(1,), groups=2, bias=false)");
  c1.to(d);
  EXPECT_EQ(c1.forward(randn({3, 4, 9}, d)).shape(), Shape({3, 2, 5}));
  EXPECT_THROW(nn::Conv2d(4, 6, 3, 1, 0, 1, 4), ValueError);
  EXPECT_THROW(nn::Conv1d(3, 6, 3, 1, 0, 0), ValueError);
}

// --- adaptive_max_pool2d -------------------------------------------------------------------
namespace {
// PyTorch's adaptive max pooling from its definition: x is [planes, h, w].
std::vector<double> adaptive_max_ref(const std::vector<double>& x, std::int64_t planes, std::int64_t h, std::int64_t w,
                                     std::int64_t oh, std::int64_t ow) {
  std::vector<double> out;
  auto lo = [](std::int64_t i, std::int64_t in, std::int64_t o) { return (i * in) / o; };
  auto hi = [](std::int64_t i, std::int64_t in, std::int64_t o) { return ((i + 1) * in + o - 1) / o; };
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity();
        for (std::int64_t r = lo(i, h, oh); r < hi(i, h, oh); ++r)
          for (std::int64_t c = lo(j, w, ow); c < hi(j, w, ow); ++c) {
            const double v = x[static_cast<std::size_t>((p * h + r) * w + c)];
            if (std::isnan(v) || v > best || std::isnan(best)) best = std::isnan(best) ? best : v;
          }
        out.push_back(best);
      }
  return out;
}
}  // namespace

TEST_P(BookOps, AdaptiveMaxPool2dMatchesDefinition) {
  const Device d = device();
  struct Case {
    Shape in;
    std::array<std::int64_t, 2> out;
    bool transposed;
  };
  const std::vector<Case> cases = {
      {{2, 3, 8, 6}, {4, 3}, false},  // divisible: a regular pool
      {{2, 3, 7, 5}, {3, 2}, false},  // overlapping bins of unequal size
      {{1, 2, 5, 9}, {4, 4}, true},   // strided input
      {{3, 3, 5}, {5, 7}, false},     // [C, H, W], output larger than the input
      {{1, 1, 4, 4}, {1, 1}, false},  // global
      {{0, 2, 5, 5}, {2, 2}, false},  // zero batch
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "adaptive_max_pool2d " << c.in << " -> {" << c.out[0] << ", " << c.out[1]
                                      << "}");
    manual_seed(2);
    Shape stored = c.in;
    if (c.transposed) std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
    Tensor x = randn(stored, d);
    if (c.transposed) x = x.transpose(-2, -1);
    const Tensor y = adaptive_max_pool2d(x, c.out);
    Shape want_shape = c.in;
    want_shape[want_shape.size() - 2] = c.out[0];
    want_shape[want_shape.size() - 1] = c.out[1];
    ASSERT_EQ(y.shape(), want_shape);
    const std::int64_t h = c.in[c.in.size() - 2], w = c.in[c.in.size() - 1];
    EXPECT_TRUE(
        near_all(host_f64(y), adaptive_max_ref(host_f64(x), x.numel() / (h * w), h, w, c.out[0], c.out[1]), 0.0));
  }
  // NaN wins its bins, as in PyTorch: adaptive_max_pool2d of
  // [[1, nan, 3], [4, 5, 6], [7, 8, 9]] to 2x2 is [[nan, nan], [8, 9]].
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor y = adaptive_max_pool2d(tensor(std::vector<float>{1, nan, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3}, d), {2, 2});
  EXPECT_TRUE(near_all(host_f64(y), {std::nan(""), std::nan(""), 8, 9}, 0.0));
}

TEST_P(BookOps, AdaptiveMaxPool2dErrorsAndLayer) {
  const Device d = device();
  EXPECT_THROW(adaptive_max_pool2d(randn({4, 5}, d), {1, 1}), ShapeError);
  EXPECT_THROW(adaptive_max_pool2d(ones({1, 2, 3, 4}, d, i64), {1, 1}), DTypeError);
  EXPECT_THROW(adaptive_max_pool2d(randn({1, 2, 3, 4}, d), {0, 1}), ValueError);
  EXPECT_THROW(adaptive_max_pool2d(randn({1, 2, 0, 4}, d), {1, 1}), ShapeError);
  try {
    adaptive_max_pool2d(randn({4, 5}, d), {1, 1});
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("adaptive_max_pool2d: input must be [N, C, H, W] or [C, H, W]"),
              std::string::npos)
        << e.what();
  }
  nn::AdaptiveMaxPool2d pool({2, 3});
  EXPECT_EQ(pool.name(), "AdaptiveMaxPool2d(output_size=(2, 3))");
  const Tensor x = randn({2, 4, 7, 7}, d);
  EXPECT_TRUE(equal(pool.forward(x), adaptive_max_pool2d(x, {2, 3})));
  EXPECT_EQ(nn::AdaptiveMaxPool2d(1).forward(x).shape(), Shape({2, 4, 1, 1}));
  EXPECT_THROW(nn::AdaptiveMaxPool2d({1, 0}), ValueError);
}

// --- repeat and baddbmm -------------------------------------------------------------------
TEST_P(BookOps, RepeatTiles) {
  const Device d = device();
  const Tensor x = tensor({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}, d);
  const Tensor r = x.repeat({2, 1, 2});
  ASSERT_EQ(r.shape(), Shape({2, 2, 6}));
  const std::vector<double> plane = {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6};
  std::vector<double> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  EXPECT_EQ(host_f64(r), want);
  // Strided input, odd sizes, against the definition r[i][j] = x[i % 3][j % 2].
  const Tensor xt = arange(0, 6, 1, d, i64).reshape({2, 3}).t();  // [3, 2]
  const Tensor rt = repeat(xt, {3, 5});
  ASSERT_EQ(rt.shape(), Shape({9, 10}));
  EXPECT_EQ(rt.dtype(), i64);
  const std::vector<double> got = host_f64(rt);
  for (std::int64_t i = 0; i < 9; ++i)
    for (std::int64_t j = 0; j < 10; ++j)
      EXPECT_EQ(got[static_cast<std::size_t>(i * 10 + j)], static_cast<double>((j % 2) * 3 + i % 3));
  // A copy even when nothing repeats; zero sizes; a 0-dim tensor.
  Tensor same = x.repeat({1, 1});
  EXPECT_TRUE(equal(same, x));
  same.fill_(0.0);
  EXPECT_EQ(x.sum().item<float>(), 21.0f);
  EXPECT_EQ(x.repeat({0, 2}).shape(), Shape({0, 6}));
  EXPECT_EQ(full({}, 5.0, d).repeat({3}).shape(), Shape({3}));
  EXPECT_THROW(x.repeat({2}), ShapeError);
  EXPECT_THROW(x.repeat({-1, 2}), ShapeError);
  try {
    x.repeat({2});
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("repeat: fewer repeat sizes than tensor dims; expected at least 2"),
              std::string::npos)
        << e.what();
  }
}

TEST_P(BookOps, BaddbmmMatchesDefinition) {
  const Device d = device();
  manual_seed(4);
  const Tensor b1 = randn({3, 2, 5}, d), b2 = randn({3, 5, 4}, d).transpose(1, 2).contiguous().transpose(1, 2);
  const Tensor input = randn({2, 1}, d);  // broadcast to [3, 2, 4]
  const Tensor y = baddbmm(input, b1, b2, 0.5, -2.0);
  ASSERT_EQ(y.shape(), Shape({3, 2, 4}));
  const std::vector<double> a = host_f64(b1), b = host_f64(b2), in = host_f64(input), got = host_f64(y);
  for (std::int64_t k = 0; k < 3; ++k)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 4; ++j) {
        double acc = 0;
        for (std::int64_t m = 0; m < 5; ++m)
          acc += a[static_cast<std::size_t>((k * 2 + i) * 5 + m)] * b[static_cast<std::size_t>((k * 5 + m) * 4 + j)];
        EXPECT_NEAR(got[static_cast<std::size_t>((k * 2 + i) * 4 + j)],
                    0.5 * in[static_cast<std::size_t>(i)] - 2.0 * acc, 1e-4);
      }
  EXPECT_TRUE(allclose(input.baddbmm(b1, b2), input + bmm(b1, b2), 1e-5, 1e-5));
  // beta = 0 ignores input, NaN included (PyTorch).
  const Tensor nan_input = full({3, 2, 4}, std::nan(""), d);
  EXPECT_TRUE(allclose(baddbmm(nan_input, b1, b2, 0.0), bmm(b1, b2)));
  // Empty batch and empty inner dimension.
  EXPECT_EQ(baddbmm(zeros({0, 2, 4}, d), zeros({0, 2, 5}, d), zeros({0, 5, 4}, d)).shape(), Shape({0, 2, 4}));
  EXPECT_TRUE(equal(baddbmm(ones({3, 2, 4}, d), zeros({3, 2, 0}, d), zeros({3, 0, 4}, d)), ones({3, 2, 4}, d)));
  EXPECT_THROW(baddbmm(input, randn({2, 5}, d), b2), ShapeError);
  EXPECT_THROW(baddbmm(input, randn({3, 2, 4}, d), b2), ShapeError);
  EXPECT_THROW(baddbmm(zeros({2, 3, 2, 4}, d), b1, b2), ShapeError);
  EXPECT_THROW(baddbmm(input.to(f64), b1, b2), DTypeError);
}

// --- cumsum --------------------------------------------------------------------------------
namespace {
// Running sum along `dim` of a row-major [shape] array, in f64.
std::vector<double> cumsum_ref(const std::vector<double>& x, const Shape& shape, int dim) {
  std::int64_t inner = 1;
  for (int i = dim + 1; i < shape.size(); ++i) inner *= shape[i];
  // An empty shape has no rows (and len * inner may be 0: [3, 0] along dim 0).
  const std::int64_t len = shape[dim],
                     outer = len * inner == 0 ? 0 : static_cast<std::int64_t>(x.size()) / (len * inner);
  std::vector<double> out(x.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t in = 0; in < inner; ++in) {
      double acc = 0;
      for (std::int64_t i = 0; i < len; ++i) {
        const auto at = static_cast<std::size_t>((o * len + i) * inner + in);
        acc += x[at];
        out[at] = acc;
      }
    }
  return out;
}
}  // namespace

TEST_P(BookOps, CumsumMatchesDefinition) {
  const Device d = device();
  manual_seed(9);
  for (DType t : {f32, f64}) {
    if (t == f64 && !properties(d).fp64) continue;
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{2, 3, 4}, Shape{0, 3}, Shape{3, 0}, Shape{1, 1000}})
      for (int dim = 0; dim < shape.size(); ++dim) {
        SCOPED_TRACE(::testing::Message() << "cumsum " << shape << " dim " << dim << " " << t);
        const Tensor x = randn(shape, d, t);
        const Tensor y = cumsum(x, dim);
        ASSERT_EQ(y.shape(), shape);
        EXPECT_EQ(y.dtype(), t);
        EXPECT_TRUE(near_all(host_f64(y), cumsum_ref(host_f64(x), shape, dim), t == f32 ? 1e-5 : 1e-12));
        EXPECT_TRUE(equal(x.cumsum(dim - shape.size()), y));  // negative dim, the method
      }
  }
  // f16 and bf16 accumulate in f32 and round once: within one rounding of
  // the exact running sum of the (rounded) inputs.
  for (DType t : {f16, bf16}) {
    SCOPED_TRACE(::testing::Message() << "cumsum " << t);
    const Tensor x = randn({3, 50}, d).to(t);
    const Tensor y = cumsum(x, 1);
    EXPECT_EQ(y.dtype(), t);
    EXPECT_TRUE(near_all(host_f64(y), cumsum_ref(host_f64(x), {3, 50}, 1), t == f16 ? 2e-3 : 1.6e-2));
  }
  // A strided input.
  const Tensor base = randn({5, 4}, d);
  EXPECT_TRUE(allclose(cumsum(base.t(), 1), cumsum(base.t().contiguous(), 1)));
  // Integers and bool sum in i64; NaN and inf propagate.
  const Tensor flags = tensor(std::vector<std::uint8_t>{1, 0, 1}, {3}, d, DType::Bool);
  EXPECT_TRUE(equal(cumsum(flags, 0), tensor(std::vector<std::int64_t>{1, 1, 2}, {3}, d)));
  const Tensor ints = tensor(std::vector<std::int32_t>{2000000000, 2000000000}, {2}, d);
  EXPECT_TRUE(equal(cumsum(ints, 0), tensor(std::vector<std::int64_t>{2000000000, 4000000000}, {2}, d)));
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(near_all(host_f64(cumsum(tensor(std::vector<float>{1, 2, NAN, 3}, {4}, d), 0)), {1, 3, NAN, NAN}, 0));
  EXPECT_TRUE(
      near_all(host_f64(cumsum(tensor(std::vector<float>{1, INFINITY, -INFINITY}, {3}, d), 0)), {1, inf, NAN}, 0));
  // A 0-dim tensor is its own running sum.
  EXPECT_EQ(cumsum(full({}, 2.5, d), 0).item<float>(), 2.5f);
  EXPECT_THROW(cumsum(randn({2, 3}, d), 2), IndexError);
  EXPECT_THROW(cumsum(Tensor{}, 0), ValueError);
}

// --- sort and topk -------------------------------------------------------------------------
// PyTorch 1.13, torch.sort(x, dim=1, descending=..., stable=True) and
// torch.topk of
//   x = [[3, nan, -1, 3, 0, -0, 2, nan, -1], [1, 1, 1, -2, 5, 5, nan, -7, 1]]
TEST_P(BookOps, SortMatchesPyTorch) {
  const Device d = device();
  const std::vector<float> xs = {3, NAN, -1, 3, 0, -0.0f, 2, NAN, -1, 1, 1, 1, -2, 5, 5, NAN, -7, 1};
  for (DType t : {f32, f64, f16, bf16}) {
    SCOPED_TRACE(::testing::Message() << "sort " << t);
    if (t == f64 && !properties(d).fp64) continue;
    const Tensor x = tensor(xs, {2, 9}, d).to(t);
    auto [v, i] = sort(x, 1);
    EXPECT_TRUE(near_all(host_f64(v), {-1, -1, 0, -0.0, 2, 3, 3, NAN, NAN, -7, -2, 1, 1, 1, 1, 5, 5, NAN}, 0));
    EXPECT_EQ(host_f64(i), (std::vector<double>{2, 8, 4, 5, 6, 0, 3, 1, 7, 7, 3, 0, 1, 2, 8, 4, 5, 6}));
    EXPECT_EQ(i.dtype(), i64);
    auto [vd, id] = x.sort(-1, true);
    EXPECT_TRUE(near_all(host_f64(vd), {NAN, NAN, 3, 3, 2, 0, -0.0, -1, -1, NAN, 5, 5, 1, 1, 1, 1, -2, -7}, 0));
    EXPECT_EQ(host_f64(id), (std::vector<double>{1, 7, 0, 3, 6, 4, 5, 2, 8, 6, 4, 5, 0, 1, 2, 8, 3, 7}));
    // Along dim 0 of the transpose: the same, transposed.
    auto [vt, it] = sort(x.t(), 0);
    EXPECT_TRUE(equal(it, i.t()));
    // topk: PyTorch's values; its order among equal values is unspecified,
    // ours is the stable sort's.
    auto [tv, ti] = topk(x, 4);
    EXPECT_TRUE(near_all(host_f64(tv), {NAN, NAN, 3, 3, NAN, 5, 5, 1}, 0));
    EXPECT_EQ(host_f64(ti), (std::vector<double>{1, 7, 0, 3, 6, 4, 5, 0}));
    auto [sv, si] = x.topk(3, 1, false);
    EXPECT_TRUE(near_all(host_f64(sv), {-1, -1, 0, -7, -2, 1}, 0));
    EXPECT_EQ(host_f64(si), (std::vector<double>{2, 8, 4, 7, 3, 0}));
  }
}

TEST_P(BookOps, SortEveryDtypeAndShape) {
  const Device d = device();
  manual_seed(12);
  // Integers with many ties: stable order against std::stable_sort.
  for (DType t : {i64, i32, u8}) {
    const Tensor x = randint(0, 5, {3, 37}, d, t);
    for (bool desc : {false, true}) {
      auto [v, i] = sort(x, 1, desc);
      const std::vector<double> xs = host_f64(x), vs = host_f64(v), is = host_f64(i);
      for (std::int64_t r = 0; r < 3; ++r) {
        std::vector<std::int64_t> order(37);
        for (std::int64_t k = 0; k < 37; ++k) order[static_cast<std::size_t>(k)] = k;
        auto row = [&](std::int64_t k) { return xs[static_cast<std::size_t>(r * 37 + k)]; };
        std::stable_sort(order.begin(), order.end(),
                         [&](std::int64_t a, std::int64_t b) { return desc ? row(a) > row(b) : row(a) < row(b); });
        for (std::int64_t k = 0; k < 37; ++k) {
          ASSERT_EQ(is[static_cast<std::size_t>(r * 37 + k)], static_cast<double>(order[static_cast<std::size_t>(k)]))
              << t << " desc " << desc << " row " << r << " at " << k;
          ASSERT_EQ(vs[static_cast<std::size_t>(r * 37 + k)], row(order[static_cast<std::size_t>(k)]));
        }
      }
      EXPECT_EQ(v.dtype(), t);
    }
  }
  // bool: PyTorch gives [False, False, True, True] at [1, 3, 0, 2].
  auto [bv, bi] = sort(tensor(std::vector<std::uint8_t>{1, 0, 1, 0}, {4}, d, DType::Bool));
  EXPECT_EQ(host_f64(bi), (std::vector<double>{1, 3, 0, 2}));
  EXPECT_EQ(host_f64(bv), (std::vector<double>{0, 0, 1, 1}));
  // A long row (past one work-group), 3-D along the middle dim, zero-size.
  const Tensor big = randn({2, 1500, 3}, d);
  auto [bgv, bgi] = sort(big, 1);
  const std::vector<double> b = host_f64(bgv);
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t k = 1; k < 1500; ++k)
        ASSERT_LE(b[static_cast<std::size_t>((n * 1500 + k - 1) * 3 + c)],
                  b[static_cast<std::size_t>((n * 1500 + k) * 3 + c)]);
  EXPECT_TRUE(equal(gather(big, 1, bgi), bgv));
  EXPECT_EQ(sort(randn({0, 4}, d), 1).values.shape(), Shape({0, 4}));
  EXPECT_EQ(sort(randn({4, 0}, d), 1).indices.shape(), Shape({4, 0}));
  EXPECT_EQ(topk(randn({4, 5}, d), 0).values.shape(), Shape({4, 0}));
  auto [sv, si] = sort(full({}, 5.0, d));
  EXPECT_EQ(sv.item<float>(), 5.0f);
  EXPECT_EQ(si.item<std::int64_t>(), 0);
  EXPECT_THROW(topk(randn({4, 5}, d), 6), ValueError);
  EXPECT_THROW(topk(randn({4, 5}, d), -1), ValueError);
  EXPECT_THROW(sort(randn({4, 5}, d), 2), IndexError);
  try {
    topk(randn({4, 5}, d), 6);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("topk: k is out of range for dim 1; expected 0 <= k <= 5, got 6"),
              std::string::npos)
        << e.what();
  }
}

// --- gradcheck of every new op --------------------------------------------------------
namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
struct GradCase {
  std::string name;
  std::vector<Shape> shapes;
  Fn fn;
};
std::vector<GradCase> grad_cases() {
  using V = const std::vector<Tensor>&;
  return {
      {"conv2d_groups_dilation",
       {{2, 4, 6, 7}, {6, 2, 2, 3}, {6}},
       [](V x) {
         return conv2d(x[0], x[1], x[2], {2, 1}, {1, 2}, {2, 2}, 2);
       }},
      {"conv2d_depthwise_strided_input",
       {{1, 3, 7, 6}, {3, 1, 3, 2}},
       [](V x) {
         return conv2d(x[0].transpose(2, 3), x[1], {}, {1, 2}, {2, 1}, {1, 2}, 3);
       }},
      {"conv1d", {{2, 4, 9}, {2, 2, 3}, {2}}, [](V x) { return conv1d(x[0], x[1], x[2], 2, 1, 2, 2); }},
      {"adaptive_max_pool2d_bins",
       {{2, 2, 7, 5}},
       [](V x) {
         return adaptive_max_pool2d(x[0], {3, 2});
       }},
      {"adaptive_max_pool2d_divisible",
       {{1, 2, 6, 4}},
       [](V x) {
         return adaptive_max_pool2d(x[0], {3, 2});
       }},
      {"repeat",
       {{2, 3}},
       [](V x) {
         return x[0].t().repeat({2, 1, 3}) * x[0].sum();
       }},
      {"cumsum", {{3, 4}}, [](V x) { return cumsum(x[0], 1) * cumsum(x[0].t(), 1).t() + x[0].cumsum(0); }},
      {"sort", {{3, 5}}, [](V x) { return sort(x[0], 1).values * 2.0 + x[0].sort(0, true).values; }},
      {"topk", {{4, 6}}, [](V x) { return topk(x[0], 3).values + x[0].topk(2, 0, false).values.sum(); }},
      {"baddbmm",
       {{2, 1}, {3, 2, 4}, {3, 4, 5}},
       [](V x) { return baddbmm(x[0], x[1], x[2].transpose(1, 2).contiguous().transpose(1, 2), 0.5, 3.0); }},
  };
}
}  // namespace

TEST_P(BookOps, Gradcheck) {
  const Device d = device();
  if (!properties(d).fp64) GTEST_SKIP() << d << " has no f64; gradcheck needs float64";
  for (const GradCase& c : grad_cases()) {
    SCOPED_TRACE(c.name);
    manual_seed(7);
    std::vector<Tensor> inputs;
    for (const Shape& s : c.shapes) inputs.push_back(randn(s, d, f64).requires_grad_());
    const auto r = autograd::gradcheck(c.fn, inputs);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(BookOps);
