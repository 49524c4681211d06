// What the book's ResNet-18 needs (issue 10, part 7): adaptive_avg_pool2d
// (gradcheck and a plain-loop reference on every device, its errors),
// nn::AdaptiveAvgPool2d, Module::apply, Sequential::add, register_module's
// typed children, the Residual block of docs/modules.md
// (examples/d2l_resnet.h) against PyTorch's names and counts. The
// examples' resize to the book's 96x96 is anvil::interpolate (test_interpolate).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../examples/d2l_resnet.h"
#include "anvil/autograd.h"
#include "anvil/nn.h"
#include "device_test.h"
#include "host_values.h"

using namespace anvil;
using anvil::testing::host_f64;

namespace {

// PyTorch's adaptive average pooling, written from its definition with
// floor/ceil on the host: x is [planes, h, w] row-major.
std::vector<double> adaptive_ref(const std::vector<double>& x, std::int64_t planes, std::int64_t h, std::int64_t w,
                                 std::int64_t oh, std::int64_t ow) {
  std::vector<double> out;
  auto lo = [](std::int64_t i, std::int64_t in, std::int64_t o) { return (i * in) / o; };
  auto hi = [](std::int64_t i, std::int64_t in, std::int64_t o) { return ((i + 1) * in + o - 1) / o; };
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        double acc = 0;
        std::int64_t n = 0;
        for (std::int64_t r = lo(i, h, oh); r < hi(i, h, oh); ++r)
          for (std::int64_t c = lo(j, w, ow); c < hi(j, w, ow); ++c, ++n)
            acc += x[static_cast<std::size_t>((p * h + r) * w + c)];
        out.push_back(acc / static_cast<double>(n));
      }
  return out;
}

void to_f64(nn::Module& m) {
  NoGradGuard no_grad;
  for (const Tensor& p : m.parameters()) p.set_data(p.to(f64));
  for (const Tensor& b : m.buffers())
    if (is_floating(b.dtype())) b.set_data(b.to(f64));
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

Tensor param_named(const nn::Module& m, const std::string& name) {
  for (const auto& [n, t] : m.named_parameters())
    if (n == name) return t;
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

// The source tree: ctest sets ANVIL_TEST_DATA (tests/data); run by hand,
// __FILE__ is relative to the build directory (ccache's base_dir), which
// holds tests/<this binary>.
std::filesystem::path source_root() {
  if (const char* data = std::getenv("ANVIL_TEST_DATA"); data != nullptr && *data != '\0')
    return std::filesystem::path(data).parent_path().parent_path();
  std::filesystem::path self = __FILE__;
  if (self.is_relative()) self = std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / self;
  return self.lexically_normal().parent_path().parent_path();
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

class AdaptivePool : public anvil::testing::DeviceTest {};

TEST_P(AdaptivePool, Gradcheck) {
  const Device d = device();
  if (!properties(d).fp64) GTEST_SKIP() << d << " has no f64; gradcheck needs float64";
  struct Case {
    Shape in;
    std::array<std::int64_t, 2> out;
    bool transposed;
  };
  // Global, divisible, uneven overlapping bins, output larger than the
  // input, identity, 3-D input, and a strided (transposed) input.
  for (const Case& c :
       {Case{{2, 3, 5, 4}, {1, 1}, false}, Case{{2, 2, 4, 6}, {2, 3}, false}, Case{{1, 2, 5, 7}, {3, 4}, false},
        Case{{1, 2, 3, 2}, {4, 3}, false}, Case{{1, 2, 3, 3}, {3, 3}, false}, Case{{2, 5, 5}, {2, 3}, false},
        Case{{2, 2, 6, 5}, {2, 4}, true}}) {
    SCOPED_TRACE(::testing::Message() << c.in << " -> {" << c.out[0] << ", " << c.out[1] << "}");
    manual_seed(11);
    const auto r = autograd::gradcheck(
        [&](const std::vector<Tensor>& x) {
          return adaptive_avg_pool2d(c.transposed ? x[0].transpose(-2, -1) : x[0], c.out);
        },
        {randn(c.in, d, f64).requires_grad_()});
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST_P(AdaptivePool, MatchesPyTorchBinsInF32) {
  const Device d = device();
  manual_seed(5);
  const std::int64_t n = 2, c = 3, h = 7, w = 10;
  const Tensor base = randn({n, c, w, h}, d);
  const Tensor x = base.transpose(2, 3);  // [n, c, h, w], not contiguous
  const std::vector<double> xs = host_f64(x);
  for (const auto& [oh, ow] :
       std::vector<std::array<std::int64_t, 2>>{{1, 1}, {7, 10}, {3, 4}, {2, 5}, {9, 13}, {1, 3}}) {
    SCOPED_TRACE(::testing::Message() << "output {" << oh << ", " << ow << "}");
    const Tensor y = adaptive_avg_pool2d(x, {oh, ow});
    ASSERT_EQ(y.shape(), Shape({n, c, oh, ow}));
    EXPECT_EQ(y.device(), d);
    EXPECT_EQ(y.dtype(), f32);
    const std::vector<double> ys = host_f64(y), want = adaptive_ref(xs, n * c, h, w, oh, ow);
    ASSERT_EQ(ys.size(), want.size());
    for (std::size_t i = 0; i < ys.size(); ++i) EXPECT_NEAR(ys[i], want[i], 1e-5) << "at " << i;
  }
  // PyTorch's own numbers for arange(2*3*5*7).reshape(2, 3, 5, 7) -> (3, 4), plane 0.
  const Tensor a = arange(0, 2 * 3 * 5 * 7, 1, d, f64).reshape({2, 3, 5, 7});
  const std::vector<double> torch_plane0{4.0, 5.5, 7.5, 9.0, 14.5, 16.0, 18.0, 19.5, 25.0, 26.5, 28.5, 30.0};
  const std::vector<double> got = host_f64(adaptive_avg_pool2d(a, {3, 4})[0][0]);
  ASSERT_EQ(got.size(), torch_plane0.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], torch_plane0[i]) << "at " << i;
}

TEST_P(AdaptivePool, GradientOfGlobalPoolingIsUniform) {
  const Device d = device();
  Tensor x = randn({2, 3, 4, 5}, d).requires_grad_();
  adaptive_avg_pool2d(x, {1, 1}).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({2, 3, 4, 5}, 1.0 / 20.0, d)));
  EXPECT_EQ(x.grad().device(), d);
}

TEST_P(AdaptivePool, RejectsBadInputWithTypedErrors) {
  const Device d = device();
  EXPECT_THROW(adaptive_avg_pool2d(randn({4, 5}, d), {1, 1}), ShapeError);
  EXPECT_THROW(adaptive_avg_pool2d(randn({1, 2, 3, 4, 5}, d), {1, 1}), ShapeError);
  EXPECT_THROW(adaptive_avg_pool2d(ones({1, 2, 3, 4}, d, i64), {1, 1}), DTypeError);
  EXPECT_THROW(adaptive_avg_pool2d(randn({1, 2, 3, 4}, d), {0, 1}), ValueError);
  EXPECT_THROW(adaptive_avg_pool2d(randn({1, 2, 0, 4}, d), {1, 1}), ShapeError);
  EXPECT_THROW(adaptive_avg_pool2d(Tensor{}, {1, 1}), ValueError);
  try {
    adaptive_avg_pool2d(randn({4, 5}, d), {1, 1});
  } catch (const ShapeError& e) {
    EXPECT_NE(
        std::string(e.what()).find("adaptive_avg_pool2d: input must be [N, C, H, W] or [C, H, W]; expected 3 or 4 "
                                   "dims, got [4, 5]"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(nn::AdaptiveAvgPool2d({1, 0}), ValueError);
}

TEST_P(AdaptivePool, LayerPoolsAndPassesGradcheck) {
  const Device d = device();
  nn::AdaptiveAvgPool2d global({1, 1});
  EXPECT_EQ(global.name(), "AdaptiveAvgPool2d(output_size=(1, 1))");
  EXPECT_EQ(nn::AdaptiveAvgPool2d(3).name(), "AdaptiveAvgPool2d(output_size=(3, 3))");
  const Tensor x = randn({2, 4, 3, 5}, d);
  const Tensor y = global(x);
  EXPECT_EQ(y.shape(), Shape({2, 4, 1, 1}));
  EXPECT_TRUE(allclose(y, mean(x, {2, 3}, true), 1e-5, 1e-6));
  EXPECT_TRUE(global.parameters().empty());
  if (!properties(d).fp64) return;
  nn::Sequential m{nn::Conv2d(2, 3, 3, 1, 1), nn::AdaptiveAvgPool2d({2, 3}), nn::Flatten(), nn::Linear(6 * 3, 2)};
  to_f64(m);
  m.to(d);
  const auto r = autograd::gradcheck([&](const std::vector<Tensor>& in) { return m(in[0]); },
                                     {randn({2, 2, 5, 7}, d, f64).requires_grad_()});
  EXPECT_TRUE(r.ok) << r.message;
}

ANVIL_INSTANTIATE_DEVICE_TEST(AdaptivePool);

// --- Module::apply, Sequential::add, register_module ------------------------------------

TEST(ModuleApply, VisitsChildrenBeforeTheirParentAsPyTorch) {
  nn::Sequential inner{nn::ReLU(), nn::Linear(2, 2)};
  nn::Sequential outer;
  outer.push_back(nn::Linear(2, 2));
  outer.push_back(std::make_shared<nn::Sequential>(std::move(inner)));
  outer.push_back(nn::Tanh());
  std::vector<std::string> seen;
  nn::Module& ret = outer.apply([&](nn::Module& m) { seen.push_back(m.name().substr(0, m.name().find('('))); });
  EXPECT_EQ(&ret, &outer);
  // torch: Sequential(Linear, Sequential(ReLU, Linear), Tanh).apply(...) visits in this order.
  EXPECT_EQ(seen, (std::vector<std::string>{"Linear", "ReLU", "Linear", "Sequential", "Tanh", "Sequential"}));
}

TEST(ModuleApply, InitialisesEveryConvAndLinearOfResNet18) {
  manual_seed(2);
  auto net = d2l::resnet18(10, 1);
  int touched = 0;
  net->apply([&](nn::Module& m) {
    if (dynamic_cast<nn::Conv2d*>(&m) != nullptr || dynamic_cast<nn::Linear*>(&m) != nullptr) {
      Tensor w = m.weight();
      nn::init::normal_(w, 0.0, 0.01);
      ++touched;
    }
  });
  EXPECT_EQ(touched, 21);  // the stem, 16 block convs, 3 1x1 shortcuts, fc
  int weights = 0;
  for (const auto& [n, p] : net->named_parameters())
    if (p.dim() >= 2) {
      ++weights;
      EXPECT_LT(std::abs(anvil::std(p).item<double>() - 0.01), 0.003) << n;
    }
  EXPECT_EQ(weights, touched);
}

TEST(SequentialAdd, NamesChildrenAndStateDictKeys) {
  nn::Sequential net;
  net.add("conv1", nn::Conv2d(1, 2, 3)).add("bn1", nn::BatchNorm2d(2));
  net.push_back(nn::ReLU());                          // named by its index, as torch's append
  net.add("fc", std::make_shared<nn::Linear>(2, 3));  // over the last dim
  ASSERT_EQ(net.size(), 4u);
  EXPECT_EQ(names_of(net.named_parameters()),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "fc.weight", "fc.bias"}));
  const auto sd = net.state_dict();
  EXPECT_TRUE(sd.count("bn1.running_mean"));
  EXPECT_FALSE(sd.count("0.weight"));
  EXPECT_EQ(net.named_children()[2].first, "2");
  EXPECT_EQ(&net[0], net.named_children()[0].second.get());
  EXPECT_EQ(net.at<nn::Linear>(3).name(), "Linear(in_features=2, out_features=3, bias=true)");
  std::ostringstream os;
  os << net;
  EXPECT_NE(os.str().find("(conv1): Conv2d(1, 2"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("(2): ReLU()"), std::string::npos) << os.str();
  // A forward runs the layers in order.
  net.eval();
  EXPECT_EQ(net(randn({1, 1, 4, 4})).shape(), Shape({1, 2, 2, 3}));

  EXPECT_THROW(net.add("conv1", nn::ReLU()), ValueError);
  EXPECT_THROW(net.add("a.b", nn::ReLU()), ValueError);
  EXPECT_THROW(net.add("", nn::ReLU()), ValueError);
  EXPECT_THROW(net.add("x", std::shared_ptr<nn::Module>()), ValueError);
  EXPECT_EQ(net.size(), 4u);  // a refused layer is not kept
  try {
    net.add("bn1", nn::ReLU());
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("register_module: Sequential already has a child 'bn1'; expected a new name"),
              std::string::npos)
        << e.what();
  }
  // load_state_dict round trip through the named keys.
  nn::Sequential other;
  other.add("conv1", nn::Conv2d(1, 2, 3)).add("bn1", nn::BatchNorm2d(2));
  other.push_back(nn::ReLU());
  other.add("fc", nn::Linear(2, 3));
  other.load_state_dict(net.state_dict());
  EXPECT_TRUE(equal(param_named(other, "fc.weight"), param_named(net, "fc.weight")));
}

// --- the book's Residual and resnet18 (examples/d2l_resnet.h) --------------------------------

class Residual : public anvil::testing::DeviceTest {};

TEST_P(Residual, KeepsOrChangesTheShapeAndPassesGradcheck) {
  const Device d = device();
  manual_seed(4);
  d2l::Residual same(3, 3);
  same.to(d);
  EXPECT_EQ(same(randn({4, 3, 6, 6}, d)).shape(), Shape({4, 3, 6, 6}));
  d2l::Residual down(3, 6, true, 2);
  down.to(d);
  EXPECT_EQ(down(randn({4, 3, 6, 6}, d)).shape(), Shape({4, 6, 3, 3}));
  EXPECT_EQ(down(randn({4, 3, 5, 5}, d)).shape(), Shape({4, 6, 3, 3}));
  if (!properties(d).fp64) return;
  d2l::Residual m(2, 3, true, 2);
  to_f64(m);
  m.to(d);
  const auto r = autograd::gradcheck([&](const std::vector<Tensor>& x) { return m(x[0]); },
                                     {randn({3, 2, 4, 4}, d, f64).requires_grad_()});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_P(Residual, ResNet18RunsForwardAndBackward) {
  const Device d = device();
  manual_seed(6);
  auto net = d2l::resnet18(10, 1);
  net->to(d);
  const Tensor x = randn({2, 1, 16, 16}, d);
  const Tensor y = (*net)(x);
  EXPECT_EQ(y.shape(), Shape({2, 10}));
  cross_entropy(y, tensor({3, 7}, d)).backward();
  for (const auto& [n, p] : net->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    EXPECT_EQ(p.grad().device(), d) << n;
  }
  EXPECT_TRUE(std::isfinite(param_named(*net, "fc.1.weight").grad().abs().sum().item<double>()));
}

// The block fuses bn1 with its ReLU and bn2 with the shortcut's add and
// ReLU (anvil::batch_norm's epilogue); its output, running statistics and
// gradients are the book's unfused relu(bn1(conv1(x))), relu(bn2(conv2(y))
// + shortcut) computed from the same parameters, in training and eval.
TEST_P(Residual, FusedBatchNormsMatchTheUnfusedBlock) {
  const Device d = device();
  for (const bool down : {true, false}) {
    for (const bool training : {true, false}) {
      SCOPED_TRACE(::testing::Message() << (down ? "1x1 shortcut" : "identity") << (training ? " training" : " eval"));
      manual_seed(8);
      d2l::Residual m(down ? 3 : 4, 4, down, down ? 2 : 1);
      m.to(d);
      if (!training) m.eval();
      nn::StateDict ref;  // the parameters and running statistics, copied
      for (const auto& [n, t] : m.state_dict()) ref[n] = t.detach().clone();
      for (const std::string bn : {"bn1", "bn2"}) {  // running statistics away from 0 and 1
        ref[bn + ".running_mean"] = randn({4}, d) * 0.1;
        ref[bn + ".running_var"] = rand({4}, d) + 0.5;
      }
      m.load_state_dict(ref);
      for (const auto& [n, t] : m.named_parameters()) ref[n].requires_grad_();  // the reference's leaves
      const Tensor x0 = randn({4, down ? 3 : 4, 6, 6}, d), g = randn({4, 4, down ? 3 : 6, down ? 3 : 6}, d);
      Tensor x = x0.clone().requires_grad_(), xr = x0.clone().requires_grad_();
      const Tensor y = m(x);
      y.backward(g);
      const auto p = [&](const std::string& n) { return ref.at(n); };
      const auto bn = [&](const Tensor& t, const std::string& n) {
        return batch_norm(t, p(n + ".running_mean"), p(n + ".running_var"), p(n + ".weight"), p(n + ".bias"), training);
      };
      const std::int64_t s = down ? 2 : 1;
      const Tensor y1 = relu(bn(conv2d(xr, p("conv1.weight"), p("conv1.bias"), {s, s}, {1, 1}), "bn1"));
      const Tensor shortcut = down ? conv2d(xr, p("conv3.weight"), p("conv3.bias"), {s, s}) : xr;
      const Tensor yr = relu(bn(conv2d(y1, p("conv2.weight"), p("conv2.bias"), {1, 1}, {1, 1}), "bn2") + shortcut);
      yr.backward(g);
      EXPECT_TRUE(allclose(y, yr, 1e-5, 1e-5));
      EXPECT_TRUE(allclose(x.grad(), xr.grad(), 1e-4, 1e-4));
      for (const auto& [n, t] : m.named_parameters()) EXPECT_TRUE(allclose(t.grad(), ref[n].grad(), 1e-4, 1e-4)) << n;
      const nn::StateDict after = m.state_dict();
      for (const char* n : {"bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"})
        EXPECT_TRUE(allclose(after.at(n), ref.at(n), 1e-5, 1e-6)) << n;
    }
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(Residual);

TEST(ResNet18, HasTheBooksNamesAndSizes) {
  auto net = d2l::resnet18(10, 1);
  // PyTorch 1.13 on the book's resnet18(10, 1): 127 state_dict keys, 76
  // parameter tensors, 11,175,818 parameters.
  EXPECT_EQ(net->state_dict().size(), 127u);
  const auto params = net->named_parameters();
  EXPECT_EQ(params.size(), 76u);
  std::int64_t count = 0;
  for (const auto& [n, p] : params) count += p.numel();
  EXPECT_EQ(count, 11175818);
  const std::vector<std::string> names = names_of(params);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 6),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "resnet_block1.0.conv1.weight",
                                      "resnet_block1.0.conv1.bias"}));
  EXPECT_EQ(std::find(names.begin(), names.end(), "resnet_block2.0.conv3.weight") - names.begin(),
            std::find(names.begin(), names.end(), "resnet_block2.0.conv2.bias") - names.begin() + 1);
  EXPECT_EQ(names.back(), "fc.1.bias");
  const auto sd = net->state_dict();
  EXPECT_TRUE(sd.count("resnet_block4.1.bn2.num_batches_tracked"));
  EXPECT_FALSE(sd.count("resnet_block1.0.conv3.weight"));  // the first stage keeps its shape: no 1x1 shortcut
}

// docs/modules.md shows the Residual class of examples/d2l_resnet.h; this
// keeps the page and the compiled code the same text.
TEST(ResidualDocs, PageShowsTheCompiledCode) {
  const std::filesystem::path root = source_root();
  const std::string header = read_file(root / "examples" / "d2l_resnet.h");
  const std::string page = read_file(root / "docs" / "modules.md");
  const std::string begin = "// begin Residual (docs/modules.md)\n", end = "// end Residual\n";
  const auto b = header.find(begin), e = header.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const std::string code = header.substr(b + begin.size(), e - b - begin.size());
  ASSERT_GT(code.size(), 500u);
  EXPECT_NE(page.find("```cpp\n" + code + "```"), std::string::npos)
      << "docs/modules.md must show, in one ```cpp block, exactly this code from examples/d2l_resnet.h:\n"
      << code;
}
