// dtypes and PyTorch's promotion rules (DESIGN §4.2), as the ops apply them on
// every device; Shape basics.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;

TEST(DType, NamesAndSizes) {
  struct Case {
    DType t;
    const char* name;
    std::size_t size;
    bool floating, integral;
  };
  const Case cases[] = {
      {boolean, "bool", 1, false, false}, {u8, "u8", 1, false, true},     {i32, "i32", 4, false, true},
      {i64, "i64", 8, false, true},       {f32, "f32", 4, true, false},   {f64, "f64", 8, true, false},
      {f16, "f16", 2, true, false},       {bf16, "bf16", 2, true, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(to_string(c.t), c.name);
    std::ostringstream os;
    os << c.t;
    EXPECT_EQ(os.str(), c.name);
    EXPECT_EQ(element_size(c.t), c.size);
    EXPECT_EQ(is_floating(c.t), c.floating);
    EXPECT_EQ(is_integral(c.t), c.integral);
  }
  static_assert(dtype_v<float> == f32 && dtype_v<double> == f64 && dtype_v<std::int32_t> == i32 &&
                dtype_v<std::int64_t> == i64 && dtype_v<std::uint8_t> == u8 && dtype_v<bool> == boolean);
}

TEST(DType, TensorPromotionTable) {
  struct Case {
    DType a, b, want;
  };
  const Case cases[] = {
      {i32, f32, f32},
      {f32, i32, f32},
      {i64, f32, f32},
      {i32, i64, i64},
      {i64, i32, i64},
      {f32, f64, f64},
      {i32, f64, f64},
      {u8, i32, i32},
      {boolean, u8, u8},
      {boolean, f32, f32},
      {boolean, boolean, boolean},
      {u8, f64, f64},
      {i64, f64, f64},
      {f32, f32, f32},
      {boolean, i64, i64},
      // the 16-bit floats (torch.promote_types, 1.13)
      {f16, f16, f16},
      {bf16, bf16, bf16},
      {f16, bf16, f32},
      {bf16, f16, f32},
      {f16, f32, f32},
      {f32, bf16, f32},
      {f16, f64, f64},
      {bf16, f64, f64},
      {i64, f16, f16},
      {bf16, i32, bf16},
      {u8, f16, f16},
      {boolean, bf16, bf16},
      {f16, boolean, f16},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(to_string(c.a)) + " op " + std::string(to_string(c.b)));
    EXPECT_EQ(promote(c.a, c.b), c.want);
  }
}

TEST(DType, ScalarPromotionTable) {
  EXPECT_EQ(promote(i32, Scalar(2)), i32);    // int tensor + int scalar stays int
  EXPECT_EQ(promote(i32, Scalar(2.5)), f32);  // + float scalar → default float
  EXPECT_EQ(promote(i64, Scalar(2.5)), f32);
  EXPECT_EQ(promote(f64, Scalar(2.5)), f64);  // the tensor's float width wins
  EXPECT_EQ(promote(f32, Scalar(2)), f32);
  EXPECT_EQ(promote(boolean, Scalar(2)), i64);  // bool + int scalar → i64
  EXPECT_EQ(promote(boolean, Scalar(true)), boolean);
  EXPECT_EQ(promote(boolean, Scalar(2.5)), f32);
  EXPECT_EQ(promote(u8, Scalar(300)), u8);
  EXPECT_EQ(promote(f16, Scalar(2.5)), f16);  // a half tensor stays half with a double scalar
  EXPECT_EQ(promote(bf16, Scalar(2.5)), bf16);
  EXPECT_EQ(promote(bf16, Scalar(3)), bf16);
  EXPECT_EQ(promote(f16, Scalar(true)), f16);

  EXPECT_TRUE(Scalar(2.5).is_floating());
  EXPECT_TRUE(Scalar(2.5f).is_floating());
  EXPECT_FALSE(Scalar(2).is_floating());
  EXPECT_TRUE(Scalar(true).is_bool());
  EXPECT_EQ(Scalar(std::int64_t{1} << 40).to_int(), std::int64_t{1} << 40);
  EXPECT_EQ(Scalar(2.75).to<int>(), 2);
  EXPECT_EQ(Scalar(3).to<double>(), 3.0);
  EXPECT_TRUE(Scalar(0.5).to<bool>());
}

// ---- promotion as the ops apply it, on every device ---------------------------------------

class DTypePromotion : public anvil::testing::DeviceTest {};

TEST_P(DTypePromotion, TensorTensor) {
  const Device d = device();
  auto fi = ones({3}, d, i32), fl = ones({3}, d, i64), ff = ones({3}, d, f32), fd = ones({3}, d, f64);
  auto fb = ones({3}, d, boolean), fu = ones({3}, d, u8);
  EXPECT_EQ((fi + ff).dtype(), f32);
  EXPECT_EQ((ff + fi).dtype(), f32);
  EXPECT_EQ((fi + fl).dtype(), i64);
  EXPECT_EQ((fl * fi).dtype(), i64);
  EXPECT_EQ((ff - fd).dtype(), f64);
  EXPECT_EQ((fu + fi).dtype(), i32);
  EXPECT_EQ((fb + fu).dtype(), u8);
  EXPECT_EQ((fb * ff).dtype(), f32);
  EXPECT_EQ(maximum(fi, fd).dtype(), f64);
  // Values survive promotion.
  EXPECT_TRUE(ref::exact(fi + ff, ref::Array::filled({3}, 2.0)));
  EXPECT_TRUE(ref::exact(fi + fl, ref::Array::filled({3}, 2.0)));
}

TEST_P(DTypePromotion, IntegerDivisionIsTrueDivision) {
  const Device d = device();
  auto a = tensor(std::vector<std::int32_t>{7, -7, 1, 0}, d);
  auto b = tensor(std::vector<std::int32_t>{2, 2, 3, 5}, d);
  auto q = a / b;
  EXPECT_EQ(q.dtype(), f32);
  EXPECT_TRUE(ref::close(q, ref::Array({4}, {3.5, -3.5, 1.0 / 3.0, 0.0}), f32));
  auto la = tensor(std::vector<std::int64_t>{7, 9}, d);
  EXPECT_EQ((la / la).dtype(), f32);
  EXPECT_EQ(div(la, Scalar(2)).dtype(), f32);
  EXPECT_EQ((la / 2).dtype(), f32);
  EXPECT_TRUE(ref::close(la / 2, ref::Array({2}, {3.5, 4.5}), f32));
  EXPECT_EQ(div(Scalar(1), la).dtype(), f32);
  // f64 stays f64.
  EXPECT_EQ((ones({2}, d, f64) / 2).dtype(), f64);
}

TEST_P(DTypePromotion, TensorScalar) {
  const Device d = device();
  auto i = tensor(std::vector<std::int32_t>{1, 2, 3}, d);
  EXPECT_EQ((i + 2).dtype(), i32);
  EXPECT_TRUE(ref::exact(i + 2, ref::Array({3}, {3, 4, 5})));
  EXPECT_EQ((i + 2.5).dtype(), f32);
  EXPECT_TRUE(ref::exact(i + 2.5, ref::Array({3}, {3.5, 4.5, 5.5})));
  EXPECT_EQ((2.5 * i).dtype(), f32);
  EXPECT_EQ((i * 2).dtype(), i32);
  EXPECT_EQ((ones({2}, d, f64) + 2.5).dtype(), f64);
  EXPECT_EQ((ones({2}, d, f32) + 2).dtype(), f32);
  auto b = tensor(std::vector<std::uint8_t>{1, 0}, d, boolean);
  EXPECT_EQ(b.dtype(), boolean);
  EXPECT_EQ((b + 1).dtype(), i64);
  EXPECT_TRUE(ref::exact(b + 1, ref::Array({2}, {2, 1})));
  EXPECT_EQ((b + 1.5).dtype(), f32);
  auto l = tensor(std::vector<std::int64_t>{5}, d);
  EXPECT_EQ((l - 1).dtype(), i64);
  EXPECT_EQ((1 - l).dtype(), i64);
  EXPECT_EQ(pow(l, 2).dtype(), i64);
  EXPECT_EQ(pow(l, 0.5).dtype(), f32);
}

TEST_P(DTypePromotion, ComparisonsGiveBool) {
  const Device d = device();
  for (DType t : {f32, f64, i32, i64, u8, boolean}) {
    SCOPED_TRACE(to_string(t));
    auto a = ones({4}, d, t), b = zeros({4}, d, t);
    EXPECT_EQ((a == b).dtype(), boolean);
    EXPECT_EQ((a != b).dtype(), boolean);
    EXPECT_EQ((a < b).dtype(), boolean);
    EXPECT_EQ((a <= b).dtype(), boolean);
    EXPECT_EQ((a > b).dtype(), boolean);
    EXPECT_EQ((a >= b).dtype(), boolean);
    EXPECT_EQ(eq(a, 1).dtype(), boolean);
    EXPECT_EQ(gt(a, 0.5).dtype(), boolean);
  }
  // Mixed dtypes compare by value.
  auto i = tensor(std::vector<std::int32_t>{1, 2, 3}, d);
  auto f = tensor(std::vector<float>{1.0f, 2.5f, 2.0f}, d);
  EXPECT_TRUE(ref::exact(i == f, ref::Array({3}, {1, 0, 0})));
  EXPECT_TRUE(ref::exact(i > f, ref::Array({3}, {0, 0, 1})));
  EXPECT_TRUE(ref::exact(i < 2.5, ref::Array({3}, {1, 1, 0})));
}

TEST_P(DTypePromotion, FloatingUnaryOpsOnIntegersGiveF32) {
  const Device d = device();
  auto i = tensor(std::vector<std::int64_t>{1, 4, 9}, d);
  EXPECT_EQ(sqrt(i).dtype(), f32);
  EXPECT_TRUE(ref::close(sqrt(i), ref::Array({3}, {1, 2, 3}), f32));
  EXPECT_EQ(exp(i).dtype(), f32);
  EXPECT_EQ(log(i).dtype(), f32);
  EXPECT_EQ(sigmoid(i).dtype(), f32);
  EXPECT_EQ(reciprocal(i).dtype(), f32);
  // These keep the integer dtype.
  EXPECT_EQ(neg(i).dtype(), i64);
  EXPECT_EQ(abs(i).dtype(), i64);
  EXPECT_EQ(relu(i).dtype(), i64);
  EXPECT_EQ(square(i).dtype(), i64);
  EXPECT_TRUE(ref::exact(square(i), ref::Array({3}, {1, 16, 81})));
  EXPECT_EQ(logical_not(i).dtype(), boolean);
}

TEST_P(DTypePromotion, ConversionsRoundLikePyTorch) {
  const Device d = device();
  auto f = tensor(std::vector<float>{2.7f, -2.7f, 0.0f, 0.5f, -0.0f, 100.0f}, d);
  EXPECT_TRUE(ref::exact(f.to(i32), ref::Array({6}, {2, -2, 0, 0, 0, 100})));  // toward zero
  EXPECT_TRUE(ref::exact(f.to(i64), ref::Array({6}, {2, -2, 0, 0, 0, 100})));
  EXPECT_TRUE(ref::exact(f.to(boolean), ref::Array({6}, {1, 1, 0, 1, 0, 1})));
  EXPECT_TRUE(ref::exact(f.to(f64), ref::Array({6}, {2.7f, -2.7f, 0, 0.5, 0, 100})));
  auto b = tensor(std::vector<std::uint8_t>{1, 0, 1}, d, boolean);
  EXPECT_TRUE(ref::exact(b.to(f32), ref::Array({3}, {1, 0, 1})));
  EXPECT_TRUE(ref::exact(to_dtype(b, i64), ref::Array({3}, {1, 0, 1})));
  auto u = tensor(std::vector<std::uint8_t>{0, 200, 255}, d);
  EXPECT_EQ(u.dtype(), u8);
  EXPECT_TRUE(ref::exact(u.to(i32), ref::Array({3}, {0, 200, 255})));
  // to(dtype) of the same dtype is the tensor itself.
  EXPECT_TRUE(f.to(f32).is_same(f));
  EXPECT_FALSE(f.to(f64).is_same(f));
  EXPECT_EQ(f.to(f64).device(), d);
  auto g = f.to(d, f64);
  EXPECT_EQ(g.dtype(), f64);
  EXPECT_EQ(g.device(), d);
}

ANVIL_INSTANTIATE_DEVICE_TEST(DTypePromotion);

// ---- Shape ------------------------------------------------------------------------------------

TEST(ShapeTest, Basics) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.size(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.str(), "[2, 3, 4]");
  std::ostringstream os;
  os << s;
  EXPECT_EQ(os.str(), "[2, 3, 4]");
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ(Shape{}.str(), "[]");
  EXPECT_EQ((Shape{3, 0, 5}).numel(), 0);
  EXPECT_EQ(contiguous_strides(Shape{2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(s.vec(), (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_TRUE(Shape(std::vector<std::int64_t>{2, 3, 4}) == s);
  EXPECT_FALSE((Shape{2, 3}) == s);
}

TEST(ShapeTest, TooManyDimsAndOverflowThrow) {
  Shape s = Shape::filled(kMaxDims, 1);
  EXPECT_THROW(s.push_back(1), ShapeError);
  EXPECT_THROW(Shape(std::vector<std::int64_t>(kMaxDims + 1, 1)), ShapeError);
  try {
    (void)checked_mul(std::int64_t{1} << 40, std::int64_t{1} << 40, "myop");
    ADD_FAILURE() << "no overflow error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("myop"), std::string::npos) << e.what();
  }
  EXPECT_EQ(checked_mul(3, 4, "x"), 12);
  EXPECT_THROW((void)(Shape{std::int64_t{1} << 40, std::int64_t{1} << 40}).numel(), ShapeError);
}

TEST(ShapeTest, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 1}), (Shape{2, 4, 3}));
  EXPECT_EQ(broadcast_shapes({}, {4, 1}), (Shape{4, 1}));
  EXPECT_EQ(broadcast_shapes({5, 1, 7}, {1, 6, 1}), (Shape{5, 6, 7}));
  EXPECT_EQ(broadcast_shapes({0, 3}, {1, 3}), (Shape{0, 3}));
  try {
    (void)broadcast_shapes({3}, {4}, "myop");
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("myop"), std::string::npos) << m;
    EXPECT_NE(m.find("[3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
}

}  // namespace
