// The same seed gives bit-identical rand/randn/randint on cpu, opencl:0 and
// opencl:1 (DESIGN §4.10, Note [Bit-identical random numbers]).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "opencl_test_support.h"

namespace {

using namespace anvil;
using anvil::testing::opencl_count;

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor h = t.cpu().contiguous();
  const auto* p = static_cast<const unsigned char*>(h.raw_data_ptr());
  return std::vector<unsigned char>(p, p + h.nbytes());
}

enum class Kind { Rand, Randn, Randint };

// Three draws in a row from `seed` on `d`, so the generator's offset moves too.
std::vector<std::vector<unsigned char>> draws(Kind k, DType t, Device d, std::uint64_t seed) {
  manual_seed(seed);
  std::vector<std::vector<unsigned char>> out;
  for (const Shape& s : {Shape{1}, Shape{1001}, Shape{7, 33}}) {
    Tensor x = k == Kind::Rand ? rand(s, d, t) : k == Kind::Randn ? randn(s, d, t) : randint(-1000, 1000000, s, d, t);
    out.push_back(bytes_of(x));
  }
  return out;
}

TEST(OpenCLRandom, SameSeedSameBitsOnEveryDevice) {
  ANVIL_REQUIRE_OPENCL(1);
  struct Case {
    Kind kind;
    DType dtype;
    const char* name;
  };
  const Case cases[] = {{Kind::Rand, f32, "rand f32"},       {Kind::Rand, f64, "rand f64"},
                        {Kind::Randn, f32, "randn f32"},     {Kind::Randn, f64, "randn f64"},
                        {Kind::Randint, i64, "randint i64"}, {Kind::Randint, i32, "randint i32"}};
  for (const Case& c : cases) {
    for (std::uint64_t seed : {0ull, 42ull, 0xDEADBEEFCAFEull}) {
      const auto want = draws(c.kind, c.dtype, cpu(), seed);
      for (int i = 0; i < opencl_count() && i < 2; ++i) {
        const Device d(DeviceType::OpenCL, i);
        if (c.dtype == f64 && !properties(d).fp64) continue;
        SCOPED_TRACE(std::string(c.name) + " seed " + std::to_string(seed) + " on " + d.str());
        const auto got = draws(c.kind, c.dtype, d, seed);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t j = 0; j < got.size(); ++j) EXPECT_TRUE(got[j] == want[j]) << "draw " << j;
      }
    }
  }
}

TEST(OpenCLRandom, DrawsLookRandom) {
  ANVIL_REQUIRE_OPENCL(1);
  const Device d(DeviceType::OpenCL, 0);
  manual_seed(7);
  const Tensor u = rand({100000}, d);
  const Tensor n = randn({100000}, d);
  EXPECT_NEAR(u.mean().item<float>(), 0.5, 0.01);
  EXPECT_GE(u.min().item<float>(), 0.0f);
  EXPECT_LT(u.max().item<float>(), 1.0f);
  EXPECT_NEAR(n.mean().item<float>(), 0.0, 0.02);
  EXPECT_NEAR(anvil::std(n).item<float>(), 1.0, 0.02);
}

}  // namespace
