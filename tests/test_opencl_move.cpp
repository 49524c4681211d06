// Moving data between cpu, opencl:0 and opencl:1 (DESIGN §4.5, §4.6, §4.8):
// mixed-device ops fail before anything is enqueued; to() aliases and
// copy_to() copies; every pair of devices round-trips bit-exactly; copies
// within one OpenCL context stay off the host; printing is one copy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "opencl_test_support.h"
#ifdef ANVIL_WITH_OPENCL
#include "backends/opencl/testing.h"
#endif

namespace {

using namespace anvil;
using anvil::testing::opencl_count;

std::vector<Device> devices_under_test() {
  std::vector<Device> ds{cpu()};
  for (int i = 0; i < opencl_count() && i < 2; ++i) ds.emplace_back(DeviceType::OpenCL, i);
  return ds;
}

// Commands enqueued on every OpenCL device so far.
std::vector<unsigned long long> enqueued_everywhere() {
  std::vector<unsigned long long> v;
#ifdef ANVIL_WITH_OPENCL
  for (int i = 0; i < opencl_count(); ++i) v.push_back(opencl::testing::commands_enqueued(i));
#endif
  return v;
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
};

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }},
      {"matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }},
  };
  return cases;
}

TEST(OpenCLMove, MixedDevicesRaiseDeviceMismatchBeforeEnqueueing) {
  ANVIL_REQUIRE_OPENCL(1);
  std::vector<std::pair<Device, Device>> pairs;
  const auto ds = devices_under_test();
  for (const Device& a : ds)
    for (const Device& b : ds)
      if (a != b) pairs.emplace_back(a, b);
  for (const auto& [da, db] : pairs) {
    const Tensor a = ones({4, 4}, da), b = ones({4, 4}, db);
    synchronize(da);
    synchronize(db);
    for (const BinaryCase& c : binary_cases()) {
      SCOPED_TRACE(std::string(c.name) + " " + da.str() + " vs " + db.str());
      const auto before = enqueued_everywhere();
      try {
        (void)c.fn(a, b);
        ADD_FAILURE() << "no error";
      } catch (const DeviceMismatch& e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind(c.name, 0), 0u) << m;
        EXPECT_NE(m.find(da.str()), std::string::npos) << m;
        EXPECT_NE(m.find(db.str()), std::string::npos) << m;
        EXPECT_NE(m.find(".to("), std::string::npos) << "the message says how to fix it: " << m;
      }
      EXPECT_EQ(enqueued_everywhere(), before) << "nothing may be enqueued on any device";
    }
  }
}

// A layer's forward is ops on its parameters and its input, so a model on
// one device fed data on another fails the same way, naming both devices.
TEST(OpenCLMove, LayerForwardWithInputOnAnotherDeviceIsAMismatch) {
  ANVIL_REQUIRE_OPENCL(1);
  for (const Device& model_device : devices_under_test()) {
    nn::Sequential net{nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 2)};
    net.to(model_device);
    for (const Device& input_device : devices_under_test()) {
      if (input_device == model_device) continue;
      SCOPED_TRACE("model on " + model_device.str() + ", input on " + input_device.str());
      const Tensor x = ones({5, 4}, input_device);
      synchronize(input_device);
      const auto before = enqueued_everywhere();
      try {
        (void)net(x);
        ADD_FAILURE() << "no error";
      } catch (const DeviceMismatch& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(model_device.str()), std::string::npos) << m;
        EXPECT_NE(m.find(input_device.str()), std::string::npos) << m;
        EXPECT_NE(m.find(".to("), std::string::npos) << m;
      }
      EXPECT_EQ(enqueued_everywhere(), before) << "nothing may be enqueued on any device";
    }
    EXPECT_EQ(net(ones({5, 4}, model_device)).device(), model_device) << "the model still works";
  }
}

TEST(OpenCLMove, ToAliasesAndCopyToCopies) {
  ANVIL_REQUIRE_OPENCL(1);
  for (const Device& d : devices_under_test()) {
    SCOPED_TRACE(d.str());
    const Tensor x = arange(6, d, f32).reshape({2, 3});
    EXPECT_TRUE(x.to(d).is_same(x));
    const Tensor c = x.copy_to(d);
    EXPECT_FALSE(c.is_same(x));
    EXPECT_FALSE(c.shares_storage(x));
    EXPECT_EQ(c.device(), d);
    EXPECT_EQ(c.to_vector<float>(), x.to_vector<float>());
    for (const Device& other : devices_under_test()) {
      if (other == d) continue;
      const Tensor y = x.to(other);
      EXPECT_FALSE(y.is_same(x));
      EXPECT_EQ(y.device(), other);
      EXPECT_TRUE(y.to(other).is_same(y));
    }
  }
}

// Values that expose any conversion on the way: NaN payloads, ±inf, -0,
// denormals, extremes of each integer type.
Tensor tricky(DType t, Device d) {
  switch (t) {
    case DType::F32: {
      std::vector<float> v = {0.0f,
                              -0.0f,
                              1.5f,
                              -3.25e-38f,
                              std::numeric_limits<float>::denorm_min(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::max(),
                              1e-7f,
                              -42.0f};
      return tensor(v, d);
    }
    case DType::F64: {
      std::vector<double> v = {0.0,
                               -0.0,
                               1.0 / 3.0,
                               std::numeric_limits<double>::denorm_min(),
                               std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN(),
                               std::numeric_limits<double>::lowest(),
                               1e300};
      return tensor(v, d);
    }
    case DType::I32:
      return tensor(std::vector<std::int32_t>{0, -1, 2147483647, -2147483647 - 1, 12345}, d);
    case DType::I64:
      return tensor(std::vector<std::int64_t>{0, -1, std::numeric_limits<std::int64_t>::max(),
                                              std::numeric_limits<std::int64_t>::min(), 1ll << 40},
                    d);
    case DType::U8:
      return tensor(std::vector<std::uint8_t>{0, 1, 127, 128, 255}, d);
    case DType::Bool:
      return tensor(std::vector<std::uint8_t>{1, 0, 0, 1, 1}, d).to(boolean);
    case DType::F16:
    case DType::BF16: {
      // ±0, a subnormal, ±inf, a signalling and a quiet NaN with payloads, the largest finite
      const std::vector<std::uint16_t> bits =
          t == DType::F16
              ? std::vector<std::uint16_t>{0x0000, 0x8000, 0x0001, 0x7c00, 0xfc00, 0x7c01, 0xfe55, 0x7bff, 0x3c00}
              : std::vector<std::uint16_t>{0x0000, 0x8000, 0x0001, 0x7f80, 0xff80, 0x7f81, 0xffd5, 0x7f7f, 0x3f80};
      return from_host(bits.data(), {static_cast<std::int64_t>(bits.size())}, t, d);
    }
  }
  return {};
}

// The raw bytes of a tensor, read on the host.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor h = t.cpu().contiguous();
  const auto* p = static_cast<const unsigned char*>(h.raw_data_ptr());
  return std::vector<unsigned char>(p, p + h.nbytes());
}

TEST(OpenCLMove, EveryPairOfDevicesRoundTripsExactly) {
  ANVIL_REQUIRE_OPENCL(1);
  const auto ds = devices_under_test();
  for (DType t : {f32, f64, f16, bf16, i32, i64, u8, boolean}) {
    for (const Device& a : ds)
      for (const Device& b : ds) {
        if (a == b) continue;
        if ((t == f64) && (!a.is_cpu() && !properties(a).fp64)) continue;
        if ((t == f64) && (!b.is_cpu() && !properties(b).fp64)) continue;
        SCOPED_TRACE(std::string(to_string(t)) + " " + a.str() + " -> " + b.str() + " -> " + a.str());
        const Tensor x = tricky(t, a);
        const Tensor y = x.to(b);
        const Tensor back = y.to(a);
        EXPECT_EQ(bytes_of(back), bytes_of(x));
        EXPECT_EQ(bytes_of(y), bytes_of(x));
        // A strided view moves too.
        const Tensor v = x.slice(0, 1, x.numel(), 2);
        EXPECT_EQ(bytes_of(v.to(b)), bytes_of(v));
      }
  }
}

TEST(OpenCLMove, CopiesWithinOneContextStayOnTheDevice) {
  ANVIL_REQUIRE_OPENCL(2);
  const Device d0(DeviceType::OpenCL, 0), d1(DeviceType::OpenCL, 1);
  const Tensor x = arange(1000, d0, f32);
  synchronize(d0);
  Ledger scope;
  const Tensor y = x.to(d1);
  const LedgerReport r = scope.report();
  EXPECT_EQ(r.copies(d0, d1), 1u);
  EXPECT_EQ(r.bytes(d0, d1), 4000u);
  EXPECT_EQ(r.copies(d0, cpu()), 0u) << r;
  EXPECT_EQ(r.copies(cpu(), d1), 0u) << r;
  EXPECT_EQ(r.total_copies(), 1u) << r;
  // Work queued on the source after the copy does not disturb it.
  const Tensor z = x * 2;
  EXPECT_EQ(y.sum().item<float>(), 499500.0f);
  EXPECT_EQ(z.sum().item<float>(), 999000.0f);
}

TEST(OpenCLMove, PrintingIsExactlyOneDeviceToHostCopy) {
  ANVIL_REQUIRE_OPENCL(1);
  for (int i = 0; i < std::min(opencl_count(), 2); ++i) {
    const Device d(DeviceType::OpenCL, i);
    const Tensor x = ones({2, 3}, d);
    synchronize(d);
    Ledger scope;
    std::ostringstream os;
    os << x;
    const LedgerReport r = scope.report();
    EXPECT_EQ(r.copies(d, cpu()), 1u) << r;
    EXPECT_EQ(r.bytes(d, cpu()), 24u) << r;
    EXPECT_EQ(r.total_copies(), 1u) << r;
    EXPECT_EQ(os.str(), "tensor([[1., 1., 1.],\n        [1., 1., 1.]], device='" + d.str() + "')");
  }
}

}  // namespace
