// Errors (STYLE.md): typed, with the op, what is wrong and expected vs got;
// the library stays usable after each one.
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;

// Runs f, expects an error of type E whose message contains every piece,
// then checks the library still works on `d`.
template <typename E>
void expect_error(Device d, const std::function<void()>& f, const std::vector<std::string>& pieces) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const E& e) {
    const std::string m = e.what();
    for (const auto& p : pieces) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' missing from: " << m;
    EXPECT_FALSE(m.empty());
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
  // Still usable.
  auto x = arange(0, 6, 1, d, f32).reshape({2, 3});
  EXPECT_TRUE(ref::exact(matmul(x, x.t()), ref::Array({2, 2}, {5, 14, 14, 50})));
}

class Errors : public anvil::testing::DeviceTest {};

TEST_P(Errors, ErrorTypesDeriveFromAnvilError) {
  static_assert(std::is_base_of_v<Error, ShapeError> && std::is_base_of_v<Error, DTypeError> &&
                std::is_base_of_v<Error, DeviceMismatch> && std::is_base_of_v<Error, DeviceError> &&
                std::is_base_of_v<Error, IndexError> && std::is_base_of_v<Error, ValueError> &&
                std::is_base_of_v<Error, NotSupported> && std::is_base_of_v<Error, NotCompiled> &&
                std::is_base_of_v<Error, OutOfMemory> && std::is_base_of_v<Error, BackendError> &&
                std::is_base_of_v<Error, IOError> && std::is_base_of_v<Error, CompileError> &&
                std::is_base_of_v<std::runtime_error, Error>);
  EXPECT_THROW(matmul(ones({2, 3}, device()), ones({2, 3}, device())), Error);
  EXPECT_THROW(matmul(ones({2, 3}, device()), ones({2, 3}, device())), std::runtime_error);
}

TEST_P(Errors, MatmulShapeMismatch) {
  const Device d = device();
  expect_error<ShapeError>(d, [&] { (void)matmul(ones({2, 3}, d), ones({4, 5}, d)); }, {"matmul", "[2, 3]", "[4, 5]"});
}

TEST_P(Errors, BroadcastMismatch) {
  const Device d = device();
  expect_error<ShapeError>(d, [&] { (void)(ones({2, 3}, d) + ones({4, 3}, d)); }, {"add", "[2, 3]", "[4, 3]"});
  expect_error<ShapeError>(d, [&] { (void)(ones({5}, d) * ones({6}, d)); }, {"mul", "[5]", "[6]"});
}

TEST_P(Errors, BadDimIsAnIndexError) {
  const Device d = device();
  auto x = ones({2, 3}, d);
  expect_error<IndexError>(d, [&] { (void)x.sum({2}); }, {"sum"});
  expect_error<IndexError>(d, [&] { (void)x.transpose(0, 2); }, {"transpose"});
  expect_error<IndexError>(d, [&] { (void)x.size(5); }, {"5"});
  expect_error<IndexError>(d, [&] { (void)x.unsqueeze(-4); }, {"unsqueeze"});
  expect_error<IndexError>(d, [&] { (void)x.select(3, 0); }, {"select"});
  expect_error<IndexError>(d, [&] { (void)cat({x, x}, 2); }, {"cat"});
  expect_error<IndexError>(d, [&] { (void)argmax(x, -3); }, {"argmax"});
}

TEST_P(Errors, OutOfRangeIndex) {
  const Device d = device();
  auto x = ones({2, 3}, d);
  expect_error<IndexError>(d, [&] { (void)x.select(0, 2); }, {"select", "2"});
  expect_error<IndexError>(d, [&] { (void)x.select(1, -4); }, {"select", "-4"});
  expect_error<IndexError>(d, [&] { (void)x[5]; }, {"5"});
  expect_error<IndexError>(d,
                           [&] {
                             (void)index_select(x, 1, tensor(std::vector<std::int64_t>{0, 3}, d)).to_vector<float>();
                           },
                           {"index_select", "3"});
  expect_error<IndexError>(
      d,
      [&] {
        (void)gather(x, 0, tensor(std::vector<std::int64_t>{0, 2, 1}, Shape{1, 3}, d)).to_vector<float>();
      },
      {"gather", "2"});
}

TEST_P(Errors, DTypeNotSupported) {
  const Device d = device();
  // where's condition must be bool.
  expect_error<DTypeError>(d, [&] { (void)where(ones({3}, d), ones({3}, d), ones({3}, d)); }, {"where", "bool", "f32"});
  // index tensors must be integers.
  expect_error<DTypeError>(d, [&] { (void)index_select(ones({3}, d), 0, zeros({1}, d)); }, {"index_select", "f32"});
  // Integer in-place true division cannot hold its float result.
  expect_error<DTypeError>(d,
                           [&] {
                             auto i = ones({3}, d, i32);
                             i /= 2;
                           },
                           {"i32"});
  // randn of an integer dtype.
  try {
    (void)randn({3}, d, i64);
    ADD_FAILURE() << "randn(i64) did not throw";
  } catch (const Error& e) {
    EXPECT_TRUE(dynamic_cast<const DTypeError*>(&e) != nullptr || dynamic_cast<const NotSupported*>(&e) != nullptr)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("i64"), std::string::npos) << e.what();
  }
}

TEST_P(Errors, ShapeOverflowIsCheckedMultiplication) {
  const Device d = device();
  const std::int64_t big = std::int64_t{1} << 40;
  expect_error<ShapeError>(d, [&] { (void)empty({big, big}, d); }, {"overflow"});
  expect_error<ShapeError>(d, [&] { (void)zeros({big, big, 4}, d); }, {"overflow"});
  expect_error<ShapeError>(d, [&] { (void)ones({3}, d).expand({big, big, 3}).contiguous(); }, {"overflow"});
  // Negative sizes are an error, not a huge allocation.
  try {
    (void)empty({-1, 3}, d);
    ADD_FAILURE() << "empty({-1, 3}) did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-1"), std::string::npos) << e.what();
  }
}

TEST_P(Errors, UndefinedTensor) {
  const Device d = device();
  Tensor u;
  EXPECT_FALSE(u.defined());
  expect_error<ValueError>(d, [&] { (void)(u + ones({2}, d)); }, {});
  expect_error<ValueError>(d, [&] { (void)(ones({2}, d) * u); }, {});
  expect_error<ValueError>(d, [&] { (void)u.sum(); }, {});
  expect_error<ValueError>(d, [&] { (void)u.shape(); }, {});
  expect_error<ValueError>(d, [&] { (void)u.to(d); }, {});
  expect_error<ValueError>(d, [&] { (void)matmul(u, u); }, {});
  expect_error<ValueError>(d, [&] { (void)u.item<float>(); }, {});
  expect_error<ValueError>(d, [&] { (void)exp(u); }, {});
  expect_error<ValueError>(d, [&] { (void)cat({ones({2}, d), u}); }, {});
  expect_error<ValueError>(d, [&] { u.add_(1); }, {});
  expect_error<ValueError>(d, [&] { (void)u.impl_ref(); }, {});
  expect_error<ValueError>(d, [&] { (void)zeros_like(u); }, {});
  EXPECT_TRUE(u.is_same(Tensor()));  // two undefined handles are the same nothing
}

TEST_P(Errors, BadArgumentValues) {
  const Device d = device();
  expect_error<ValueError>(d, [&] { (void)ones({4}, d).slice(0, 0, 4, 0); }, {"slice"});
  expect_error<ValueError>(d, [&] { (void)arange(0, 1, 0, d); }, {"arange"});
  expect_error<ValueError>(d, [&] { set_num_threads(0); }, {"set_num_threads"});
}

TEST_P(Errors, MessagesFollowTheHouseStyle) {
  // `<op>: <what is wrong>; expected <x>, got <y>`
  const Device d = device();
  try {
    (void)matmul(ones({2, 3}, d), ones({4, 5}, d));
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("matmul: ", 0), 0u) << m;
    EXPECT_NE(m.find("expected"), std::string::npos) << m;
    EXPECT_NE(m.find("got"), std::string::npos) << m;
  }
  try {
    Device bad("gpu:0");
    ADD_FAILURE() << bad;
  } catch (const DeviceError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("expected"), std::string::npos) << m;
    EXPECT_NE(m.find("got"), std::string::npos) << m;
    EXPECT_NE(m.find("gpu:0"), std::string::npos) << m;
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(Errors);

}  // namespace
