// The multi-tensor optimiser steps (Note [Multi-tensor optimiser steps] in
// core/backend.h): foreach and per-parameter updates give the same bits,
// and a step over ResNet-18's 76 parameters is a few launches.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "device_test.h"
#include "env_guard.h"

using namespace anvil;
using anvil::testing::EnvGuard;

namespace {

class Optim : public anvil::testing::DeviceTest {};

// Whether two tensors hold the same bits (NaNs included).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  return std::memcmp(x.raw_data_ptr(), y.raw_data_ptr(), x.nbytes()) == 0;
}

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>, bool foreach)>;

MakeOptimizer sgd(optim::SGDOptions o) {
  return [o](std::vector<Tensor> p, bool foreach) mutable {
    o.foreach = foreach;
    return std::make_unique<optim::SGD>(std::move(p), o);
  };
}
MakeOptimizer adam(optim::AdamOptions o, bool w = false) {
  return [o, w](std::vector<Tensor> p, bool foreach) mutable -> std::unique_ptr<optim::Optimizer> {
    o.foreach = foreach;
    if (w) return std::make_unique<optim::AdamW>(std::move(p), o);
    return std::make_unique<optim::Adam>(std::move(p), o);
  };
}

const std::vector<std::pair<std::string, MakeOptimizer>>& cases() {
  static const std::vector<std::pair<std::string, MakeOptimizer>> c = {
      {"sgd", sgd({.lr = 0.1})},
      {"sgd weight_decay", sgd({.lr = 0.1, .weight_decay = 0.01})},
      {"sgd momentum dampening", sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.25})},
      {"sgd nesterov weight_decay", sgd({.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true})},
      {"adam", adam({.lr = 0.01})},
      {"adam weight_decay", adam({.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.05})},
      {"adamw", adam({.lr = 0.01, .weight_decay = 0.05}, true)},
  };
  return c;
}

// Parameters of mixed shapes (a scalar, an empty one, odd sizes, more than
// one launch's worth) and dtypes, gradients for three steps, and one
// parameter left without a gradient in the second step.
TEST_P(Optim, ForeachAndPerParameterStepsGiveTheSameBits) {
  const Device d = device();
  std::vector<DType> dtypes{f32, f16, bf16};
  if (properties(d).fp64) dtypes.push_back(f64);
  const std::vector<Shape> shapes{{37, 29}, {29}, {}, {0}, {3, 1, 5}, {1000}, {7, 7}, {64}};
  manual_seed(5);
  std::vector<Tensor> init;
  std::vector<std::vector<Tensor>> grads(3);
  for (int rep = 0; rep < 6; ++rep)
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      const DType t = dtypes[(rep + k) % dtypes.size()];
      init.push_back(randn(shapes[k], d, t));
      for (auto& g : grads) g.push_back(randn(shapes[k], d, t));
    }
  ASSERT_GT(init.size(), 40u);  // more than one launch's 32 tensors per dtype group
  for (const auto& [what, make] : cases()) {
    const auto train = [&](bool foreach) {
      std::vector<Tensor> params;
      for (const Tensor& p : init) params.push_back(p.clone().requires_grad_());
      auto opt = make(params, foreach);
      for (std::size_t s = 0; s < grads.size(); ++s) {
        for (std::size_t i = 0; i < params.size(); ++i)
          params[i].set_grad(s == 1 && i == 5 ? Tensor{} : grads[s][i].clone());
        opt->step();
      }
      auto out = opt->state_dict();
      for (std::size_t i = 0; i < params.size(); ++i) out["param." + std::to_string(i)] = params[i].detach();
      return out;
    };
    const auto together = train(true), apart = train(false);
    ASSERT_EQ(together.size(), apart.size()) << what;
    for (const auto& [key, value] : apart) {
      ASSERT_TRUE(together.count(key)) << what << " " << key;
      EXPECT_TRUE(same_bits(together.at(key), value))
          << what << " " << key << " on " << d << " (" << value.dtype() << ")";
    }
  }
}

// foreach's state lives flat, and a checkpoint of it loads into an
// optimiser that continues as the original does.
TEST_P(Optim, ForeachStateSavesAndLoads) {
  const Device d = device();
  manual_seed(9);
  std::vector<Tensor> a{randn({5, 3}, d).requires_grad_(), randn({7}, d).requires_grad_()};
  optim::Adam oa(a, {.lr = 0.1});
  for (Tensor& p : a) p.set_grad(ones_like(p));
  oa.step();
  // A copy of the parameters and of the state after that step.
  std::vector<Tensor> b{a[0].detach().clone().requires_grad_(), a[1].detach().clone().requires_grad_()};
  optim::Adam ob(b, {.lr = 0.1});
  ob.load_state_dict(oa.state_dict());
  for (int s = 0; s < 2; ++s) {
    for (std::size_t i = 0; i < 2; ++i) {
      a[i].set_grad(full_like(a[i], 0.5 + s));
      b[i].set_grad(full_like(b[i], 0.5 + s));
    }
    oa.step();
    ob.step();
  }
  for (std::size_t i = 0; i < 2; ++i) EXPECT_TRUE(same_bits(a[i].detach(), b[i].detach())) << i;
}

// ResNet-18's 76 parameters of mixed sizes.
std::vector<Tensor> resnet18_like(Device d) {
  std::vector<Tensor> params;
  const std::int64_t sizes[] = {
      1728,   64,  64,      64,  36864,  64,  64,      64,  36864,   64,  64,     64,  36864,   64,  64,     64,
      36864,  64,  64,      64,  73728,  128, 128,     128, 147456,  128, 128,    128, 8192,    128, 147456, 128,
      128,    128, 147456,  128, 128,    128, 294912,  256, 256,     256, 589824, 256, 256,     256, 32768,  256,
      589824, 256, 256,     256, 589824, 256, 256,     256, 1179648, 512, 512,    512, 2359296, 512, 512,    512,
      131072, 512, 2359296, 512, 512,    512, 2359296, 512, 512,     512, 5120,   10};
  static_assert(sizeof(sizes) / sizeof(sizes[0]) == 76);
  for (std::int64_t n : sizes) params.push_back(zeros({n}, d).requires_grad_());
  return params;
}

// An SGD or Adam step over 76 parameters: at most ceil(76 / 32) = 3
// launches on a device, one parallel region on the CPU; zero_grad none.
// Every element of param, grad and state is read once and param and state
// written once (Note [What a launch is]; the table is 4 N + 1 i64).
TEST_P(Optim, AStepOverResNet18sParametersIsAFewLaunches) {
  const Device d = device();
  std::vector<Tensor> params = resnet18_like(d);
  std::uint64_t bytes = 0;
  for (const Tensor& p : params) bytes += p.nbytes();
  const std::uint64_t table = (4 * params.size() + 1) * 8;
  const std::uint64_t bound = d.is_cpu() ? 1 : 3;
  for (int which = 0; which < 3; ++which) {
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0) opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    if (which == 1) opt = std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 0.1});
    if (which == 2) opt = std::make_unique<optim::AdamW>(params, optim::AdamOptions{.lr = 0.1});
    for (int step = 0; step < 3; ++step) {
      for (Tensor& p : params) p.set_grad(ones_like(p));
      synchronize(d);
      Ledger scope;
      opt->step();
      synchronize(d);
      const LedgerReport r = scope.report();
      SCOPED_TRACE(::testing::Message() << "optimiser " << which << " step " << step << " on " << d << "\n" << r);
      // The first step also creates the state (Adam: two zero fills) and the table (a copy).
      EXPECT_LE(r.launches(d), bound + (step == 0 && which > 0 ? 2 : 0));
      if (step > 0) {
        EXPECT_EQ(r.launches(d), bound);
        EXPECT_EQ(r.total_copies(), 0u);
        EXPECT_EQ(r.bytes_read(d), (which == 0 ? 3 : 4) * bytes + table);
        EXPECT_EQ(r.bytes_written(d), (which == 0 ? 2 : 3) * bytes);
        EXPECT_EQ(r.device_work(d).allocations, 0u);
      }
    }
    Ledger scope;
    opt->zero_grad();
    EXPECT_EQ(scope.report().launches(d), 0u) << "zero_grad sets the gradients to none";
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(Optim);

}  // namespace
