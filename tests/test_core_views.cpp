// Views and movement (DESIGN §4.3) on every device: reshape view transpose
// permute t slice narrow select expand squeeze unsqueeze flatten contiguous
// clone; views share storage and writes through them reach the base.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;
using ref::Domain;
using ref::Layout;

class Views : public anvil::testing::DeviceTest {
 protected:
  // 0, 1, 2, … in f32, as a reference array too.
  ref::Input iota(const ref::Dims& shape) {
    ref::Array a = ref::Array::filled(shape, 0);
    for (std::size_t i = 0; i < a.v.size(); ++i) a.v[i] = static_cast<double>(i);
    return {ref::to_tensor(a, f32, device()), a};
  }
};

void expect_view_of(const Tensor& v, const Tensor& base) {
  EXPECT_TRUE(v.shares_storage(base)) << "expected a view sharing storage";
  EXPECT_EQ(v.device(), base.device());
  EXPECT_EQ(v.dtype(), base.dtype());
}

TEST_P(Views, ReshapeAndView) {
  auto x = iota({2, 3, 4});
  for (const Shape& s : {Shape{24}, Shape{4, 6}, Shape{2, 12}, Shape{1, 24, 1}, Shape{2, 3, 2, 2}}) {
    SCOPED_TRACE(s.str());
    auto r = x.t.reshape(s);
    expect_view_of(r, x.t);
    EXPECT_TRUE(r.is_contiguous());
    EXPECT_TRUE(ref::exact(r, ref::reshape(x.r, s.vec())));
    auto v = x.t.view(s);
    expect_view_of(v, x.t);
    EXPECT_TRUE(ref::exact(v, ref::reshape(x.r, s.vec())));
    EXPECT_TRUE(ref::exact(reshape(x.t, s), ref::reshape(x.r, s.vec())));
    EXPECT_TRUE(ref::exact(view(x.t, s), ref::reshape(x.r, s.vec())));
  }
  // To and from 0-dim.
  auto one = iota({1});
  EXPECT_EQ(one.t.reshape({}).dim(), 0);
  EXPECT_EQ(one.t.reshape({}).reshape({1, 1}).shape(), (Shape{1, 1}));
  // Size must match.
  EXPECT_THROW(x.t.reshape({5, 5}), ShapeError);
  EXPECT_THROW(x.t.view({25}), ShapeError);
}

TEST_P(Views, ReshapeInfersMinusOne) {
  auto x = iota({2, 3, 4});
  EXPECT_EQ(x.t.reshape({-1}).shape(), (Shape{24}));
  EXPECT_EQ(x.t.reshape({4, -1}).shape(), (Shape{4, 6}));
  EXPECT_EQ(x.t.view({-1, 2, 3}).shape(), (Shape{4, 2, 3}));
  EXPECT_TRUE(ref::exact(x.t.reshape({-1, 8}), ref::reshape(x.r, {3, 8})));
  EXPECT_THROW(x.t.reshape({-1, -1}), ShapeError);
  EXPECT_THROW(x.t.reshape({-1, 5}), ShapeError);
}

TEST_P(Views, ViewOfNonContiguousIsAShapeError) {
  auto x = iota({3, 4});
  auto t = x.t.t();
  EXPECT_FALSE(t.is_contiguous());
  try {
    (void)t.view({12});
    ADD_FAILURE() << "view of a transposed tensor did not throw";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("view"), std::string::npos) << e.what();
  }
  // reshape copies instead.
  auto r = t.reshape({12});
  EXPECT_FALSE(r.shares_storage(x.t));
  EXPECT_TRUE(ref::exact(r, ref::reshape(ref::transpose(x.r, 0, 1), {12})));
  // A view that keeps the non-contiguous dim intact is still possible.
  auto y = iota({4, 6});
  auto s = y.t.slice(1, 0, 6, 2);  // [4, 3], strides [6, 2]
  auto v = s.view({4, 3, 1});
  expect_view_of(v, y.t);
  EXPECT_TRUE(ref::exact(v, ref::reshape(ref::slice(y.r, 1, 0, 6, 2), {4, 3, 1})));
}

TEST_P(Views, TransposePermuteT) {
  auto x = iota({2, 3, 4});
  auto tr = x.t.transpose(0, 2);
  expect_view_of(tr, x.t);
  EXPECT_EQ(tr.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(tr.strides(), (Shape{1, 4, 12}));
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_TRUE(ref::exact(tr, ref::transpose(x.r, 0, 2)));
  EXPECT_TRUE(ref::exact(transpose(x.t, -1, -3), ref::transpose(x.r, 0, 2)));
  EXPECT_TRUE(ref::exact(x.t.transpose(1, 1), x.r));
  auto p = x.t.permute({1, 2, 0});
  expect_view_of(p, x.t);
  EXPECT_TRUE(ref::exact(p, ref::permute(x.r, {1, 2, 0})));
  EXPECT_TRUE(ref::exact(permute(x.t, {-1, 0, 1}), ref::permute(x.r, {2, 0, 1})));
  auto m = iota({3, 5});
  EXPECT_TRUE(ref::exact(m.t.t(), ref::transpose(m.r, 0, 1)));
  EXPECT_TRUE(ref::exact(t(m.t), ref::transpose(m.r, 0, 1)));
  EXPECT_TRUE(m.t.t().t().is_contiguous());
  auto v = iota({5});
  EXPECT_TRUE(ref::exact(v.t.t(), v.r));  // t() of 1-D is itself
  EXPECT_THROW(x.t.t(), Error);           // t() is for ≤ 2-D
  EXPECT_THROW(x.t.permute({0, 1}), Error);
  EXPECT_THROW(x.t.permute({0, 1, 1}), Error);
  EXPECT_THROW(x.t.transpose(0, 3), IndexError);
}

TEST_P(Views, SliceNarrowSelect) {
  auto x = iota({5, 6});
  struct SliceCase {
    int dim;
    std::int64_t start, end, step;
  };
  const SliceCase cases[] = {{0, 1, 4, 1}, {1, 0, 6, 2},  {1, 1, 6, 3},   {0, 0, 5, 4},   {-1, 2, 3, 1},
                             {0, 3, 3, 1}, {0, -2, 5, 1}, {1, -5, -1, 2}, {1, 0, 100, 1}, {0, 4, 2, 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE("slice(" + std::to_string(c.dim) + ", " + std::to_string(c.start) + ", " + std::to_string(c.end) +
                 ", " + std::to_string(c.step) + ")");
    auto s = x.t.slice(c.dim, c.start, c.end, c.step);
    expect_view_of(s, x.t);
    EXPECT_TRUE(ref::exact(s, ref::slice(x.r, c.dim, c.start, c.end, c.step)));
    EXPECT_TRUE(ref::exact(slice(x.t, c.dim, c.start, c.end, c.step), ref::slice(x.r, c.dim, c.start, c.end, c.step)));
  }
  // Slices of slices.
  auto ss = x.t.slice(1, 1, 6, 2).slice(0, 1, 5, 2).slice(1, 1, 3);
  EXPECT_TRUE(ref::exact(ss, ref::slice(ref::slice(ref::slice(x.r, 1, 1, 6, 2), 0, 1, 5, 2), 1, 1, 3)));
  EXPECT_THROW(x.t.slice(0, 0, 5, 0), ValueError);
  EXPECT_THROW(x.t.slice(0, 0, 5, -1), ValueError);
  EXPECT_THROW(x.t.slice(2, 0, 1), IndexError);

  auto n = x.t.narrow(1, 2, 3);
  expect_view_of(n, x.t);
  EXPECT_TRUE(ref::exact(n, ref::slice(x.r, 1, 2, 5)));
  EXPECT_TRUE(ref::exact(narrow(x.t, 0, 4, 1), ref::slice(x.r, 0, 4, 5)));
  EXPECT_TRUE(ref::exact(narrow(x.t, 0, 5, 0), ref::slice(x.r, 0, 5, 5)));
  EXPECT_THROW(x.t.narrow(1, 4, 3), Error);  // past the end
  EXPECT_THROW(x.t.narrow(1, -7, 1), Error);

  for (int dim : {0, 1, -1}) {
    for (std::int64_t i : {0, 2, -1}) {
      SCOPED_TRACE("select(" + std::to_string(dim) + ", " + std::to_string(i) + ")");
      auto s = x.t.select(dim, i);
      expect_view_of(s, x.t);
      EXPECT_EQ(s.dim(), 1);
      EXPECT_TRUE(ref::exact(s, ref::select(x.r, dim, i)));
      EXPECT_TRUE(ref::exact(select(x.t, dim, i), ref::select(x.r, dim, i)));
    }
  }
  EXPECT_TRUE(ref::exact(x.t[3], ref::select(x.r, 0, 3)));
  EXPECT_TRUE(ref::exact(x.t[-1][2], ref::Array({}, {26})));
  EXPECT_THROW(x.t.select(0, 5), IndexError);
  EXPECT_THROW(x.t.select(1, -7), IndexError);
  EXPECT_THROW(x.t[9], IndexError);
  EXPECT_THROW(x.t.select(2, 0), IndexError);
}

TEST_P(Views, ExpandSqueezeUnsqueezeFlatten) {
  auto x = iota({3, 1});
  auto e = x.t.expand({3, 4});
  expect_view_of(e, x.t);
  EXPECT_EQ(e.stride(1), 0);
  EXPECT_TRUE(ref::exact(e, ref::expand(x.r, {3, 4})));
  EXPECT_TRUE(ref::exact(x.t.expand({2, 3, 4}), ref::expand(x.r, {2, 3, 4})));
  EXPECT_TRUE(ref::exact(x.t.expand({-1, 5}), ref::expand(x.r, {3, 5})));
  EXPECT_TRUE(ref::exact(expand(x.t, {3, 0}), ref::expand(x.r, {3, 0})));
  EXPECT_THROW(x.t.expand({4, 4}), ShapeError);  // a non-1 dim cannot expand
  EXPECT_THROW(x.t.expand({4}), ShapeError);     // fewer dims
  // Reading an expanded tensor and computing with it.
  EXPECT_TRUE(ref::exact(e.sum({1}), ref::Array({3}, {0, 4, 8})));
  EXPECT_TRUE(ref::exact(e.contiguous(), ref::expand(x.r, {3, 4})));

  auto y = iota({1, 3, 1, 2});
  EXPECT_EQ(y.t.squeeze().shape(), (Shape{3, 2}));
  expect_view_of(y.t.squeeze(), y.t);
  EXPECT_EQ(y.t.squeeze(0).shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(y.t.squeeze(-2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(y.t.squeeze(1).shape(), (Shape{1, 3, 1, 2}));  // not size 1: unchanged, as torch
  EXPECT_EQ(squeeze(y.t).shape(), (Shape{3, 2}));
  EXPECT_EQ(squeeze(y.t, 2).shape(), (Shape{1, 3, 2}));
  EXPECT_TRUE(ref::exact(y.t.squeeze(), ref::reshape(y.r, {3, 2})));
  EXPECT_EQ(ones({1, 1}, device()).squeeze().dim(), 0);
  EXPECT_THROW(y.t.squeeze(4), IndexError);

  auto z = iota({2, 3});
  EXPECT_EQ(z.t.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(z.t.unsqueeze(1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(z.t.unsqueeze(2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(z.t.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(unsqueeze(z.t, -3).shape(), (Shape{1, 2, 3}));
  expect_view_of(z.t.unsqueeze(1), z.t);
  EXPECT_TRUE(ref::exact(z.t.t().unsqueeze(1), ref::reshape(ref::transpose(z.r, 0, 1), {3, 1, 2})));
  EXPECT_THROW(z.t.unsqueeze(4), IndexError);
  EXPECT_EQ(full({}, 1.0, device()).unsqueeze(0).shape(), (Shape{1}));

  auto w = iota({2, 3, 4});
  EXPECT_EQ(w.t.flatten().shape(), (Shape{24}));
  expect_view_of(w.t.flatten(), w.t);
  EXPECT_EQ(w.t.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(flatten(w.t, 0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(w.t.flatten(-2, -1).shape(), (Shape{2, 12}));
  EXPECT_TRUE(ref::exact(w.t.flatten(), ref::reshape(w.r, {24})));
  // Flattening a permuted tensor copies, in logical order.
  auto pf = w.t.permute({2, 0, 1}).flatten();
  EXPECT_TRUE(ref::exact(pf, ref::reshape(ref::permute(w.r, {2, 0, 1}), {24})));
  EXPECT_EQ(full({}, 3.0, device()).flatten().shape(), (Shape{1}));
}

TEST_P(Views, ContiguousAndClone) {
  auto x = iota({4, 5});
  EXPECT_TRUE(x.t.contiguous().is_same(x.t));  // already contiguous: itself
  EXPECT_TRUE(contiguous(x.t).is_same(x.t));
  for (const auto& v : {x.t.t(), x.t.slice(1, 0, 5, 2), x.t.select(1, 3), x.t.unsqueeze(1).expand({4, 3, 5})}) {
    SCOPED_TRACE(v.shape().str());
    const ref::Array want = ref::from_tensor(v);
    auto c = v.contiguous();
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_EQ(c.strides(), contiguous_strides(c.shape()));
    EXPECT_TRUE(ref::exact(c, want));
    if (!v.is_contiguous()) {
      EXPECT_FALSE(c.shares_storage(x.t));
    }
  }
  auto cl = x.t.clone();
  EXPECT_FALSE(cl.shares_storage(x.t));
  EXPECT_FALSE(cl.is_same(x.t));
  EXPECT_TRUE(cl.is_contiguous());
  EXPECT_EQ(cl.device(), device());
  EXPECT_TRUE(ref::exact(cl, x.r));
  cl.fill_(-1);  // independent of the original
  EXPECT_TRUE(ref::exact(x.t, x.r));
  auto ct = clone(x.t.t());
  EXPECT_TRUE(ct.is_contiguous());
  EXPECT_TRUE(ref::exact(ct, ref::transpose(x.r, 0, 1)));
  for (DType dt : {f64, i32, i64, u8, boolean}) {
    auto y = ones({3, 2}, device(), dt).t();
    EXPECT_EQ(y.clone().dtype(), dt);
    EXPECT_TRUE(ref::exact(y.clone(), ref::Array::filled({2, 3}, 1)));
  }
}

TEST_P(Views, WritesThroughViewsReachTheBase) {
  const Device d = device();
  auto x = zeros({3, 4}, d);
  x.select(0, 1).fill_(5);                             // row 1
  x.t().select(0, 3).add_(1);                          // column 3
  x.slice(1, 0, 4, 2).slice(0, 2, 3).mul_(0).add_(7);  // row 2, cols 0 and 2
  x.reshape({12}).narrow(0, 0, 2).fill_(-1);           // first two elements
  x.unsqueeze(0).expand({2, 3, 4});                    // reading views leaves x alone
  EXPECT_TRUE(ref::exact(x, ref::Array({3, 4}, {-1, -1, 0, 1, 5, 5, 5, 6, 7, 0, 7, 1})));
  // Views alias each other, too.
  auto base = arange(0, 6, 1, d, f32);
  auto v1 = base.view({2, 3});
  auto v2 = base.view({3, 2}).t();
  v1.select(1, 0).copy_(tensor(std::vector<float>{100, 200}, d));
  EXPECT_TRUE(ref::exact(base, ref::Array({6}, {100, 1, 2, 200, 4, 5})));
  EXPECT_TRUE(ref::exact(v2, ref::Array({2, 3}, {100, 2, 4, 1, 200, 5})));
  EXPECT_TRUE(v1.shares_storage(v2));
}

TEST_P(Views, ToDTypeConverts) {
  auto x = iota({3, 4});
  auto y = x.t.t().to(i64);
  EXPECT_EQ(y.dtype(), i64);
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  EXPECT_FALSE(y.shares_storage(x.t));
  EXPECT_TRUE(ref::exact(y, ref::transpose(x.r, 0, 1)));
  EXPECT_TRUE(x.t.to(f32).is_same(x.t));
  EXPECT_TRUE(ref::exact(to_dtype(x.t, f64), x.r));
}

TEST_P(Views, NonContiguousInputsToEveryView) {
  // Each view op applied to a transposed and a stepped input matches the reference.
  std::uint64_t seed = 3;
  for (Layout layout : {Layout::Transposed, Layout::Stepped}) {
    SCOPED_TRACE(ref::name(layout));
    auto x = ref::make_input({4, 6}, layout, f32, device(), Domain{-1, 1}, seed++);
    EXPECT_TRUE(ref::exact(x.t.reshape({24}), ref::reshape(x.r, {24})));
    EXPECT_TRUE(ref::exact(x.t.reshape({3, 8}), ref::reshape(x.r, {3, 8})));
    EXPECT_TRUE(ref::exact(x.t.t(), ref::transpose(x.r, 0, 1)));
    EXPECT_TRUE(ref::exact(x.t.slice(1, 1, 6, 2), ref::slice(x.r, 1, 1, 6, 2)));
    EXPECT_TRUE(ref::exact(x.t.select(1, 4), ref::select(x.r, 1, 4)));
    EXPECT_TRUE(ref::exact(x.t.unsqueeze(0).expand({2, 4, 6}), ref::expand(x.r, {2, 4, 6})));
    EXPECT_TRUE(ref::exact(x.t.flatten(), ref::reshape(x.r, {24})));
    EXPECT_TRUE(ref::exact(x.t.clone(), x.r));
    EXPECT_TRUE(ref::exact(x.t.contiguous(), x.r));
    EXPECT_TRUE(ref::exact(x.t.to(f64), x.r));
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(Views);

}  // namespace
