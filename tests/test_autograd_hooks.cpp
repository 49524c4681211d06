// The post-accumulate-grad hook and queue_callback (what DDP overlaps
// communication with): when hooks run, what they see, removal, errors.
#include <gtest/gtest.h>

#include <vector>

#include "device_test.h"

namespace {

using namespace anvil;

class GradHooks : public anvil::testing::DeviceTest {};

TEST_P(GradHooks, RunOnceAfterAccumulationWithTheFinalGradient) {
  const Device d = device();
  auto w = tensor({1.f, 2.f, 3.f}, d).requires_grad_();
  auto x = tensor({4.f, 5.f, 6.f}, d);
  std::vector<std::vector<float>> seen;
  auto h = autograd::register_post_accumulate_grad_hook(w, [&](const Tensor& leaf) {
    EXPECT_TRUE(leaf.is_same(w));
    seen.push_back(leaf.grad().to_vector<float>());
  });
  EXPECT_TRUE(h.active());
  // w is used twice: the engine sums both contributions first, so the hook
  // runs once, with the whole gradient.
  ((w * x).sum() + (w * w).sum()).backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<float>{6.f, 9.f, 12.f}));
  // A second backward accumulates: the hook sees the sum.
  (w * x).sum().backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<float>{10.f, 14.f, 18.f}));
  h.remove();
  EXPECT_FALSE(h.active());
  h.remove();  // twice is fine
  (w * x).sum().backward();
  EXPECT_EQ(seen.size(), 2u) << "a removed hook does not run";
}

TEST_P(GradHooks, OrderOfLeavesFollowsBackwardAndCallbacksRunLast) {
  const Device d = device();
  auto a = tensor({1.f, 2.f}, d).requires_grad_();
  auto b = tensor({3.f, 4.f}, d).requires_grad_();
  std::vector<std::string> events;
  auto ha = autograd::register_post_accumulate_grad_hook(a, [&](const Tensor&) {
    events.push_back("a");
    autograd::queue_callback([&] {
      events.push_back("end");
      EXPECT_TRUE(a.grad().defined() && b.grad().defined()) << "callbacks run after every gradient is in place";
    });
  });
  auto hb = autograd::register_post_accumulate_grad_hook(b, [&](const Tensor&) { events.push_back("b"); });
  auto hb2 = autograd::register_post_accumulate_grad_hook(b, [&](const Tensor&) { events.push_back("b2"); });
  // b is used last in forward, so its gradient is ready first.
  (((a * 2.f).relu() * 3.f).sum() * b.sum()).backward();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events.back(), "end");
  const auto pos = [&](const std::string& s) { return std::find(events.begin(), events.end(), s) - events.begin(); };
  EXPECT_LT(pos("b"), pos("b2")) << "hooks of one leaf run in registration order";
  ha.remove();
  hb.remove();
  hb2.remove();
}

TEST_P(GradHooks, AHookThatThrowsStopsBackwardWithItsError) {
  const Device d = device();
  auto w = tensor({1.f}, d).requires_grad_();
  auto h = autograd::register_post_accumulate_grad_hook(w, [](const Tensor&) { throw ValueError("from the hook"); });
  EXPECT_THROW((w * 2.f).sum().backward(), ValueError);
  h.remove();
  EXPECT_NO_THROW((w * 2.f).sum().backward());
}

TEST(GradHooksErrors, RejectsNonLeavesAndCallbacksOutsideBackward) {
  auto w = tensor({1.f, 2.f}).requires_grad_();
  auto y = w * 2.f;
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(y, [](const Tensor&) {}), ValueError);
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(tensor({1.f}), [](const Tensor&) {}), ValueError);
  EXPECT_THROW(autograd::register_post_accumulate_grad_hook(w, {}), ValueError);
  EXPECT_THROW(autograd::queue_callback([] {}), ValueError);
  try {
    autograd::register_post_accumulate_grad_hook(y, [](const Tensor&) {});
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a leaf tensor that requires grad"), std::string::npos) << e.what();
  }
}

TEST(GradHooksErrors, HandleOutlivesTheLeaf) {
  autograd::HookHandle h;
  {
    auto w = tensor({1.f}).requires_grad_();
    h = autograd::register_post_accumulate_grad_hook(w, [](const Tensor&) {});
    EXPECT_TRUE(h.active());
  }
  EXPECT_FALSE(h.active());
  h.remove();
}

ANVIL_INSTANTIATE_DEVICE_TEST(GradHooks);

}  // namespace
