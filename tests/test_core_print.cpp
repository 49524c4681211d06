// Printing (DESIGN §4.11) in PyTorch's exact format, on every device. The
// expected strings are what PyTorch prints for the same tensor, with anvil's
// dtype names (`dtype=torch.float64` → `dtype=f64`) and the device suffix
// `device='opencl:0'` for non-CPU tensors, placed first among the suffixes as
// PyTorch does.
#include <gtest/gtest.h>

#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;

class Print : public anvil::testing::DeviceTest {
 protected:
  // body: the text up to the closing bracket; suffixes other than the device.
  std::string expect(const std::string& body, const std::string& suffix = "") const {
    std::string s = body;
    if (!device().is_cpu()) s += ", device='" + device().str() + "'";
    if (!suffix.empty()) s += ", " + suffix;
    return s + ")";
  }
  static std::string str(const Tensor& t) {
    std::ostringstream os;
    os << t;
    EXPECT_EQ(os.str(), to_string(t)) << "operator<< and to_string disagree";
    return os.str();
  }
  Tensor f32s(std::vector<double> v) const {
    return ref::to_tensor(ref::Array({static_cast<std::int64_t>(v.size())}, v), f32, device());
  }
};

TEST_P(Print, FloatMatrix) {
  EXPECT_EQ(str(ones({2, 3}, device())), expect("tensor([[1., 1., 1.],\n        [1., 1., 1.]]"));
  EXPECT_EQ(str(tensor({{1.5, -2.0}, {0.25, 3.0}}, device())),
            expect("tensor([[ 1.5000, -2.0000],\n        [ 0.2500,  3.0000]]"));
  EXPECT_EQ(str(zeros({2, 2}, device())), expect("tensor([[0., 0.],\n        [0., 0.]]"));
}

TEST_P(Print, FloatVectors) {
  EXPECT_EQ(str(f32s({1.5, 2.25})), expect("tensor([1.5000, 2.2500]"));
  EXPECT_EQ(str(f32s({-1, 2})), expect("tensor([-1.,  2.]"));
  EXPECT_EQ(str(f32s({0, 10})), expect("tensor([ 0., 10.]"));
  EXPECT_EQ(str(f32s({0.5, -1.25})), expect("tensor([ 0.5000, -1.2500]"));
  EXPECT_EQ(str(f32s({1, 1000})), expect("tensor([   1., 1000.]"));
  EXPECT_EQ(str(f32s({0.001, 1})), expect("tensor([0.0010, 1.0000]"));
}

TEST_P(Print, ScientificNotation) {
  // PyTorch switches to %.4e when max/min of the nonzero magnitudes > 1000,
  // max > 1e8, or (for non-integers) min < 1e-4.
  EXPECT_EQ(str(f32s({1e-5, 1})), expect("tensor([1.0000e-05, 1.0000e+00]"));
  EXPECT_EQ(str(f32s({1e10, 1})), expect("tensor([1.0000e+10, 1.0000e+00]"));
  EXPECT_EQ(str(f32s({1, 2000})), expect("tensor([1.0000e+00, 2.0000e+03]"));
  EXPECT_EQ(str(f32s({0.5, -1e-5})), expect("tensor([ 5.0000e-01, -1.0000e-05]"));
}

TEST_P(Print, NonFiniteValues) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(str(f32s({1, nan, inf})), expect("tensor([1., nan, inf]"));
  EXPECT_EQ(str(f32s({1.5, nan})), expect("tensor([1.5000,    nan]"));
  EXPECT_EQ(str(f32s({-inf, 2})), expect("tensor([-inf, 2.]"));
}

TEST_P(Print, IntegersAndBools) {
  const Device d = device();
  EXPECT_EQ(str(arange(5, d)), expect("tensor([0, 1, 2, 3, 4]"));  // i64: no dtype suffix
  EXPECT_EQ(str(tensor({-1, 10, 3}, d)), expect("tensor([-1, 10,  3]"));
  EXPECT_EQ(str(tensor({1, 2, 3}, d, i32)), expect("tensor([1, 2, 3]", "dtype=i32"));
  EXPECT_EQ(str(tensor(std::vector<std::uint8_t>{0, 200}, d)), expect("tensor([  0, 200]", "dtype=u8"));
  EXPECT_EQ(str(tensor({true, false, true}, d)), expect("tensor([ True, False,  True]"));  // bool: no suffix
  EXPECT_EQ(str(tensor({{true}, {false}}, d)), expect("tensor([[ True],\n        [False]]"));
  EXPECT_EQ(str(arange(6, d).reshape({2, 3})), expect("tensor([[0, 1, 2],\n        [3, 4, 5]]"));
}

TEST_P(Print, Float64HasADTypeSuffix) {
  EXPECT_EQ(str(tensor({1.0, 2.0}, device(), f64)), expect("tensor([1., 2.]", "dtype=f64"));
  EXPECT_EQ(str(full({2, 2}, 0.5, device(), f64)),
            expect("tensor([[0.5000, 0.5000],\n        [0.5000, 0.5000]]", "dtype=f64"));
}

// torch: tensor([1., 2.], dtype=torch.float16), tensor([1.5000, 2.0000], dtype=torch.bfloat16);
// values shown as the 16-bit value (0.1 is 0.0999755859375 in f16: 0.1000).
TEST_P(Print, HalfDTypesHaveASuffix) {
  EXPECT_EQ(str(tensor({1.0, 2.0}, device(), f16)), expect("tensor([1., 2.]", "dtype=f16"));
  EXPECT_EQ(str(tensor({1.5, 2.0}, device(), bf16)), expect("tensor([1.5000, 2.0000]", "dtype=bf16"));
  EXPECT_EQ(str(tensor({0.1, 70000.0}, device(), f16)), expect("tensor([0.1000,    inf]", "dtype=f16"));
  EXPECT_EQ(str(zeros({0}, device(), bf16)), expect("tensor([]", "dtype=bf16"));
}

TEST_P(Print, ZeroDim) {
  const Device d = device();
  EXPECT_EQ(str(scalar_tensor(3.5, d)), expect("tensor(3.5000"));
  EXPECT_EQ(str(scalar_tensor(2.0, d)), expect("tensor(2."));
  EXPECT_EQ(str(scalar_tensor(-0.5, d)), expect("tensor(-0.5000"));
  EXPECT_EQ(str(scalar_tensor(7, d)), expect("tensor(7"));
  EXPECT_EQ(str(scalar_tensor(7, d, i32)), expect("tensor(7", "dtype=i32"));
  EXPECT_EQ(str(scalar_tensor(true, d)), expect("tensor(True"));
  EXPECT_EQ(str(scalar_tensor(0.5, d, f64)), expect("tensor(0.5000", "dtype=f64"));
  EXPECT_EQ(str(ones({3}, d).sum()), expect("tensor(3."));
}

TEST_P(Print, Empty) {
  const Device d = device();
  EXPECT_EQ(str(zeros({0}, d)), expect("tensor([]"));
  EXPECT_EQ(str(zeros({0, 3}, d)), expect("tensor([]", "size=(0, 3)"));
  // An empty tensor shows every non-default dtype, even i64 (nothing to infer it from).
  EXPECT_EQ(str(zeros({0}, d, i64)), expect("tensor([]", "dtype=i64"));
  EXPECT_EQ(str(zeros({0}, d, f64)), expect("tensor([]", "dtype=f64"));
  EXPECT_EQ(str(zeros({2, 0}, d, i32)), expect("tensor([]", "size=(2, 0), dtype=i32"));
}

TEST_P(Print, ThreeDims) {
  EXPECT_EQ(str(ones({2, 2, 2}, device())),
            expect("tensor([[[1., 1.],\n         [1., 1.]],\n\n        [[1., 1.],\n         [1., 1.]]]"));
}

TEST_P(Print, NonContiguousPrintsInLogicalOrder) {
  const Device d = device();
  EXPECT_EQ(str(arange(6, d).reshape({2, 3}).t()), expect("tensor([[0, 3],\n        [1, 4],\n        [2, 5]]"));
  EXPECT_EQ(str(arange(10, d).slice(0, 1, 10, 3)), expect("tensor([1, 4, 7]"));
  EXPECT_EQ(str(ones({3, 1}, d).expand({3, 2})), expect("tensor([[1., 1.],\n        [1., 1.],\n        [1., 1.]]"));
}

TEST_P(Print, LongRowsWrapAtTheLineWidth) {
  EXPECT_EQ(str(arange(0, 20, 1, device(), f32)),
            expect("tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
                   "        14., 15., 16., 17., 18., 19.]"));
}

TEST_P(Print, LargeTensorsAreSummarised) {
  const Device d = device();
  EXPECT_EQ(str(ones({2000}, d)), expect("tensor([1., 1., 1.,  ..., 1., 1., 1.]"));
  EXPECT_EQ(str(arange(2000, d)), expect("tensor([   0,    1,    2,  ..., 1997, 1998, 1999]"));
  EXPECT_EQ(str(full({1001}, 0.5, d)), expect("tensor([0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000]"));
  EXPECT_EQ(str(ones({40, 50}, d)), expect("tensor([[1., 1., 1.,  ..., 1., 1., 1.],\n"
                                           "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
                                           "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
                                           "        ...,\n"
                                           "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
                                           "        [1., 1., 1.,  ..., 1., 1., 1.],\n"
                                           "        [1., 1., 1.,  ..., 1., 1., 1.]]"));
  // The threshold: 1000 elements are printed in full, 1001 are summarised.
  EXPECT_EQ(str(zeros({1000}, d)).find("..."), std::string::npos);
  EXPECT_NE(str(zeros({1001}, d)).find("..."), std::string::npos);
}

TEST_P(Print, PrintOptions) {
  const PrintOptions saved = printoptions();
  PrintOptions p = saved;
  p.precision = 2;
  set_printoptions(p);
  EXPECT_EQ(str(f32s({1.2345, 2.5})), expect("tensor([1.23, 2.50]"));
  p = saved;
  p.threshold = 5;
  p.edgeitems = 1;
  set_printoptions(p);
  EXPECT_EQ(str(arange(10, device())), expect("tensor([0,  ..., 9]"));
  set_printoptions(saved);
  EXPECT_EQ(printoptions().precision, saved.precision);
  EXPECT_EQ(str(f32s({1.2345})), expect("tensor([1.2345]"));
}

TEST(PrintUndefined, DoesNotCrash) {
  Tensor u;
  std::ostringstream os;
  try {
    os << u;
  } catch (const Error&) {
    // Either a printed placeholder or an anvil error is fine; a crash is not.
  }
  SUCCEED();
}

ANVIL_INSTANTIATE_DEVICE_TEST(Print);

}  // namespace
