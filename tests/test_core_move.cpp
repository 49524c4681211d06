// Moving between devices (DESIGN §4.6) and the device check (§4.5): to() is
// the tensor itself when already there, copy_to() always copies, and every
// op that mixes devices throws DeviceMismatch before doing anything.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;
using ref::Domain;
using ref::Layout;

class Move : public anvil::testing::DeviceTest {};

TEST_P(Move, ToSameDeviceIsTheSameTensor) {
  const Device d = device();
  auto x = rand({3, 4}, d);
  EXPECT_TRUE(x.to(d).is_same(x));
  EXPECT_TRUE(x.to(d).to(d).is_same(x));
  EXPECT_TRUE(x.to(d, f32).is_same(x));
  auto v = x.t();
  EXPECT_TRUE(v.to(d).is_same(v));  // views too
  if (d.is_cpu()) {
    EXPECT_TRUE(x.cpu().is_same(x));
  }
}

TEST_P(Move, CopyToAlwaysCopies) {
  const Device d = device();
  const auto x = ref::make_input({5, 7}, Layout::Contiguous, f32, d, Domain{-1, 1}, 1);
  auto c = x.t.copy_to(d);
  EXPECT_FALSE(c.is_same(x.t));
  EXPECT_FALSE(c.shares_storage(x.t));
  EXPECT_EQ(c.device(), d);
  EXPECT_EQ(c.dtype(), f32);
  EXPECT_TRUE(ref::exact(c, x.r));
  c.fill_(0);  // independent
  EXPECT_TRUE(ref::exact(x.t, x.r));
  // Views are copied in logical order, contiguously.
  auto tv = x.t.t().copy_to(d);
  EXPECT_TRUE(tv.is_contiguous());
  EXPECT_TRUE(ref::exact(tv, ref::transpose(x.r, 0, 1)));
  auto sv = x.t.slice(1, 1, 7, 3).copy_to(cpu());
  EXPECT_EQ(sv.device(), cpu());
  EXPECT_TRUE(ref::exact(sv, ref::slice(x.r, 1, 1, 7, 3)));
}

TEST_P(Move, CpuAndBack) {
  const Device d = device();
  for (DType dt : {f32, f64, i32, i64, u8, boolean}) {
    SCOPED_TRACE(to_string(dt));
    const auto x = ref::make_input({3, 1023}, Layout::Transposed, dt, d, Domain{0, 100, true}, 2);
    auto h = x.t.cpu();
    EXPECT_EQ(h.device(), cpu());
    EXPECT_EQ(h.dtype(), dt);
    EXPECT_TRUE(ref::exact(h, x.r));
    auto back = h.to(d);
    EXPECT_EQ(back.device(), d);
    EXPECT_TRUE(ref::exact(back, x.r));
    if (!d.is_cpu()) {
      EXPECT_FALSE(h.shares_storage(x.t));
      EXPECT_FALSE(back.is_same(x.t));
    }
    // to(device, dtype) does both.
    auto both = x.t.to(cpu(), f64);
    EXPECT_EQ(both.device(), cpu());
    EXPECT_EQ(both.dtype(), f64);
    EXPECT_TRUE(ref::exact(both, x.r));
  }
  // Zero-size and 0-dim tensors move too.
  EXPECT_EQ(zeros({0, 3}, d).cpu().shape(), (Shape{0, 3}));
  EXPECT_EQ(full({}, 2.5, d).cpu().item<float>(), 2.5f);
}

TEST(MoveBetweenDevices, EveryPair) {
  const auto all = anvil::testing::test_devices();
  for (Device src : all)
    for (Device dst : all) {
      SCOPED_TRACE(src.str() + " -> " + dst.str());
      const auto x = ref::make_input({33, 17}, Layout::Stepped, f32, src, Domain{-1, 1}, 3);
      auto y = x.t.to(dst);
      EXPECT_EQ(y.device(), dst);
      EXPECT_TRUE(ref::exact(y, x.r));
      EXPECT_EQ(y.is_same(x.t), src == dst);
      auto z = x.t.copy_to(dst);
      EXPECT_EQ(z.device(), dst);
      EXPECT_FALSE(z.shares_storage(x.t));
      EXPECT_TRUE(ref::exact(z, x.r));
      EXPECT_TRUE(ref::exact(z.to(src), x.r));
    }
}

// ---- the device check -------------------------------------------------------------------

struct MixedOp {
  const char* name;
  std::function<void(const Tensor&, const Tensor&)> run;
};

const std::vector<MixedOp>& mixed_ops() {
  static const std::vector<MixedOp> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { (void)add(a, b); }},
      {"add", [](const Tensor& a, const Tensor& b) { (void)(a + b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { (void)(a - b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { (void)(a * b); }},
      {"div", [](const Tensor& a, const Tensor& b) { (void)(a / b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { (void)pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { (void)maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { (void)minimum(a, b); }},
      {"eq", [](const Tensor& a, const Tensor& b) { (void)(a == b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { (void)lt(a, b); }},
      {"matmul", [](const Tensor& a, const Tensor& b) { (void)matmul(a, b); }},
      {"mm", [](const Tensor& a, const Tensor& b) { (void)mm(a, b); }},
      {"dot", [](const Tensor& a, const Tensor& b) { (void)dot(a.flatten(), b.flatten()); }},
      {"cat",
       [](const Tensor& a, const Tensor& b) {
         (void)cat({a, b});
       }},
      {"stack",
       [](const Tensor& a, const Tensor& b) {
         (void)stack({a, b});
       }},
      {"where", [](const Tensor& a, const Tensor& b) { (void)where(a > 0, a, b); }},
      {"add",
       [](const Tensor& a, const Tensor& b) {  // add_
         Tensor c = a;
         c.add_(b);
       }},
      {"copy",
       [](const Tensor& a, const Tensor& b) {  // copy_
         Tensor c = a;
         c.copy_(b);
       }},
      {"index_select", [](const Tensor& a, const Tensor& b) { (void)index_select(a, 0, b.select(0, 0).to(i64)); }},
      {"gather", [](const Tensor& a, const Tensor& b) { (void)gather(a, 0, b.to(i64)); }},
      {"add",
       [](const Tensor& a, const Tensor& b) {  // add_out
         Tensor out = empty_like(a);
         add_out(out, a, b);
       }},
  };
  return ops;
}

// DESIGN §4.5, for every pair of distinct devices (none when only the CPU is
// present; every pair once OpenCL or CUDA devices exist).
TEST(DeviceMismatchCheck, EveryOpEveryPairOfDevices) {
  const auto all = anvil::testing::test_devices();
  for (Device d0 : all)
    for (Device d1 : all) {
      if (d0 == d1) continue;
      SCOPED_TRACE(d0.str() + " vs " + d1.str());
      const Tensor a = zeros({2, 2}, d0), b = zeros({2, 2}, d1);
      const std::string want = "add: all tensors must be on one device; argument 0 is on " + d0.str() +
                               ", argument 1 is on " + d1.str() + "; move one with .to(" + d0.str() + ")";
      try {
        (void)add(a, b);
        ADD_FAILURE() << "no DeviceMismatch";
      } catch (const DeviceMismatch& e) {
        EXPECT_EQ(std::string(e.what()), want);
      }
      for (const auto& op : mixed_ops()) {
        SCOPED_TRACE(op.name);
        Ledger scope;
        try {
          op.run(a, b);
          ADD_FAILURE() << "no DeviceMismatch";
        } catch (const DeviceMismatch& e) {
          const std::string m = e.what();
          EXPECT_EQ(m.rfind(op.name, 0), 0u) << "the message should start with the op's name: " << m;
          EXPECT_NE(m.find(d0.str()), std::string::npos) << m;
          EXPECT_NE(m.find(d1.str()), std::string::npos) << m;
          EXPECT_NE(m.find(".to("), std::string::npos) << m;
        } catch (const std::exception& e) {
          ADD_FAILURE() << "wrong exception type: " << e.what();
        }
        // Checked before anything is enqueued: no copies (b.to(i64) for the
        // index ops is a same-device conversion, which the ledger does not
        // count as a transfer between devices).
        EXPECT_EQ(scope.report().copies(d0, d1) + scope.report().copies(d1, d0), 0u);
      }
      // Scalars are not tensors and need no device.
      EXPECT_NO_THROW((void)(a + 2));
      EXPECT_NO_THROW((void)(2.5 * b));
    }
}

TEST(DeviceMismatchCheck, SameTypeDifferentIndex) {
  // cuda:0 vs cuda:1, opencl:0 vs opencl:1: checked like any other pair.
  const auto all = anvil::testing::test_devices();
  int pairs = 0;
  for (Device d0 : all)
    for (Device d1 : all) {
      if (d0.type() != d1.type() || d0 == d1) continue;
      ++pairs;
      SCOPED_TRACE(d0.str() + " vs " + d1.str());
      EXPECT_THROW((void)(ones({3}, d0) * ones({3}, d1)), DeviceMismatch);
    }
  SUCCEED() << pairs << " same-type pairs checked";
}

TEST_P(Move, OpsKeepOperandsDevice) {
  const Device d = device();
  auto a = rand({4, 4}, d), b = rand({4, 4}, d);
  for (const auto& op : mixed_ops()) {
    SCOPED_TRACE(op.name);
    EXPECT_NO_THROW(op.run(a, b));
  }
  EXPECT_EQ(matmul(a, b).device(), d);
  EXPECT_EQ(where(a > b, a, b).device(), d);
  EXPECT_EQ(cat({a, b}).device(), d);
}

ANVIL_INSTANTIATE_DEVICE_TEST(Move);

}  // namespace
