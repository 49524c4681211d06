// interpolate (torch.nn.functional.interpolate over [N, C, H, W]) on every
// device, against PyTorch 1.13's CPU kernels: outputs and gradients of each
// case of tests/interpolate_reference.inc (tests/python/interpolate_reference.py),
// in f32 and f64 against PyTorch's f32 and f64 results and in f16 and bf16
// within their rounding; the backend's kernels and the composite from
// primitives (ANVIL_NO_FUSED=1) alike. Then the finite-difference gradient
// check, strided inputs, empty batches, determinism, nn::Upsample and the
// errors.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "anvil/autograd.h"
#include "anvil/nn.h"
#include "core/backend.h"
#include "device_test.h"
#include "env_guard.h"

using namespace anvil;
using anvil::testing::EnvGuard;

namespace {

struct Case {
  const char* id;
  std::vector<std::int64_t> shape;
  std::array<std::int64_t, 2> size;
  std::array<double, 2> scale_factor;
  const char* mode;
  int align_corners;  // -1: unset
  bool recompute;
  std::array<std::int64_t, 2> out_size;
  std::vector<double> out_f32, out_f64, grad_f32, grad_f64;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
#include "interpolate_reference.inc"
  };
  return all;
}

InterpolateOptions options(const Case& c) {
  InterpolateOptions o{.size = c.size, .scale_factor = c.scale_factor, .mode = c.mode};
  if (c.align_corners >= 0) o.align_corners = c.align_corners == 1;
  o.recompute_scale_factor = c.recompute;
  return o;
}

// The generator's patterns: exact in every floating dtype.
std::vector<double> pattern(std::int64_t n, std::int64_t mul, std::int64_t mod, std::int64_t shift, double div) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<double>((i * mul) % mod - shift) / div;
  return v;
}
Tensor input_of(const Case& c, Device d, DType t) {
  const Shape shape(c.shape);
  return tensor(pattern(shape.numel(), 7919, 23, 11, 4.0), shape, d, t);
}
Tensor grad_of(const Shape& out_shape, Device d, DType t) {
  return tensor(pattern(out_shape.numel(), 104729, 17, 8, 8.0), out_shape, d, t);
}

std::vector<double> host(const Tensor& t) { return t.to(f64).cpu().contiguous().to_vector<double>(); }

// |got - want| <= tol * (1 + |want|) everywhere.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const bool ok = std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]));
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", PyTorch " << want[i];
  }
}

bool has_f64(Device d) { return properties(d).fp64; }

std::vector<DType> dtypes(Device d) {
  std::vector<DType> out{f32, f16, bf16};
  if (has_f64(d)) out.push_back(f64);
  return out;
}

// The relative tolerance of a dtype's results: f32 and f64 to a few ulp of
// PyTorch's (sums of a few terms in the same order, maybe with FMA), the
// 16-bit floats to their rounding (they compute in f32 and round once; the
// gradient of the 14 -> 48 case sums ~12 terms per pixel).
double tolerance(DType t, bool nearest) {
  if (nearest) return t == f16 ? 2e-3 : t == bf16 ? 8e-3 : 0.0;  // a copy, and sums of g's exact values
  return t == f64 ? 1e-12 : t == f32 ? 2e-6 : t == f16 ? 2e-3 : 1e-2;
}

void check_case(const Case& c, Device d, DType t, bool fused) {
  SCOPED_TRACE(std::string(c.id) + " " + std::string(to_string(t)) + (fused ? " (kernels)" : " (composite)"));
  const bool nearest = std::string(c.mode) == "nearest";
  Tensor x = input_of(c, d, t).requires_grad_();
  const Tensor y = interpolate(x, options(c));
  const Shape want_shape{c.shape[0], c.shape[1], c.out_size[0], c.out_size[1]};
  ASSERT_EQ(y.shape(), want_shape);
  EXPECT_EQ(y.dtype(), t);
  EXPECT_EQ(y.device(), d);
  const bool wide = t == f64;
  // The composite's GEMMs add zeros and may round differently: a few ulp more.
  const double tol = fused ? tolerance(t, nearest) : std::max(tolerance(t, false), 1e-6);
  expect_close(host(y), wide ? c.out_f64 : c.out_f32, tol, "output");
  sum(y * grad_of(want_shape, d, t)).backward();
  ASSERT_TRUE(x.grad().defined());
  expect_close(host(x.grad()), wide ? c.grad_f64 : c.grad_f32, std::max(tol, t == f32 ? 4e-6 : 0.0), "gradient");
}

class Interpolate : public anvil::testing::DeviceTest {};

TEST_P(Interpolate, MatchesPyTorchWithTheKernels) {
  ASSERT_GE(cases().size(), 20u) << "tests/interpolate_reference.inc lost its cases";
  const Device d = device();
  // Every backend here has the kernels, so this is their test, not the composite's.
  for (DType t : dtypes(d))
    for (detail::FusedOp op : {detail::FusedOp::Interpolate, detail::FusedOp::InterpolateBackward})
      ASSERT_TRUE(detail::backend_for(d.type())->supports_fused(op, t, d.index())) << d << " " << to_string(t);
  for (const Case& c : cases())
    for (DType t : dtypes(d)) check_case(c, d, t, true);
}

TEST_P(Interpolate, MatchesPyTorchWithTheComposite) {
  EnvGuard env("ANVIL_NO_FUSED", "1");
  const Device d = device();
  for (const Case& c : cases())
    for (DType t : {f32, f64}) {
      if (t == f64 && !has_f64(d)) continue;
      check_case(c, d, t, false);
    }
}

TEST_P(Interpolate, RecordsPyTorchsNodes) {
  Tensor x = ones({1, 1, 2, 2}, device()).requires_grad_();
  EXPECT_EQ(interpolate(x, {.size = {3, 3}, .mode = "bilinear"}).grad_fn_name(), "UpsampleBilinear2DBackward");
  EXPECT_EQ(interpolate(x, {.size = {3, 3}}).grad_fn_name(), "UpsampleNearest2DBackward");
}

TEST_P(Interpolate, GradientsMatchFiniteDifferences) {
  const Device d = device();
  if (!has_f64(d)) GTEST_SKIP() << d << " has no f64; gradcheck needs float64";
  manual_seed(3);
  const std::vector<InterpolateOptions> all = {
      {.size = {7, 5}, .mode = "bilinear"},
      {.size = {2, 9}, .mode = "bilinear", .align_corners = true},
      {.scale_factor = {1.5, 0.75}, .mode = "bilinear"},
      {.size = {7, 3}},
      {.scale_factor = {2, 2}},
  };
  for (const InterpolateOptions& o : all) {
    SCOPED_TRACE(o.mode);
    const Tensor x = randn({2, 3, 4, 5}, d, f64).requires_grad_();
    const auto r = autograd::gradcheck([&](const std::vector<Tensor>& in) { return interpolate(in[0], o); }, {x});
    EXPECT_TRUE(r.ok) << r.message;
  }
}

// Strided inputs (a transposed view, a channel slice, an expanded batch)
// give the contiguous input's results; so does a batch of zero.
TEST_P(Interpolate, StridedAndEmptyInputs) {
  const Device d = device();
  manual_seed(5);
  const Tensor base = randn({2, 4, 6, 5}, d);
  const std::vector<Tensor> views = {base.transpose(2, 3), base.narrow(1, 1, 2),
                                     base.narrow(0, 0, 1).expand({3, 4, 6, 5}),
                                     base.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2})};
  for (const char* mode : {"nearest", "bilinear"})
    for (const Tensor& v : views) {
      const InterpolateOptions o{.size = {9, 4}, .mode = mode};
      EXPECT_TRUE(equal(interpolate(v, o), interpolate(v.contiguous(), o))) << mode << " " << v.strides();
    }
  Tensor empty = zeros({0, 3, 4, 4}, d).requires_grad_();
  const Tensor y = interpolate(empty, {.size = {8, 8}, .mode = "bilinear"});
  EXPECT_EQ(y.shape(), Shape({0, 3, 8, 8}));
  sum(y).backward();
  EXPECT_EQ(empty.grad().shape(), Shape({0, 3, 4, 4}));
}

// The adjoint adds without atomics: the same bits every run.
TEST_P(Interpolate, GradientIsDeterministic) {
  const Device d = device();
  manual_seed(11);
  const Tensor g = randn({2, 3, 96, 96}, d);
  std::vector<double> first;
  for (int run = 0; run < 3; ++run) {
    manual_seed(12);
    Tensor x = randn({2, 3, 28, 28}, d).requires_grad_();
    sum(interpolate(x, {.size = {96, 96}, .mode = "bilinear"}) * g).backward();
    const std::vector<double> v = host(x.grad());
    if (run == 0)
      first = v;
    else
      EXPECT_EQ(v, first) << "run " << run;
  }
}

// All on the device: no copy to or from the host and no wait for the device,
// forward or backward (the point of resizing there, issue 30).
TEST_P(Interpolate, StaysOnTheDevice) {
  const Device d = device();
  Tensor x = rand({4, 3, 28, 28}, d).requires_grad_();
  const Tensor g = rand({4, 3, 96, 96}, d);
  synchronize(d);
  Ledger scope;
  for (const char* mode : {"bilinear", "nearest"}) sum(interpolate(x, {.size = {96, 96}, .mode = mode}) * g).backward();
  const LedgerReport r = scope.report();
  EXPECT_EQ(r.copies(d, cpu()) + r.copies(cpu(), d), 0u) << r;
  EXPECT_EQ(r.total_syncs(), 0u) << r;
}

TEST_P(Interpolate, UpsampleModule) {
  const Device d = device();
  nn::Upsample up({.scale_factor = {2, 2}});
  nn::Upsample resize({.size = {96, 96}, .mode = "bilinear"});
  nn::Upsample odd({.scale_factor = {2, 1.5}, .mode = "bilinear", .align_corners = true});
  EXPECT_EQ(up.name(), "Upsample(scale_factor=2.0, mode=nearest)");
  EXPECT_EQ(resize.name(), "Upsample(size=96, mode=bilinear)");
  EXPECT_EQ(odd.name(), "Upsample(scale_factor=(2.0, 1.5), mode=bilinear)");
  const Tensor x = rand({1, 2, 28, 28}, d);
  EXPECT_EQ(up(x).shape(), Shape({1, 2, 56, 56}));
  EXPECT_TRUE(equal(resize(x), interpolate(x, {.size = {96, 96}, .mode = "bilinear"})));
}

TEST_P(Interpolate, ErrorsNameTheOpAndWhatWasExpected) {
  const Device d = device();
  const Tensor x = rand({1, 2, 4, 4}, d);
  const auto message = [&](const Tensor& in, const InterpolateOptions& o) -> std::string {
    try {
      interpolate(in, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THROW(interpolate(x.reshape({2, 4, 4}), {.size = {8, 8}}), ShapeError);
  EXPECT_THROW(interpolate(x.to(i64), {.size = {8, 8}}), DTypeError);
  EXPECT_THROW(interpolate(x, {.size = {8, 8}, .mode = "bicubic"}), NotSupported);
  EXPECT_THROW(interpolate(x, {.size = {8, 8}, .mode = "linear"}), ValueError);
  EXPECT_THROW(interpolate(x, {.size = {8, 8}, .mode = "cubic"}), ValueError);
  EXPECT_THROW(interpolate(x, {.size = {8, 8}, .align_corners = false}), ValueError);
  EXPECT_THROW(interpolate(x, {}), ValueError);
  EXPECT_THROW(interpolate(x, {.size = {8, 8}, .scale_factor = {2, 2}}), ValueError);
  EXPECT_THROW(interpolate(x, {.size = {0, 8}}), ValueError);
  EXPECT_THROW(interpolate(x, {.scale_factor = {-1, 2}}), ValueError);
  EXPECT_THROW(interpolate(x, {.scale_factor = {0.1, 2}}), ValueError);  // floor(4 * 0.1) = 0 rows
  EXPECT_THROW(interpolate(zeros({1, 1, 0, 3}, d), {.size = {2, 2}}), ShapeError);
  EXPECT_THROW(interpolate(Tensor{}, {.size = {2, 2}}), ValueError);
  EXPECT_EQ(message(x, {.size = {8, 8}, .mode = "cubic"}),
            "interpolate: unknown mode; expected 'nearest' or 'bilinear', got 'cubic'");
  EXPECT_EQ(message(x.reshape({2, 4, 4}), {.size = {8, 8}}),
            "interpolate: input must be [N, C, H, W]; expected 4 dims, got [2, 4, 4]");
  EXPECT_EQ(message(x, {.size = {8, 8}, .scale_factor = {2, 2}}),
            "interpolate: give exactly one of size and scale_factor; expected one, got both");
}

ANVIL_INSTANTIATE_DEVICE_TEST(Interpolate);

}  // namespace
