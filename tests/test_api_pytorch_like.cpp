// The book's PyTorch idioms written in anvil (issue 13, "a C++ API that
// reads like PyTorch's"), on every device: a dims argument that is one
// integer or a list (x.sum(1), x.mean(0, true)), torch.max(x, dim)'s values
// and indices, the method form of every op PyTorch offers as one, host reads
// into any integer type of a dtype's width (long long), and optimisers that
// take a bare learning rate.
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "device_test.h"

namespace {

using namespace anvil;

// --- what compiles (and what must not) ------------------------------------------------

// One integer or a list converts to Dims; a bool (keepdim's type) or a
// floating value does not, so x.sum(true) cannot mean a dim by accident.
static_assert(std::is_convertible_v<int, Dims>);
static_assert(std::is_convertible_v<std::int64_t, Dims>);
static_assert(std::is_convertible_v<std::vector<std::int64_t>, Dims>);
static_assert(std::is_convertible_v<Shape, Dims>);
static_assert(!std::is_convertible_v<bool, Dims>);
static_assert(!std::is_convertible_v<double, Dims>);

// Every integer type of a dtype's width has that dtype, whatever its name.
static_assert(dtype_v<long long> == i64);
static_assert(dtype_v<long> == (sizeof(long) == 8 ? i64 : i32));
static_assert(dtype_v<std::int64_t> == i64);
static_assert(dtype_v<int> == i32);
static_assert(dtype_v<unsigned char> == u8);
static_assert(!HasDType<short>);  // no 16-bit integer dtype
static_assert(!HasDType<char>);   // a character, not a number
static_assert(!HasDType<unsigned int>);

template <typename T>
concept SumTakes = requires(const Tensor& x, T dims) {
  x.sum(dims);
};
static_assert(SumTakes<int> && SumTakes<std::int64_t> && !SumTakes<bool> && !SumTakes<double>);

// A bare learning rate, and the options struct still (`{}` the default options).
static_assert(std::is_constructible_v<optim::SGD, std::vector<Tensor>, double>);
static_assert(std::is_constructible_v<optim::SGD, std::vector<Tensor>, optim::SGDOptions>);
static_assert(std::is_constructible_v<optim::Adam, std::vector<Tensor>, double>);
static_assert(!std::is_constructible_v<optim::SGD, std::vector<Tensor>, bool>);

class PyTorchLike : public anvil::testing::DeviceTest {
 protected:
  // [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], [[12, ...]]] in f32.
  Tensor iota() const { return arange(24, device(), f32).reshape({2, 3, 4}); }
};

// --- dims: one integer or a list ------------------------------------------------------

TEST_P(PyTorchLike, DimsArgumentTakesOneIntegerOrAList) {
  const Tensor x = iota();
  EXPECT_TRUE(equal(x.sum(1), x.sum({1})));
  EXPECT_TRUE(equal(x.sum(1), sum(x, {1})));
  EXPECT_TRUE(equal(sum(x, 1), sum(x, {1})));
  EXPECT_EQ(x.sum(1).shape(), (Shape{2, 4}));
  EXPECT_EQ(x.sum(1).to_vector<float>(), (std::vector<float>{12, 15, 18, 21, 48, 51, 54, 57}));
  EXPECT_TRUE(equal(x.sum(-1), x.sum({2})));
  EXPECT_TRUE(equal(x.sum({0, 2}), sum(sum(x, 2), 0)));
  EXPECT_EQ(x.sum().item<float>(), 276.0f);
  EXPECT_EQ(x.sum({}).item<float>(), 276.0f);

  const Tensor m = x.mean(0, true);
  EXPECT_EQ(m.shape(), (Shape{1, 3, 4}));
  EXPECT_TRUE(equal(m, mean(x, {0}, true)));
  EXPECT_EQ(m.to_vector<float>()[0], 6.0f);
  EXPECT_EQ(x.mean().item<float>(), 11.5f);

  // Lists held in variables: a vector, a Shape, a Dims.
  const std::vector<std::int64_t> v{0, -1};
  const Dims dims = {0, 2};
  EXPECT_TRUE(equal(x.sum(v), x.sum({0, 2})));
  EXPECT_TRUE(equal(x.sum(dims), x.sum({0, 2})));
  EXPECT_TRUE(equal(x.sum(Shape{0, 2}), x.sum({0, 2})));

  EXPECT_TRUE(equal(x.prod(2), prod(x, {2})));
  EXPECT_TRUE(equal(x.amax(1), amax(x, {1})));
  EXPECT_EQ(x.amax(1).to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(x.amin({1, 2}).to_vector<float>(), (std::vector<float>{0, 12}));
  EXPECT_TRUE(allclose(x.var(1), var(x, {1})));
  EXPECT_TRUE(allclose(x.std(1, true), anvil::std(x, {1}, true)));
  EXPECT_EQ(x.std(1, true).shape(), (Shape{2, 1, 4}));
  EXPECT_TRUE(allclose(x.var(), var(x)));
  EXPECT_TRUE(allclose(x.std(), anvil::std(x)));
  EXPECT_TRUE(allclose(x.norm(2), norm(x, {2})));
  EXPECT_TRUE(allclose(x.logsumexp(-1), logsumexp(x, {-1})));

  // Dims of views.
  EXPECT_EQ(x.permute({2, 0, 1}).shape(), (Shape{4, 2, 3}));
  const Tensor y = zeros({1, 3, 1}, device());
  EXPECT_EQ(y.squeeze(0).shape(), (Shape{3, 1}));
  EXPECT_EQ(y.squeeze({0, 2}).shape(), (Shape{3}));
  EXPECT_EQ(y.squeeze(1).shape(), (Shape{1, 3, 1}));  // not size 1: stays, as in PyTorch
  EXPECT_EQ(y.squeeze().shape(), (Shape{3}));
  EXPECT_EQ(squeeze(y, -1).shape(), (Shape{1, 3}));

  // Bad dims are errors naming the op, as before.
  EXPECT_THROW((void)x.sum(3), IndexError);
  EXPECT_THROW((void)x.sum({1, 1}), IndexError);
  EXPECT_THROW((void)y.squeeze({0, 0}), IndexError);
  EXPECT_THROW((void)x.mean({0, 1, 2, 0, 1, 2, 0, 1, 2}), ShapeError);  // more dims than a tensor can have
}

// --- torch.max(x, dim): values and indices ----------------------------------------------

TEST_P(PyTorchLike, MaxAlongADimGivesValuesAndIndices) {
  const Tensor x = tensor({{1.0, 5.0, 3.0}, {7.0, 2.0, 7.0}}, device());
  auto [values, indices] = x.max(1);
  EXPECT_EQ(values.to_vector<float>(), (std::vector<float>{5, 7}));
  EXPECT_EQ(indices.dtype(), i64);
  EXPECT_EQ(indices.to_vector<long long>(), (std::vector<long long>{1, 0}));  // the first of a tie
  EXPECT_EQ(values.device(), device());
  EXPECT_EQ(indices.device(), device());

  const ValuesIndices lo = x.min(0, true);
  EXPECT_EQ(lo.values.shape(), (Shape{1, 3}));
  EXPECT_EQ(lo.values.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(lo.indices.to_vector<int>(), (std::vector<int>{0, 1, 0}));

  // The free function and -1 for the last dim; max() of everything stays a tensor.
  EXPECT_TRUE(equal(max(x, -1).values, values));
  EXPECT_TRUE(equal(max(x, -1).indices, x.argmax(1)));
  EXPECT_EQ(x.max().item<float>(), 7.0f);
  EXPECT_EQ(x.min().item<float>(), 1.0f);

  // Integers keep their dtype; a 0-dim tensor is its own max at index 0.
  const Tensor xi = tensor({{3, 9}, {4, -1}}, device());
  EXPECT_EQ(xi.max(0).values.dtype(), i64);
  EXPECT_EQ(xi.max(0).values.to_vector<long long>(), (std::vector<long long>{4, 9}));
  const auto s = full({}, 2.5, device()).max(0);
  EXPECT_EQ(s.values.item<float>(), 2.5f);
  EXPECT_EQ(s.indices.item<long long>(), 0);

  // The gradient reaches the index, and only it (ties included).
  const Tensor w = x.clone().requires_grad_();
  w.max(1).values.sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0, 1, 0, 1, 0, 0}));

  EXPECT_THROW((void)x.max(2), IndexError);
  EXPECT_THROW((void)zeros({3, 0}, device()).max(1), IndexError);
}

// --- every op PyTorch offers as a method ---------------------------------------------------

TEST_P(PyTorchLike, OpsAreTensorMethods) {
  const Device d = device();
  const Tensor x = tensor({{-1.5, 0.5, 2.0}, {3.0, -0.25, 1.0}}, d);
  const Tensor y = tensor({{2.0, 1.0, -1.0}, {0.5, 4.0, 3.0}}, d);

  EXPECT_TRUE(allclose(x.softmax(1), softmax(x, 1)));
  EXPECT_TRUE(allclose(x.log_softmax(-1), log_softmax(x, -1)));
  EXPECT_TRUE(allclose(x.softmax(1).sum(1), ones({2}, d)));
  EXPECT_EQ(x.argmax(1).to_vector<long long>(), (std::vector<long long>{2, 0}));
  EXPECT_EQ(x.argmin().item<long long>(), 0);

  EXPECT_TRUE(equal(x.abs(), abs(x)));
  EXPECT_TRUE(equal(x.sign(), sign(x)));
  EXPECT_TRUE(equal(x.square(), square(x)));
  EXPECT_TRUE(allclose(y.reciprocal(), reciprocal(y)));
  EXPECT_TRUE(equal((x > 0).logical_not(), x <= 0));
  EXPECT_TRUE(equal(x.clamp(0), clamp(x, 0, std::nullopt)));  // min only, as x.clamp(min=0)
  EXPECT_TRUE(equal(x.clamp(-1, 1), clamp(x, -1, 1)));
  EXPECT_TRUE(allclose(x.pow(2), x * x));

  EXPECT_TRUE(equal(x.add(y), x + y));
  EXPECT_TRUE(equal(x.add(y, 2), x + 2 * y));
  EXPECT_TRUE(equal(x.add(1), x + 1));
  EXPECT_TRUE(equal(x.sub(y), x - y));
  EXPECT_TRUE(equal(x.sub(1), x - 1));
  EXPECT_TRUE(equal(x.mul(y), x * y));
  EXPECT_TRUE(equal(x.mul(3), x * 3));
  EXPECT_TRUE(equal(x.div(y), x / y));
  EXPECT_TRUE(equal(x.div(2), x / 2));
  EXPECT_TRUE(equal(x.maximum(y), maximum(x, y)));
  EXPECT_TRUE(equal(x.minimum(0), minimum(x, 0)));
  EXPECT_TRUE(equal(x.eq(y), x == y));
  EXPECT_TRUE(equal(x.ne(2), x != 2));
  EXPECT_TRUE(equal(x.lt(y), x < y));
  EXPECT_TRUE(equal(x.le(0.5), x <= 0.5));
  EXPECT_TRUE(equal(x.gt(y), x > y));
  EXPECT_TRUE(equal(x.ge(1), x >= 1));
  EXPECT_TRUE(equal(x.where(x > 0, y), where(x > 0, x, y)));
  EXPECT_TRUE(equal(x.where(x > 0, 0.0), where(x > 0, x, 0.0)));

  EXPECT_TRUE(allclose(x.matmul(y.t()), matmul(x, y.t())));
  EXPECT_TRUE(allclose(x.mm(y.t()), mm(x, y.t())));
  EXPECT_TRUE(allclose(x.unsqueeze(0).bmm(y.t().unsqueeze(0)), bmm(x.unsqueeze(0), y.t().unsqueeze(0))));
  EXPECT_TRUE(allclose(x[0].dot(y[0]), dot(x[0], y[0])));
  EXPECT_TRUE(allclose(x[0].outer(y[1]), outer(x[0], y[1])));
  const Tensor bias = tensor({1.0, 2.0}, d);
  EXPECT_TRUE(allclose(bias.addmm(x, y.t(), 0.5, 2), addmm(bias, x, y.t(), 0.5, 2)));

  const Tensor index = tensor({2, 0}, d);
  EXPECT_TRUE(equal(x.index_select(1, index), index_select(x, 1, index)));
  const Tensor gi = tensor({{0, 0}, {1, 0}}, d);
  EXPECT_TRUE(equal(x.gather(1, gi), gather(x, 1, gi)));
  EXPECT_EQ(x.split(2, 1).size(), 2U);
  EXPECT_EQ(x.split(2, 1)[1].shape(), (Shape{2, 1}));
  EXPECT_EQ(x.chunk(2).size(), 2U);
  EXPECT_TRUE(equal(x.chunk(2)[1], x[1].unsqueeze(0)));
  EXPECT_TRUE(equal(x.contiguous().as_strided({3}, {2}, 0), tensor({-1.5, 2.0, -0.25}, d)));

  EXPECT_TRUE(x.allclose(x + 1e-9));
  EXPECT_FALSE(x.allclose(y));
  EXPECT_TRUE(x.equal(x.clone()));
  EXPECT_FALSE(x.equal(y));
}

// --- host reads into every integer type of a dtype's width ----------------------------------

TEST_P(PyTorchLike, HostReadsTakeEveryIntegerTypeOfADTypesWidth) {
  const Device d = device();
  const Tensor x = tensor({3, -1, 7}, d);  // i64
  EXPECT_EQ(x.to_vector<long long>(), (std::vector<long long>{3, -1, 7}));
  EXPECT_EQ(x.to_vector<long>(), (std::vector<long>{3, -1, 7}));
  EXPECT_EQ(x.to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, -1, 7}));
  EXPECT_EQ(x.to_vector<int>(), (std::vector<int>{3, -1, 7}));
  EXPECT_EQ(x.sum().item<long long>(), 9LL);
  EXPECT_EQ(x.sum().item<long>(), 9L);
  EXPECT_EQ(x.sum().item<int>(), 9);
  EXPECT_EQ(x.argmax().item<long long>(), 2LL);

  const Tensor bytes = tensor({0.0, 200.0, 255.0}, d).to(u8);
  EXPECT_EQ(bytes.to_vector<unsigned char>(), (std::vector<unsigned char>{0, 200, 255}));
  EXPECT_EQ(bytes.max().item<unsigned char>(), 255);

  // And back: a vector of long long makes an i64 tensor.
  const Tensor from = tensor(std::vector<long long>{5, 6}, d);
  EXPECT_EQ(from.dtype(), i64);
  EXPECT_EQ(from.to_vector<long long>(), (std::vector<long long>{5, 6}));
  EXPECT_EQ(tensor(std::vector<int>{1, 2}, d).dtype(), i32);
  EXPECT_EQ(tensor(std::vector<unsigned char>{1, 2}, d).dtype(), u8);
}

// --- optimisers take a learning rate ------------------------------------------------------

TEST_P(PyTorchLike, OptimisersTakeALearningRate) {
  nn::Linear probe(2, 1);
  EXPECT_EQ(optim::SGD(probe.parameters(), 0.1).options().lr, 0.1);
  EXPECT_EQ(optim::Adam(probe.parameters(), 1e-3).options().lr, 1e-3);
  EXPECT_EQ(optim::Adam(probe.parameters(), 1).options().lr, 1.0);
  EXPECT_EQ(optim::Adam(probe.parameters(), {}).options().lr, optim::AdamOptions{}.lr);  // {}: the default options
  optim::SGD with_options(probe.parameters(), {.lr = 0.2, .momentum = 0.9});
  EXPECT_EQ(with_options.options().lr, 0.2);
  EXPECT_EQ(with_options.options().momentum, 0.9);
}

// The book's linear regression (y = Xw + b): SGD with a plain lr fits it.
TEST_P(PyTorchLike, SGDWithAPlainLearningRateTrainsATinyProblem) {
  const Device d = device();
  manual_seed(0);
  const Tensor features = randn({256, 2}, d);
  const Tensor true_w = tensor({{2.0}, {-3.4}}, d);
  const Tensor labels = features.matmul(true_w).add(4.2);
  nn::Linear net(2, 1);
  net.to(d);
  optim::SGD opt(net.parameters(), 0.1);
  double loss = 0;
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    const Tensor l = nn::mse_loss(net(features), labels);
    l.backward();
    opt.step();
    loss = l.item<double>();
  }
  EXPECT_LT(loss, 1e-4);
  EXPECT_TRUE(allclose(net.weight().detach().reshape({2, 1}), true_w, 1e-2, 1e-2)) << net.weight();
  EXPECT_NEAR(net.bias().item<double>(), 4.2, 1e-2);
}

TEST_P(PyTorchLike, AdamWithAPlainLearningRateTrainsATinyProblem) {
  const Device d = device();
  manual_seed(1);
  const Tensor features = randn({128, 2}, d);
  const Tensor labels = features.matmul(tensor({{1.0}, {0.5}}, d)).sub(1.0);
  nn::Linear net(2, 1);
  net.to(d);
  optim::Adam opt(net.parameters(), 0.05);
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    const Tensor l = nn::mse_loss(net(features), labels);
    l.backward();
    opt.step();
    if (step == 0) first = l.item<double>();
    last = l.item<double>();
  }
  EXPECT_LT(last, 1e-2 * first);
}

ANVIL_INSTANTIATE_DEVICE_TEST(PyTorchLike);

}  // namespace
