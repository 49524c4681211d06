// Channels-last (issue 38 item 3), on every device: the memory format API as
// PyTorch has it (contiguous(format), is_contiguous(format),
// suggest_memory_format, Module::to(format)); elementwise ops, convolution
// and pooling keep their input's layout; values, gradients, an SGD step with
// momentum and a checkpoint are the same in both formats.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "anvil/nn/sequence.h"
#include "device_test.h"
#include "env_guard.h"

namespace {

using namespace anvil;
constexpr auto CL = MemoryFormat::ChannelsLast;

class MemoryFormatTest : public anvil::testing::DeviceTest {};

std::map<std::string, Tensor> by_name(const std::vector<std::pair<std::string, Tensor>>& named) {
  return {named.begin(), named.end()};
}

void expect_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_TRUE(got.cpu().to(f32).allclose(want.cpu().to(f32), tol, tol))
      << "max |diff| " << (got.cpu().to(f32) - want.cpu().to(f32)).abs().max().item<float>();
}

TEST_P(MemoryFormatTest, ContiguousChannelsLastLaysOutNhwc) {
  const Tensor x = randn({2, 3, 4, 5}, device());
  const Tensor y = x.contiguous(CL);
  EXPECT_EQ(y.strides(), Strides({60, 1, 15, 3}));
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_TRUE(y.equal(x));
  EXPECT_TRUE(y.is_contiguous(CL));
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_EQ(y.suggest_memory_format(), CL);
  EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_TRUE(y.contiguous(CL).is_same(y));  // already laid out so: no copy
  const Tensor back = y.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_TRUE(back.equal(x));
  // The memory order is NHWC: element (n, c, h, w) at n*HWC + h*WC + w*C + c.
  const std::vector<float> v = x.permute({0, 2, 3, 1}).contiguous().to_vector<float>();
  EXPECT_EQ(y.as_strided({y.numel()}, {1}, 0).to_vector<float>(), v);
}

TEST_P(MemoryFormatTest, SizeOneDimsMayTakeAnyStride) {
  // One channel, or a 1x1 map: both layouts at once, and the suggestion stays
  // Contiguous (PyTorch's rule).
  for (const Shape& s : {Shape{2, 1, 3, 3}, Shape{2, 8, 1, 1}}) {
    const Tensor x = randn(s, device());
    EXPECT_TRUE(x.is_contiguous(CL)) << s;
    EXPECT_TRUE(x.contiguous(CL).is_same(x)) << s;
    EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::Contiguous) << s;
  }
}

TEST_P(MemoryFormatTest, BadFormatsAreTypedErrors) {
  const Tensor x = randn({2, 3, 4}, device());
  EXPECT_FALSE(x.is_contiguous(CL));
  EXPECT_THROW(x.contiguous(CL), ShapeError);
  EXPECT_THROW(x.contiguous(MemoryFormat::Preserve), ValueError);
  EXPECT_THROW((void)x.is_contiguous(MemoryFormat::Preserve), ValueError);
  try {
    x.contiguous(CL);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("4-d"), std::string::npos) << e.what();
  }
}

TEST_P(MemoryFormatTest, CloneAndMovesKeepTheLayout) {
  // PyTorch's clone() and .to(device) preserve a channels-last layout; a
  // format asked for is obeyed; anything else comes back contiguous.
  const Tensor x = randn({2, 3, 4, 5}, device());
  const Tensor xc = x.contiguous(CL);
  const Tensor c = xc.clone();
  EXPECT_TRUE(c.is_contiguous(CL));
  EXPECT_FALSE(c.shares_storage(xc));
  EXPECT_TRUE(c.equal(x));
  EXPECT_TRUE(clone(xc, MemoryFormat::Contiguous).is_contiguous());
  EXPECT_TRUE(x.clone(CL).is_contiguous(CL));
  EXPECT_TRUE(x.clone().is_contiguous());
  EXPECT_TRUE(x.permute({0, 1, 3, 2}).clone().is_contiguous());  // not channels-last: contiguous
  EXPECT_THROW(randn({3, 4}, device()).clone(CL), ShapeError);
  EXPECT_TRUE(xc.contiguous().is_contiguous());  // contiguous() never keeps channels-last
  for (const Device d : {cpu(), device()}) {
    const Tensor moved = xc.copy_to(d);
    EXPECT_TRUE(moved.is_contiguous(CL)) << d;
    EXPECT_TRUE(moved.cpu().equal(x.cpu())) << d;
  }
  const Tensor host = xc.to(cpu());
  EXPECT_TRUE(host.is_contiguous(CL));
  EXPECT_TRUE(host.to(device()).is_contiguous(CL));
  EXPECT_EQ(host.to_vector<float>(), x.to_vector<float>());  // read in logical order
  // The gradient of a channels-last leaf keeps its layout through the clone.
  const Tensor leaf = xc.clone().requires_grad_();
  (leaf * 2).sum().backward();
  const Tensor again = leaf * 3;
  again.sum().backward();
  EXPECT_TRUE(leaf.grad().is_contiguous(CL));
  EXPECT_TRUE(leaf.grad().equal(full_like(x, 5.0)));
}

TEST_P(MemoryFormatTest, ElementwiseOpsKeepTheLayout) {
  const Tensor x = randn({2, 6, 5, 7}, device()), y = randn({2, 6, 5, 7}, device());
  const Tensor bias = randn({6, 1, 1}, device());
  const Tensor xc = x.contiguous(CL), yc = y.contiguous(CL);
  const std::vector<std::pair<std::string, std::pair<Tensor, Tensor>>> cases = {
      {"relu", {relu(xc), relu(x)}},       {"exp", {xc.exp(), x.exp()}},
      {"add", {xc + yc, x + y}},           {"residual add, second NCHW", {xc + y, x + y}},
      {"bias", {xc + bias, x + bias}},     {"bias first", {bias + xc, bias + x}},
      {"scalar", {xc * 2, x * 2}},         {"where", {where(xc > 0, xc, yc), where(x > 0, x, y)}},
      {"to f16", {xc.to(f16), x.to(f16)}}, {"zeros_like", {zeros_like(xc), zeros_like(x)}},
  };
  for (const auto& [name, pair] : cases) {
    EXPECT_EQ(pair.first.suggest_memory_format(), CL) << name;
    EXPECT_TRUE(pair.first.equal(pair.second)) << name;
  }
  // The first operand of the output's shape decides, as in PyTorch.
  EXPECT_EQ((x + yc).suggest_memory_format(), MemoryFormat::Contiguous);
}

TEST_P(MemoryFormatTest, ConvolutionAndPoolingKeepTheLayoutAndTheValues) {
  manual_seed(3);
  const Tensor x0 = randn({2, 8, 9, 9}, device()), w0 = randn({6, 8, 3, 3}, device()) * 0.2;
  const Tensor b0 = randn({6}, device());
  const auto run = [&](MemoryFormat f) {
    Tensor x = x0.contiguous(f).detach().requires_grad_();
    Tensor w = w0.contiguous(f).detach().requires_grad_(), b = b0.detach().requires_grad_();
    const Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
    const Tensor p = max_pool2d(relu(y), {2, 2}, {2, 2});
    const Tensor a = avg_pool2d(y, {3, 3}, {2, 2});
    (p.sum() + (a * a).sum()).backward();
    return std::tuple{y, p, a, x.grad(), w.grad(), b.grad()};
  };
  const auto [y, p, a, gx, gw, gb] = run(MemoryFormat::Contiguous);
  const auto [yc, pc, ac, gxc, gwc, gbc] = run(CL);
  EXPECT_EQ(yc.suggest_memory_format(), CL);
  EXPECT_EQ(pc.suggest_memory_format(), CL);
  EXPECT_EQ(ac.suggest_memory_format(), CL);
  EXPECT_EQ(y.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_EQ(p.suggest_memory_format(), MemoryFormat::Contiguous);
  expect_close(yc, y, 1e-4);
  expect_close(pc, p, 1e-4);
  expect_close(ac, a, 1e-4);
  expect_close(gxc, gx, 1e-4);
  expect_close(gwc, gw, 1e-4);
  expect_close(gbc, gb, 1e-4);
}

// The im2col convolution (the default on OpenCL and CUDA without cuDNN, on the
// CPU under ANVIL_CONV_IM2COL=1) and the pools compute a channels-last input
// in its layout: forward and backward launch no more kernels and move no more
// bytes than on the same input in NCHW (a layout copy would be one launch
// more), and every result and gradient is channels-last.
TEST_P(MemoryFormatTest, ConvolutionAndPoolingComputeChannelsLastWithoutCopies) {
  anvil::testing::EnvGuard im2col("ANVIL_CONV_IM2COL", "1");
  const Device d = device();
  manual_seed(4);
  const Tensor x0 = randn({4, 8, 10, 10}, d), b0 = randn({8}, d);
  using Op = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
  struct Case {
    std::string name;
    Shape weight;
    Op op;
  };
  const std::vector<Case> cases = {
      {"conv2d 3x3",
       {8, 8, 3, 3},
       [](const Tensor& x, const Tensor& w, const Tensor& b) {
         return conv2d(x, w, b, {1, 1}, {1, 1});
       }},
      {"conv2d 1x1 stride 2",
       {8, 8, 1, 1},
       [](const Tensor& x, const Tensor& w, const Tensor&) {
         return conv2d(x, w, {}, {2, 2});
       }},
      {"max_pool2d 3x3 stride 2 padding 1",
       {1},
       [](const Tensor& x, const Tensor&, const Tensor&) {
         return max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
       }},
      {"max_pool2d 2x2",
       {1},
       [](const Tensor& x, const Tensor&, const Tensor&) {
         return max_pool2d(x, {2, 2}, {2, 2});
       }},
      {"avg_pool2d 2x2",
       {1},
       [](const Tensor& x, const Tensor&, const Tensor&) {
         return avg_pool2d(x, {2, 2}, {2, 2});
       }},
      {"avg_pool2d 3x3 stride 2 padding 1",
       {1},
       [](const Tensor& x, const Tensor&, const Tensor&) {
         return avg_pool2d(x, {3, 3}, {2, 2}, {1, 1});
       }},
  };
  for (const auto& [name, weight, op] : cases) {
    const Tensor w0 = randn(weight, d) * 0.2;
    Tensor g0;
    {
      NoGradGuard no_grad;
      g0 = randn(op(x0, w0, b0).shape(), d);
    }
    std::map<MemoryFormat, DeviceWork> work;
    std::map<MemoryFormat, std::vector<Tensor>> results;
    for (const MemoryFormat f : {MemoryFormat::Contiguous, CL}) {
      const Tensor xf = x0.contiguous(f), wf = w0.dim() == 4 ? w0.contiguous(f) : w0, gf = g0.contiguous(f);
      // Fresh leaves each time (no accumulation into an earlier gradient).
      const auto step = [&] {
        const Tensor x = xf.detach().requires_grad_(), w = wf.detach().requires_grad_();
        const Tensor b = b0.detach().requires_grad_();
        const Tensor y = op(x, w, b);
        y.backward(gf);
        return std::vector<Tensor>{y, x.grad(), w.grad()};
      };
      step();  // compiles the kernels
      synchronize(d);
      Ledger scope;
      results[f] = step();
      synchronize(d);
      work[f] = scope.report().device_work(d);
      for (const Tensor& t : results[f]) {
        if (t.defined()) {
          EXPECT_TRUE(t.is_contiguous(f)) << name << " " << t.strides();
        }
      }
    }
    const DeviceWork& nchw = work[MemoryFormat::Contiguous];
    const DeviceWork& cl = work[CL];
    std::cout << name << " on " << d << ": launches " << nchw.launches << " (NCHW) " << cl.launches
              << " (channels-last), bytes read " << nchw.bytes_read << " " << cl.bytes_read << ", written "
              << nchw.bytes_written << " " << cl.bytes_written << "\n";
    EXPECT_LE(cl.launches, nchw.launches) << name;
    EXPECT_LE(cl.bytes_read, nchw.bytes_read) << name;
    EXPECT_LE(cl.bytes_written, nchw.bytes_written) << name;
    for (std::size_t i = 0; i < results[CL].size(); ++i) {
      if (results[CL][i].defined()) expect_close(results[CL][i], results[MemoryFormat::Contiguous][i], 1e-4);
    }
  }
}

// A channels-last input with an NCHW weight: the window matrix's taps follow
// the weight (C*KH*KW), values and gradients as in NCHW.
TEST_P(MemoryFormatTest, ChannelsLastInputWithAnNchwWeight) {
  anvil::testing::EnvGuard im2col("ANVIL_CONV_IM2COL", "1");
  manual_seed(6);
  const Tensor x0 = randn({2, 5, 7, 6}, device()), w0 = randn({4, 5, 3, 2}, device()),
               g0 = randn({2, 4, 4, 2}, device());
  const auto run = [&](MemoryFormat f) {
    const Tensor x = x0.contiguous(f).detach().requires_grad_(), w = w0.detach().requires_grad_();
    const Tensor y = conv2d(x, w, {}, {2, 2}, {1, 0}, {1, 2});
    y.backward(g0.contiguous(f));
    return std::vector<Tensor>{y, x.grad(), w.grad()};
  };
  const std::vector<Tensor> nchw = run(MemoryFormat::Contiguous), cl = run(CL);
  EXPECT_EQ(cl[0].suggest_memory_format(), CL);
  EXPECT_EQ(cl[1].suggest_memory_format(), CL);
  for (std::size_t i = 0; i < cl.size(); ++i) expect_close(cl[i], nchw[i], 1e-4);
}

// Batch norm reads a channels-last input as it is ([N*H*W, C] rows to the
// kernels) and writes its output and gradients channels-last: training and
// evaluation, the fused residual and ReLU, 16-bit input, and a channel split
// over several work-groups (ANVIL_NORM_PARTS), against the same in NCHW.
TEST_P(MemoryFormatTest, BatchNormKeepsTheLayoutAndTheValues) {
  manual_seed(9);
  const Tensor x0 = randn({4, 6, 5, 7}, device()), r0 = randn({4, 6, 5, 7}, device());
  const Tensor w0 = rand({6}, device()) + 0.5, b0 = randn({6}, device());
  for (const char* parts : {"1", "3"}) {
    anvil::testing::EnvGuard split("ANVIL_NORM_PARTS", parts);
    for (const DType t : {f32, bf16}) {
      for (const bool training : {true, false}) {
        const auto run = [&](MemoryFormat f) {
          Tensor x = x0.to(t).contiguous(f).detach().requires_grad_();
          Tensor r = r0.to(t).contiguous(f).detach().requires_grad_();
          Tensor w = w0.detach().requires_grad_(), b = b0.detach().requires_grad_();
          Tensor rm = zeros({6}, device()), rv = ones({6}, device());
          const Tensor y = batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5, r, Activation::ReLU);
          (y.to(f32) * y.to(f32)).sum().backward();
          return std::tuple{y, x.grad(), r.grad(), w.grad(), b.grad(), rm, rv};
        };
        const auto [y, gx, gr, gw, gb, rm, rv] = run(MemoryFormat::Contiguous);
        const auto [yc, gxc, grc, gwc, gbc, rmc, rvc] = run(CL);
        SCOPED_TRACE(::testing::Message() << t << (training ? " training" : " evaluation") << ", parts " << parts);
        EXPECT_EQ(yc.suggest_memory_format(), CL);
        EXPECT_EQ(gxc.suggest_memory_format(), CL);
        EXPECT_EQ(grc.suggest_memory_format(), CL);
        const double tol = t == bf16 ? 3e-2 : 1e-4;
        expect_close(yc, y, tol);
        expect_close(gxc, gx, tol);
        expect_close(grc, gr, tol);
        expect_close(gwc, gw, t == bf16 ? 0.5 : 1e-3);
        expect_close(gbc, gb, t == bf16 ? 0.5 : 1e-3);
        expect_close(rmc, rm, 1e-5);
        expect_close(rvc, rv, 1e-5);
      }
    }
  }
}

std::shared_ptr<nn::Sequential> small_net() {
  return std::make_shared<nn::Sequential>(nn::Conv2d(3, 8, 3, 1, 1), nn::BatchNorm2d(8), nn::ReLU(), nn::MaxPool2d(2),
                                          nn::Conv2d(8, 8, 3), nn::ReLU(), nn::AdaptiveAvgPool2d({1, 1}), nn::Flatten(),
                                          nn::Linear(8, 4));
}

TEST_P(MemoryFormatTest, ModuleToChannelsLastTrainsAsNchw) {
  manual_seed(7);
  auto nchw = small_net();
  nchw->to(device());
  auto cl = std::static_pointer_cast<nn::Sequential>(nchw->clone(device()));
  cl->to(CL);
  int relaid = 0;
  for (const Tensor& p : cl->parameters())
    if (p.dim() == 4) {
      EXPECT_TRUE(p.is_contiguous(CL));
      ++relaid;
    }
  EXPECT_EQ(relaid, 2);
  const Tensor x = randn({4, 3, 10, 10}, device());
  const Tensor target = randint(0, 4, {4}, device());
  optim::SGD a(nchw->parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD b(cl->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 3; ++step) {
    a.zero_grad();
    b.zero_grad();
    nn::cross_entropy((*nchw)(x), target).backward();
    nn::cross_entropy((*cl)(x.contiguous(CL)), target).backward();
    for (const Tensor& p : cl->parameters())
      if (p.dim() == 4) {
        EXPECT_TRUE(p.grad().is_contiguous(CL)) << "a gradient laid out unlike its parameter";
      }
    a.step();
    b.step();
  }
  const auto pa = by_name(nchw->named_parameters()), pb = by_name(cl->named_parameters());
  for (const auto& [name, t] : pa) {
    expect_close(pb.at(name), t, 1e-4);
    if (t.dim() == 4) {
      EXPECT_TRUE(pb.at(name).is_contiguous(CL)) << name << " lost its layout in the step";
    }
  }
  const auto sa = a.state_dict(), sb = b.state_dict();
  for (const auto& [key, t] : sa) expect_close(sb.at(key), t, 1e-4);
}

TEST_P(MemoryFormatTest, ACheckpointLoadsIntoEitherFormat) {
  manual_seed(11);
  auto cl = small_net();
  cl->to(device());
  cl->to(CL);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("anvil_memory_format_" + device().str() + ".safetensors")).string();
  cl->save(path);
  auto nchw = small_net();
  nchw->load(path, device());
  std::filesystem::remove(path);
  const auto pa = by_name(cl->named_parameters()), pb = by_name(nchw->named_parameters());
  for (const auto& [name, t] : pa) EXPECT_TRUE(pb.at(name).equal(t)) << name;
  nchw->to(CL);
  cl->to(MemoryFormat::Contiguous);
  for (const Tensor& p : cl->parameters()) EXPECT_TRUE(p.is_contiguous());
}

// The multi-tensor step walks each operand as one flat block: channels-last
// parameters, their gradients and their state (laid out alike) still take
// it, one launch (one parallel region on the CPU) after the first step, with
// the values of the same step on NCHW parameters.
TEST_P(MemoryFormatTest, OptimiserStepsChannelsLastParametersInOneLaunch) {
  const Device d = device();
  manual_seed(5);
  const std::vector<Shape> shapes = {{8, 4, 3, 3}, {8}, {16, 8, 1, 3}, {4, 16, 2, 2}};
  for (int which = 0; which < 2; ++which) {
    std::vector<Tensor> nchw, cl, grads;
    for (const Shape& s : shapes) {
      const Tensor p = randn(s, d);
      nchw.push_back(p.clone().requires_grad_());
      cl.push_back((s.size() == 4 ? p.contiguous(CL) : p.clone()).requires_grad_());
      grads.push_back(randn(s, d));
    }
    std::unique_ptr<optim::Optimizer> a, b;
    if (which == 0) {
      a = std::make_unique<optim::SGD>(nchw, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
      b = std::make_unique<optim::SGD>(cl, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    } else {
      a = std::make_unique<optim::Adam>(nchw, optim::AdamOptions{.lr = 0.1});
      b = std::make_unique<optim::Adam>(cl, optim::AdamOptions{.lr = 0.1});
    }
    for (int step = 0; step < 3; ++step) {
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        nchw[i].set_grad(grads[i] * (step + 1));
        cl[i].set_grad((cl[i].dim() == 4 ? grads[i].contiguous(CL) : grads[i]) * (step + 1));
      }
      a->step();
      synchronize(d);
      Ledger scope;
      b->step();
      synchronize(d);
      if (step > 0) {
        EXPECT_EQ(scope.report().launches(d), 1u) << "optimiser " << which << " step " << step;
      }
    }
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      expect_close(cl[i], nchw[i], 1e-5);
      if (shapes[i].size() == 4) {
        EXPECT_TRUE(cl[i].is_contiguous(CL));
      }
    }
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(MemoryFormatTest);

}  // namespace
