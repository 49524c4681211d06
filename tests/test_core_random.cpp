// Random numbers (DESIGN §4.10): counter-based Philox, so one seed and shape
// give the same numbers on every device; distributions sanity-checked on 1e5
// samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;

class Random : public anvil::testing::DeviceTest {};

TEST_P(Random, ManualSeedReproduces) {
  const Device d = device();
  for (DType dt : {f32, f64}) {
    SCOPED_TRACE(to_string(dt));
    manual_seed(1234);
    auto a = rand({1000}, d, dt);
    auto b = randn({7, 13}, d, dt);
    auto c = randint(-5, 5, {333}, d);
    manual_seed(1234);
    auto a2 = rand({1000}, d, dt);
    auto b2 = randn({7, 13}, d, dt);
    auto c2 = randint(-5, 5, {333}, d);
    EXPECT_TRUE(equal(a, a2));
    EXPECT_TRUE(equal(b, b2));
    EXPECT_TRUE(equal(c, c2));
    // Each call advances the generator: the next draw differs.
    auto a3 = rand({1000}, d, dt);
    EXPECT_FALSE(equal(a, a3));
    // A different seed gives different numbers.
    manual_seed(1235);
    EXPECT_FALSE(equal(rand({1000}, d, dt), a));
  }
}

TEST_P(Random, SameSeedSameNumbersOnEveryDevice) {
  // DESIGN §4.10: the numbers drawn on `d` equal those drawn on the CPU.
  const Device d = device();
  for (const Shape& s : {Shape{1}, Shape{7}, Shape{1023}, Shape{3, 5, 7}, Shape{10007}}) {
    SCOPED_TRACE(s.str());
    manual_seed(99);
    auto on_d = rand(s, d);
    auto n_d = randn(s, d, f64);
    auto i_d = randint(0, 1000, s, d);
    manual_seed(99);
    auto on_cpu = rand(s, cpu());
    auto n_cpu = randn(s, cpu(), f64);
    auto i_cpu = randint(0, 1000, s, cpu());
    EXPECT_TRUE(equal(on_d.cpu(), on_cpu));
    EXPECT_TRUE(allclose(n_d.cpu(), n_cpu, 1e-12, 1e-12));
    EXPECT_TRUE(equal(i_d.cpu(), i_cpu));
  }
}

TEST_P(Random, AnElementDependsOnlyOnItsSeedOffsetAndIndex) {
  // DESIGN §4.10's stream layout: a fill of n is the first n elements of a
  // longer fill from the same state, however a device splits the work (the
  // CPU: whole Philox blocks at a time, the elements of a block split
  // between two threads' chunks one by one).
  const Device d = device();
  for (DType dt : {f32, f64}) {
    SCOPED_TRACE(to_string(dt));
    manual_seed(7);
    const Tensor longest = rand({30011}, d, dt);
    for (std::int64_t n : {1, 63, 64, 65, 130, 4097, 10000, 30011}) {
      SCOPED_TRACE(n);
      manual_seed(7);
      EXPECT_TRUE(equal(rand({n}, d, dt), longest.narrow(0, 0, n)));
    }
  }
}

TEST_P(Random, RandIsInUnitIntervalAndUniform) {
  const Device d = device();
  manual_seed(7);
  for (DType dt : {f32, f64}) {
    SCOPED_TRACE(to_string(dt));
    auto x = rand({100000}, d, dt);
    EXPECT_EQ(x.dtype(), dt);
    EXPECT_EQ(x.device(), d);
    auto v = ref::from_tensor(x).v;
    const auto [mn, mx] = std::minmax_element(v.begin(), v.end());
    EXPECT_GE(*mn, 0.0);
    EXPECT_LT(*mx, 1.0);
    // Ten bins, each within 5% of 10000 (the standard deviation is ~95).
    std::vector<int> bins(10, 0);
    for (double e : v) ++bins[static_cast<std::size_t>(std::min(9, static_cast<int>(e * 10)))];
    for (int b : bins) EXPECT_NEAR(b, 10000, 500);
    // The device agrees with the reference on the moments.
    EXPECT_NEAR(x.mean().to(f64).item<double>(), 0.5, 0.01);
    EXPECT_NEAR(anvil::var(x).to(f64).item<double>(), 1.0 / 12, 0.005);
  }
}

TEST_P(Random, RandnMeanAndStd) {
  const Device d = device();
  manual_seed(11);
  for (DType dt : {f32, f64}) {
    SCOPED_TRACE(to_string(dt));
    auto x = randn({100000}, d, dt);
    EXPECT_EQ(x.dtype(), dt);
    const ref::Array a = ref::from_tensor(x);
    const double m = ref::mean(a).v[0];
    const double s = ref::stdev(a).v[0];
    EXPECT_NEAR(m, 0.0, 0.02);  // standard error 0.003
    EXPECT_NEAR(s, 1.0, 0.02);
    // Tails: about 4.55% of samples beyond 2 sigma.
    const auto beyond = std::count_if(a.v.begin(), a.v.end(), [](double e) { return std::fabs(e) > 2.0; });
    EXPECT_NEAR(static_cast<double>(beyond) / 100000, 0.0455, 0.005);
    for (double e : a.v) ASSERT_TRUE(std::isfinite(e));
  }
}

TEST_P(Random, RandintBounds) {
  const Device d = device();
  manual_seed(5);
  auto x = randint(-3, 4, {10000}, d);
  EXPECT_EQ(x.dtype(), i64);
  EXPECT_EQ(x.device(), d);
  std::map<std::int64_t, int> counts;
  for (std::int64_t v : x.to_vector<std::int64_t>()) ++counts[v];
  ASSERT_EQ(counts.size(), 7u) << "expected every value in [-3, 4)";
  EXPECT_EQ(counts.begin()->first, -3);
  EXPECT_EQ(counts.rbegin()->first, 3);
  for (auto [v, n] : counts) EXPECT_NEAR(n, 10000 / 7, 200) << "value " << v;

  auto y = randint(0, 2, {1000}, d, i32);
  EXPECT_EQ(y.dtype(), i32);
  auto yv = y.to_vector<std::int32_t>();
  EXPECT_TRUE(std::all_of(yv.begin(), yv.end(), [](std::int32_t v) { return v == 0 || v == 1; }));
  // A wide range stays in range.
  auto z = randint(std::int64_t{1} << 40, (std::int64_t{1} << 40) + 3, {1000}, d);
  for (std::int64_t v : z.to_vector<std::int64_t>()) {
    EXPECT_GE(v, std::int64_t{1} << 40);
    EXPECT_LT(v, (std::int64_t{1} << 40) + 3);
  }
  // randint into a float dtype gives integral values.
  auto f = randint(0, 10, {100}, d, f32);
  EXPECT_EQ(f.dtype(), f32);
  for (float v : f.to_vector<float>()) EXPECT_EQ(v, std::floor(v));
  // An empty range is an error.
  EXPECT_THROW(randint(5, 5, {3}, d), Error);
  EXPECT_THROW(randint(5, 2, {3}, d), Error);
}

TEST_P(Random, ZeroAndOddSizes) {
  const Device d = device();
  EXPECT_EQ(rand({0}, d).numel(), 0);
  EXPECT_EQ(randn({3, 0}, d).shape(), (Shape{3, 0}));
  EXPECT_EQ(randint(0, 3, {0}, d).numel(), 0);
  auto s = rand({}, d);
  EXPECT_EQ(s.dim(), 0);
  const float v = s.item<float>();
  EXPECT_GE(v, 0.0f);
  EXPECT_LT(v, 1.0f);
  // Odd sizes fill every element (no lane of the last Philox block is lost).
  for (std::int64_t n : {1, 2, 3, 5, 7, 1023}) {
    SCOPED_TRACE(n);
    manual_seed(3);
    auto x = randn({n}, d);
    auto vals = x.to_vector<float>();
    EXPECT_EQ(static_cast<std::int64_t>(vals.size()), n);
    for (float e : vals) EXPECT_TRUE(std::isfinite(e));
    if (n >= 3) {
      std::sort(vals.begin(), vals.end());
      EXPECT_EQ(std::adjacent_find(vals.begin(), vals.end()), vals.end()) << "repeated values";
    }
  }
}

TEST_P(Random, IntegerDTypesForRandAreRejected) {
  const Device d = device();
  // torch.rand/randn take floating dtypes only.
  for (DType dt : {i32, i64, boolean}) {
    SCOPED_TRACE(to_string(dt));
    EXPECT_THROW(rand({3}, d, dt), Error);
    EXPECT_THROW(randn({3}, d, dt), Error);
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(Random);

}  // namespace
