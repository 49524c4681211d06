// Factories (DESIGN §4.1): every one takes a device and a dtype, on every
// device; tensor() from scalars, vectors and nested initializer lists;
// *_like; host access.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;

class Factories : public anvil::testing::DeviceTest {};

void expect_meta(const Tensor& t, const Shape& shape, DType dt, Device d) {
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), shape);
  EXPECT_EQ(t.dtype(), dt);
  EXPECT_EQ(t.device(), d);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), shape.numel());
  EXPECT_EQ(t.dim(), shape.size());
  EXPECT_EQ(t.nbytes(), static_cast<std::size_t>(shape.numel()) * element_size(dt));
  EXPECT_EQ(t.strides(), contiguous_strides(shape));
}

TEST_P(Factories, EmptyZerosOnesInEveryDType) {
  const Device d = device();
  const Shape shapes[] = {{}, {0}, {1}, {7}, {2, 3}, {3, 0, 2}, {2, 3, 5, 1}};
  for (DType dt : {f32, f64, i32, i64, u8, boolean}) {
    for (const Shape& s : shapes) {
      SCOPED_TRACE(std::string(to_string(dt)) + " " + s.str());
      expect_meta(empty(s, d, dt), s, dt, d);
      expect_meta(empty(s, dt, d), s, dt, d);
      expect_meta(zeros(s, d, dt), s, dt, d);
      expect_meta(ones(s, dt, d), s, dt, d);
      EXPECT_TRUE(ref::exact(zeros(s, d, dt), ref::Array::filled(s.vec(), 0)));
      EXPECT_TRUE(ref::exact(zeros(s, dt, d), ref::Array::filled(s.vec(), 0)));
      EXPECT_TRUE(ref::exact(ones(s, d, dt), ref::Array::filled(s.vec(), 1)));
      EXPECT_TRUE(ref::exact(ones(s, dt, d), ref::Array::filled(s.vec(), 1)));
    }
  }
  // Default dtype f32.
  EXPECT_EQ(zeros({2}, d).dtype(), f32);
  EXPECT_EQ(empty({2}, d).dtype(), f32);
  EXPECT_EQ(ones({2}).dtype(), f32);
  EXPECT_EQ(ones({2}).device(), cpu());
}

TEST_P(Factories, Full) {
  const Device d = device();
  expect_meta(full({2, 3}, 2.5, d), {2, 3}, f32, d);  // a floating value → f32
  EXPECT_TRUE(ref::exact(full({2, 3}, 2.5, d), ref::Array::filled({2, 3}, 2.5)));
  expect_meta(full({4}, 7, d), {4}, i64, d);  // an integer → i64
  EXPECT_TRUE(ref::exact(full({4}, 7, d), ref::Array::filled({4}, 7)));
  expect_meta(full({3}, true, d), {3}, boolean, d);
  EXPECT_TRUE(ref::exact(full({3}, true, d), ref::Array::filled({3}, 1)));
  expect_meta(full({2}, 0.1, d, f64), {2}, f64, d);
  EXPECT_TRUE(ref::exact(full({2}, 0.1, d, f64), ref::Array::filled({2}, 0.1)));
  EXPECT_TRUE(ref::exact(full({2}, 0.1, d), ref::Array::filled({2}, static_cast<float>(0.1))));
  EXPECT_TRUE(ref::exact(full({5}, -3, d, i32), ref::Array::filled({5}, -3)));
  EXPECT_EQ(full({5}, -3, d, i32).dtype(), i32);
  expect_meta(full({0, 4}, 1.0, d), {0, 4}, f32, d);
  EXPECT_TRUE(ref::exact(full({}, 4.0, d), ref::Array({}, {4.0})));
  EXPECT_TRUE(ref::exact(full({1001}, std::int64_t{1} << 40, d), ref::Array::filled({1001}, std::ldexp(1.0, 40))));
}

TEST_P(Factories, Arange) {
  const Device d = device();
  auto a = arange(5, d);
  expect_meta(a, {5}, i64, d);
  EXPECT_TRUE(ref::exact(a, ref::Array({5}, {0, 1, 2, 3, 4})));
  auto b = arange(0, 1, 0.25, d);
  expect_meta(b, {4}, f32, d);
  EXPECT_TRUE(ref::exact(b, ref::Array({4}, {0, 0.25, 0.5, 0.75})));
  EXPECT_TRUE(ref::exact(arange(10, 0, -3, d), ref::Array({4}, {10, 7, 4, 1})));
  EXPECT_EQ(arange(10, 0, -3, d).dtype(), i64);
  EXPECT_TRUE(ref::exact(arange(1, 2.5, 0.5, d), ref::Array({3}, {1, 1.5, 2})));
  EXPECT_TRUE(ref::exact(arange(2, 7, 1, d), ref::Array({5}, {2, 3, 4, 5, 6})));
  EXPECT_TRUE(ref::exact(arange(1, 4, 2, d), ref::Array({2}, {1, 3})));  // ceil((4-1)/2)
  EXPECT_EQ(arange(5, 5, 1, d).numel(), 0);
  EXPECT_EQ(arange(0, d).numel(), 0);
  // An explicit dtype.
  auto c = arange(4, d, f64);
  expect_meta(c, {4}, f64, d);
  EXPECT_TRUE(ref::exact(c, ref::Array({4}, {0, 1, 2, 3})));
  EXPECT_EQ(arange(0, 6, 2, d, i32).dtype(), i32);
  EXPECT_TRUE(ref::exact(arange(0, 6, 2, d, i32), ref::Array({3}, {0, 2, 4})));
  // An odd size.
  std::vector<double> want(1023);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = static_cast<double>(i);
  EXPECT_TRUE(ref::exact(arange(1023, d), ref::Array({1023}, want)));
  // A zero step, or one pointing away from end, is an error.
  EXPECT_THROW(arange(0, 5, 0, d), ValueError);
  EXPECT_THROW(arange(0, 5, -1, d), ValueError);
}

TEST_P(Factories, Linspace) {
  const Device d = device();
  auto a = linspace(0, 1, 5, d);
  expect_meta(a, {5}, f32, d);
  EXPECT_TRUE(ref::close(a, ref::Array({5}, {0, 0.25, 0.5, 0.75, 1}), f32));
  EXPECT_TRUE(ref::close(linspace(-1, 1, 3, d, f64), ref::Array({3}, {-1, 0, 1}), f64));
  EXPECT_EQ(linspace(-1, 1, 3, d, f64).dtype(), f64);
  EXPECT_TRUE(ref::exact(linspace(3, 10, 1, d), ref::Array({1}, {3})));
  EXPECT_EQ(linspace(0, 1, 0, d).numel(), 0);
  // The last value is end itself: 1 + 3 * (-1/3) would be 5.6e-17.
  EXPECT_EQ(linspace(1, 0, 4, d, f64).to_vector<double>().back(), 0.0);
  EXPECT_EQ(linspace(1, 0, 4, d).to_vector<float>().back(), 0.0f);
  // Endpoints are exact, and the values are evenly spaced.
  auto b = linspace(2, 7, 101, d, f64);
  std::vector<double> want(101);
  for (int i = 0; i < 101; ++i) want[static_cast<std::size_t>(i)] = 2 + 5.0 * i / 100;
  EXPECT_TRUE(ref::close(b, ref::Array({101}, want), f64));
  EXPECT_EQ(b.to_vector<double>().back(), 7.0);
  EXPECT_THROW(linspace(0, 1, -1, d), ValueError);
}

TEST_P(Factories, Eye) {
  const Device d = device();
  expect_meta(eye(3, std::nullopt, d), {3, 3}, f32, d);
  EXPECT_TRUE(ref::exact(eye(3, std::nullopt, d), ref::Array({3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1})));
  EXPECT_TRUE(ref::exact(eye(2, 4, d), ref::Array({2, 4}, {1, 0, 0, 0, 0, 1, 0, 0})));
  EXPECT_TRUE(ref::exact(eye(3, 2, d, i64), ref::Array({3, 2}, {1, 0, 0, 1, 0, 0})));
  EXPECT_EQ(eye(3, 2, d, i64).dtype(), i64);
  EXPECT_EQ(eye(0, std::nullopt, d).numel(), 0);
  EXPECT_EQ(eye(0, std::nullopt, d).shape(), (Shape{0, 0}));
}

TEST_P(Factories, TensorFromVectors) {
  const Device d = device();
  auto f = tensor(std::vector<float>{1.5f, -2, 3}, d);
  expect_meta(f, {3}, f32, d);
  EXPECT_TRUE(ref::exact(f, ref::Array({3}, {1.5, -2, 3})));
  auto g = tensor(std::vector<double>{0.1, 0.2}, d);
  expect_meta(g, {2}, f64, d);  // dtype from the C++ type
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0.1, 0.2}));
  auto i = tensor(std::vector<std::int32_t>{1, -2, 3, 4, 5, 6}, Shape{2, 3}, d);
  expect_meta(i, {2, 3}, i32, d);
  EXPECT_EQ(i.to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, -2, 3, 4, 5, 6}));
  auto l = tensor(std::vector<std::int64_t>{std::int64_t{1} << 50, -1}, d);
  expect_meta(l, {2}, i64, d);
  EXPECT_EQ(l.to_vector<std::int64_t>(), (std::vector<std::int64_t>{std::int64_t{1} << 50, -1}));
  auto u = tensor(std::vector<std::uint8_t>{0, 255}, d);
  expect_meta(u, {2}, u8, d);
  EXPECT_EQ(u.to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{0, 255}));
  // An explicit dtype converts.
  auto c = tensor(std::vector<float>{1.5f, 2.5f}, d, f64);
  expect_meta(c, {2}, f64, d);
  EXPECT_TRUE(ref::exact(c, ref::Array({2}, {1.5, 2.5})));
  auto e = tensor(std::vector<float>{}, d);
  expect_meta(e, {0}, f32, d);
  // Size and shape must agree.
  EXPECT_THROW(tensor(std::vector<float>{1, 2, 3}, Shape{2, 2}, d), ShapeError);
  // 0-dim from a vector of one with shape {}.
  expect_meta(tensor(std::vector<float>{4}, Shape{}, d), {}, f32, d);
}

TEST_P(Factories, FromHost) {
  const Device d = device();
  const double data[] = {1, 2, 3, 4, 5, 6};
  auto t = from_host(data, {3, 2}, f64, d);
  expect_meta(t, {3, 2}, f64, d);
  EXPECT_TRUE(ref::exact(t, ref::Array({3, 2}, {1, 2, 3, 4, 5, 6})));
  // The tensor owns a copy.
  double mutable_data[] = {1, 2};
  auto u = from_host(mutable_data, {2}, f64, d);
  mutable_data[0] = 100;
  EXPECT_TRUE(ref::exact(u, ref::Array({2}, {1, 2})));
}

TEST_P(Factories, ScalarTensor) {
  const Device d = device();
  auto a = scalar_tensor(3.5, d);
  expect_meta(a, {}, f32, d);
  EXPECT_EQ(a.item<float>(), 3.5f);
  auto b = scalar_tensor(3, d);
  expect_meta(b, {}, i64, d);
  EXPECT_EQ(b.item<std::int64_t>(), 3);
  auto c = scalar_tensor(true, d);
  expect_meta(c, {}, boolean, d);
  EXPECT_TRUE(c.item<bool>());
  auto e = scalar_tensor(2, d, f64);
  expect_meta(e, {}, f64, d);
  EXPECT_EQ(e.item<double>(), 2.0);
}

TEST_P(Factories, NestedLists) {
  const Device d = device();
  auto a = tensor({{1, 2, 3}, {4, 5, 6}}, d);
  expect_meta(a, {2, 3}, i64, d);  // integers → i64
  EXPECT_TRUE(ref::exact(a, ref::Array({2, 3}, {1, 2, 3, 4, 5, 6})));
  auto b = tensor({{1.5, 2.0}, {3.0, -4.25}}, d);
  expect_meta(b, {2, 2}, f32, d);  // double literals → f32, like torch.tensor
  EXPECT_TRUE(ref::exact(b, ref::Array({2, 2}, {1.5, 2, 3, -4.25})));
  auto m = tensor({1, 2.5, 3}, d);  // one floating literal makes it f32
  expect_meta(m, {3}, f32, d);
  EXPECT_TRUE(ref::exact(m, ref::Array({3}, {1, 2.5, 3})));
  auto c = tensor({true, false, true}, d);
  expect_meta(c, {3}, boolean, d);
  EXPECT_TRUE(ref::exact(c, ref::Array({3}, {1, 0, 1})));
  auto e = tensor({{{1}, {2}}, {{3}, {4}}, {{5}, {6}}}, d);
  expect_meta(e, {3, 2, 1}, i64, d);
  EXPECT_TRUE(ref::exact(e, ref::Array({3, 2, 1}, {1, 2, 3, 4, 5, 6})));
  auto s = tensor(2.5, d);
  expect_meta(s, {}, f32, d);
  EXPECT_EQ(s.item<float>(), 2.5f);
  auto f = tensor({{1.0, 2.0}}, d, f64);
  expect_meta(f, {1, 2}, f64, d);
  auto g = tensor({7, 8}, d, i32);
  expect_meta(g, {2}, i32, d);
  EXPECT_EQ(g.to_vector<std::int32_t>(), (std::vector<std::int32_t>{7, 8}));
  // Default device without one given.
  EXPECT_EQ(tensor({1, 2}).device(), cpu());
  // Ragged lists are a ShapeError.
  EXPECT_THROW(tensor({{1, 2}, {3}}, d), ShapeError);
  EXPECT_THROW(tensor({{1, 2}, {{3, 4}, {5, 6}}}, d), ShapeError);
}

TEST_P(Factories, LikeVersionsKeepShapeDTypeAndDevice) {
  const Device d = device();
  for (DType dt : {f32, f64, i32, i64}) {
    SCOPED_TRACE(to_string(dt));
    auto base = zeros({3, 5}, d, dt).t();  // non-contiguous: *_like still gives a fresh tensor
    auto check = [&](const Tensor& x) {
      EXPECT_EQ(x.shape(), (Shape{5, 3}));
      EXPECT_EQ(x.dtype(), dt);
      EXPECT_EQ(x.device(), d);
      EXPECT_FALSE(x.shares_storage(base));
    };
    check(empty_like(base));
    check(zeros_like(base));
    EXPECT_TRUE(ref::exact(zeros_like(base), ref::Array::filled({5, 3}, 0)));
    check(ones_like(base));
    EXPECT_TRUE(ref::exact(ones_like(base), ref::Array::filled({5, 3}, 1)));
    check(full_like(base, 3));
    EXPECT_TRUE(ref::exact(full_like(base, 3), ref::Array::filled({5, 3}, 3)));
    check(randint_like(base, 0, 10));
    if (is_floating(dt)) {
      check(rand_like(base));
      check(randn_like(base));
    }
  }
}

// ---- host access ----------------------------------------------------------------------------

TEST_P(Factories, ItemAndToVector) {
  const Device d = device();
  EXPECT_EQ(full({}, 2.5, d).item<float>(), 2.5f);
  EXPECT_EQ(full({1, 1}, 7, d).item<std::int64_t>(), 7);  // one element, any rank
  EXPECT_EQ(ones({1}, d, f64).item<double>(), 1.0);
  EXPECT_EQ(full({}, 3, d, i32).item<std::int32_t>(), 3);
  EXPECT_THROW((void)ones({2}, d).item<float>(), Error);
  EXPECT_THROW((void)ones({0}, d).item<float>(), Error);
  // to_vector of a view is in logical order.
  auto x = arange(6, d).reshape({2, 3});
  EXPECT_EQ(x.t().to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(x.select(1, 2).to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 5}));
  EXPECT_EQ(x[1].to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(x[1][2].item<std::int64_t>(), 5);
  EXPECT_EQ(full({3}, true, d).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_TRUE(zeros({0}, d).to_vector<float>().empty());
}

TEST_P(Factories, DataPtrIsCpuOnly) {
  const Device d = device();
  auto x = arange(0, 6, 1, d, f32).reshape({2, 3});
  if (d.is_cpu()) {
    float* p = x.data_ptr<float>();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p[4], 4.0f);
    EXPECT_EQ(x.raw_data_ptr(), static_cast<void*>(p));
    // A view points at its first element.
    auto row = x[1];
    EXPECT_EQ(row.data_ptr<float>(), p + 3);
    EXPECT_EQ(x.slice(1, 1, 3).data_ptr<float>(), p + 1);
    // Writing through the pointer changes the tensor.
    p[0] = 42;
    EXPECT_EQ(x.to_vector<float>()[0], 42.0f);
    // The wrong element type is an error.
    EXPECT_THROW((void)x.data_ptr<double>(), Error);
  } else {
    EXPECT_THROW((void)x.data_ptr<float>(), NotSupported);
    EXPECT_THROW((void)x.raw_data_ptr(), NotSupported);
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(Factories);

}  // namespace
