// Module::clone: every layer and a module of the user's copy themselves onto
// any device — equal values, their own storage, the same settings and
// training flags — and a module that cannot clone says how to make it.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "anvil/nn/sequence.h"
#include "device_test.h"
#include "tf32_guard.h"

namespace {

using namespace anvil;

class NnClone : public anvil::testing::DeviceTest {};

// A module of the user's: a child held as a member, a parameter held as a
// member, a setting.
class Scaled : public nn::Module {
 public:
  Scaled(std::int64_t in, std::int64_t out, double factor)
      : in_(in), out_(out), factor_(factor), fc_(register_module("fc", nn::Linear(in, out))) {
    scale_ = register_parameter("scale", randn({out}));
  }
  Tensor forward(const Tensor& x) override { return (*fc_)(x)*scale_ * factor_; }
  std::string name() const override { return "Scaled(factor=" + std::to_string(factor_) + ")"; }
  std::shared_ptr<nn::Module> clone_impl(std::optional<Device> device) const override {
    return clone_into(std::make_shared<Scaled>(in_, out_, factor_), device);
  }

 private:
  std::int64_t in_, out_;
  double factor_;
  std::shared_ptr<nn::Linear> fc_;
  Tensor scale_;
};

class NoClone : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string name() const override { return "NoClone()"; }
};

struct Case {
  std::string what;
  std::function<std::shared_ptr<nn::Module>()> make;
  Shape input;           // one input; empty: not run
  bool integer = false;  // Embedding's indices
};

std::vector<Case> cases() {
  return {
      {"Linear", [] { return std::make_shared<nn::Linear>(5, 3); }, {4, 5}},
      {"Linear(bias=false)", [] { return std::make_shared<nn::Linear>(5, 3, false); }, {4, 5}},
      {"ReLU", [] { return std::make_shared<nn::ReLU>(); }, {4, 5}},
      {"Sigmoid", [] { return std::make_shared<nn::Sigmoid>(); }, {4, 5}},
      {"Tanh", [] { return std::make_shared<nn::Tanh>(); }, {4, 5}},
      {"Softmax", [] { return std::make_shared<nn::Softmax>(0); }, {4, 5}},
      {"Flatten", [] { return std::make_shared<nn::Flatten>(2, 3); }, {2, 3, 4, 5}},
      {"Dropout", [] { return std::make_shared<nn::Dropout>(0.25); }, {}},
      {"Conv2d", [] { return std::make_shared<nn::Conv2d>(4, 6, 3, 2, 1, 1, 2); }, {2, 4, 9, 9}},
      {"Conv2d(no bias)", [] { return std::make_shared<nn::Conv2d>(2, 3, 3, 1, 1, false); }, {2, 2, 6, 6}},
      {"Conv1d", [] { return std::make_shared<nn::Conv1d>(2, 4, 3, 1, 2, 2); }, {2, 2, 10}},
      {"MaxPool2d", [] { return std::make_shared<nn::MaxPool2d>(3, 2, 1); }, {1, 2, 7, 7}},
      {"AvgPool2d", [] { return std::make_shared<nn::AvgPool2d>(2); }, {1, 2, 6, 6}},
      {"AdaptiveAvgPool2d",
       [] {
         return std::make_shared<nn::AdaptiveAvgPool2d>(std::array<std::int64_t, 2>{2, 3});
       },
       {1, 2, 7, 7}},
      {"AdaptiveMaxPool2d", [] { return std::make_shared<nn::AdaptiveMaxPool2d>(3); }, {1, 2, 7, 7}},
      {"Upsample",
       [] {
         return std::make_shared<nn::Upsample>(InterpolateOptions{.scale_factor = {2, 2}});
       },
       {1, 2, 3, 3}},
      {"BatchNorm1d", [] { return std::make_shared<nn::BatchNorm1d>(3, 1e-3, 0.3); }, {4, 3}},
      {"BatchNorm2d", [] { return std::make_shared<nn::BatchNorm2d>(2, 1e-4, 0.2); }, {2, 2, 3, 3}},
      {"BatchNorm2d(relu)",
       [] { return std::make_shared<nn::BatchNorm2d>(2, 1e-4, 0.2, Activation::ReLU); },
       {2, 2, 3, 3}},
      {"Embedding", [] { return std::make_shared<nn::Embedding>(7, 4); }, {3, 2}, true},
      {"LayerNorm", [] { return std::make_shared<nn::LayerNorm>(5, 1e-3); }, {2, 5}},
      {"RNN", [] { return std::make_shared<nn::RNN>(3, 4, 2, "relu"); }, {5, 2, 3}},
      {"GRU", [] { return std::make_shared<nn::GRU>(3, 4, 1, false, true); }, {2, 5, 3}},
      {"LSTM", [] { return std::make_shared<nn::LSTM>(3, 4, 2); }, {5, 2, 3}},
      {"MultiheadAttention", [] { return std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, true); }, {2, 3, 8}},
      {"TransformerEncoderLayer",
       [] { return std::make_shared<nn::TransformerEncoderLayer>(8, 2, 16, 0.0, "gelu", 1e-4, true, true); },
       {2, 3, 8}},
      {"Sequential",
       [] {
         auto s = std::make_shared<nn::Sequential>();
         s->add("conv", nn::Conv2d(1, 2, 3)).add("bn", nn::BatchNorm2d(2)).add("relu", nn::ReLU());
         s->add("flat", nn::Flatten()).add("fc", nn::Linear(2 * 4 * 4, 3));
         return s;
       },
       {2, 1, 6, 6}},
      {"user module", [] { return std::make_shared<Scaled>(4, 3, 0.5); }, {2, 4}},
  };
}

// Whatever the values were made of, they differ from a fresh module's: the
// clone must carry them over, not its own initialisation.
void perturb(nn::Module& m) {
  NoGradGuard no_grad;
  for (Tensor t : m.parameters()) t.copy_(t + 0.125);
  for (auto& [n, t] : m.named_buffers())
    if (is_floating(t.dtype())) t.copy_(t + 0.5);
}

TEST_P(NnClone, EveryLayerClonesDeeply) {
  const Device d = device();
  // The twin's outputs are compared with the original's on the CPU: strict
  // f32 on CUDA, whose cuDNN convolutions and recurrent layers take TF32 by
  // default (the H200 run's GRU and LSTM differed by more than 1e-4).
  const anvil::testing::CudnnTf32Guard strict(false);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    manual_seed(1);
    auto original = c.make();
    perturb(*original);
    original->eval();  // a flag the fresh module does not have
    auto twin = original->clone(d);
    ASSERT_NE(twin.get(), original.get());
    EXPECT_EQ(twin->name(), original->name());  // the settings (stride, eps, momentum, ...)
    EXPECT_FALSE(twin->is_training());
    for (const auto& [n, child] : twin->named_children()) EXPECT_FALSE(child->is_training()) << n;
    const auto mine = original->named_parameters(), theirs = twin->named_parameters();
    auto buffers = original->named_buffers(), twin_buffers = twin->named_buffers();
    ASSERT_EQ(mine.size(), theirs.size());
    ASSERT_EQ(buffers.size(), twin_buffers.size());
    auto all = mine, all_twin = theirs;
    all.insert(all.end(), buffers.begin(), buffers.end());
    all_twin.insert(all_twin.end(), twin_buffers.begin(), twin_buffers.end());
    for (std::size_t k = 0; k < all.size(); ++k) {
      const auto& [n, t] = all[k];
      const auto& [tn, u] = all_twin[k];
      EXPECT_EQ(tn, n);
      EXPECT_EQ(u.device(), d) << n;
      EXPECT_EQ(u.requires_grad(), t.requires_grad()) << n;
      EXPECT_TRUE(u.is_leaf()) << n;
      EXPECT_FALSE(u.is_same(t)) << n;
      EXPECT_FALSE(u.shares_storage(t)) << n;
      EXPECT_TRUE(equal(u.cpu(), t.cpu())) << n;
    }
    if (!c.input.size()) continue;
    manual_seed(2);
    const Tensor x = c.integer ? randint(0, 7, c.input) : randn(c.input);
    const Tensor want = (*original)(x.to(original->devices().empty() ? cpu() : original->devices()[0]));
    const Tensor got = (*twin)(x.to(d));
    EXPECT_TRUE(allclose(got.cpu(), want.cpu(), 1e-4, 1e-5)) << c.what;
    // Independent: changing the twin leaves the original as it was.
    if (!theirs.empty()) {
      const Tensor before = mine[0].second.cpu().clone();
      {
        NoGradGuard no_grad;
        Tensor t = theirs[0].second;
        t.copy_(t * 0);
      }
      EXPECT_TRUE(equal(mine[0].second.cpu(), before));
    }
  }
}

TEST_P(NnClone, WithoutADeviceEachTensorStaysWhereItIs) {
  auto m = std::make_shared<nn::Sequential>(nn::Linear(3, 2), nn::BatchNorm1d(2));
  m->to(device());
  auto twin = m->clone();
  EXPECT_EQ(twin->devices(), std::vector<Device>{device()});
  for (const Tensor& t : twin->parameters()) EXPECT_FALSE(t.shares_storage(m->parameters()[0]));
}

TEST_P(NnClone, GradientsAreNotCopiedAndTrainingFlagsAreKeptPerChild) {
  auto m = std::make_shared<nn::Sequential>(nn::Linear(3, 2), nn::Dropout(0.5), nn::Linear(2, 1));
  m->to(device());
  (*m)(randn({4, 3}, device())).sum().backward();
  (*m)[1].eval();  // one child only
  auto twin = m->clone(device());
  for (const Tensor& t : twin->parameters()) EXPECT_FALSE(t.grad().defined());
  EXPECT_TRUE(twin->is_training());
  const auto kids = twin->named_children();
  EXPECT_TRUE(kids[0].second->is_training());
  EXPECT_FALSE(kids[1].second->is_training());
  EXPECT_TRUE(kids[2].second->is_training());
}

TEST(NnCloneErrors, AModuleThatCannotCloneSaysHow) {
  auto m = std::make_shared<nn::Sequential>(nn::Linear(2, 2), NoClone());
  try {
    m->clone();
    ADD_FAILURE() << "expected NotSupported";
  } catch (const NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("clone: NoClone() does not know how to copy itself"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("clone_impl"), std::string::npos) << e.what();
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(NnClone);

}  // namespace
