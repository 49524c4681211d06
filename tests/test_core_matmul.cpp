// matmul, mm, bmm, dot, outer against the float64 reference on every device:
// every rank combination of torch.matmul, broadcasting batch dims, transposed
// (non-contiguous) operands, odd and zero sizes, f32 and f64; shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/threads.h"
#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;
using ref::Domain;
using ref::Layout;

// Inputs in [-1, 1]: a k-term dot product in f32 is off by about sqrt(k) ulp.
ref::Tolerance matmul_tol(DType t, std::int64_t k) {
  if (t == f64) return {1e-10, 1e-10 * static_cast<double>(k + 1)};
  // f16 and bf16 accumulate in f32 and round once: ref::tol's one rounding.
  if (is_half(t)) return {ref::tol(t).rtol, ref::tol(t).atol + 2e-6 * static_cast<double>(k + 1)};
  return {1e-4, 2e-6 * static_cast<double>(k + 1)};
}

struct MatmulCase {
  ref::Dims a, b;
};

// Every rank combination torch.matmul accepts, with odd sizes.
const std::vector<MatmulCase> kCases = {
    {{7}, {7}},                 // dot → 0-dim
    {{1}, {1}},                 //
    {{5}, {5, 3}},              // 1-D · 2-D → [3]
    {{4, 5}, {5}},              // 2-D · 1-D → [4]
    {{1, 1}, {1, 1}},           //
    {{3, 5}, {5, 2}},           // 2-D · 2-D
    {{17, 33}, {33, 9}},        //
    {{64, 64}, {64, 64}},       //
    {{129, 67}, {67, 131}},     // past any blocking
    {{1, 300}, {300, 1}},       // long k
    {{2, 3, 4}, {2, 4, 5}},     // batched
    {{2, 3, 4}, {4, 5}},        // batch · matrix
    {{4, 5}, {3, 5, 2}},        // matrix · batch
    {{2, 1, 3, 4}, {5, 4, 6}},  // batch dims broadcast: [2, 5, 3, 6]
    {{1, 3, 4}, {6, 4, 2}},     //
    {{3}, {2, 3, 4}},           // 1-D · 3-D → [2, 4]
    {{2, 3, 4}, {4}},           // 3-D · 1-D → [2, 3]
    {{3, 0}, {0, 4}},           // k = 0: zeros
    {{0, 5}, {5, 2}},           // m = 0
    {{3, 5}, {5, 0}},           // n = 0
    {{0}, {0}},                 // empty dot = 0
    {{0, 2, 3}, {3, 4}},        // zero batch
};

struct LayoutPair {
  Layout a, b;
};
const LayoutPair kLayoutPairs[] = {{Layout::Contiguous, Layout::Contiguous},
                                   {Layout::Transposed, Layout::Contiguous},
                                   {Layout::Contiguous, Layout::Transposed},
                                   {Layout::Transposed, Layout::Transposed},
                                   {Layout::Stepped, Layout::Stepped}};

class Matmul : public anvil::testing::DeviceTest {};

TEST_P(Matmul, AgainstReference) {
  const Device d = device();
  std::uint64_t seed = 1;
  for (DType dt : {f32, f64, f16, bf16})
    for (const auto& c : kCases)
      for (const auto& lp : kLayoutPairs) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + ref::dims_str(c.a) + " " + ref::name(lp.a) + " @ " +
                     ref::dims_str(c.b) + " " + ref::name(lp.b));
        ref::guarded([&] {
          const auto a = ref::make_input(c.a, lp.a, dt, d, Domain{-1, 1}, seed++);
          const auto b = ref::make_input(c.b, lp.b, dt, d, Domain{-1, 1}, seed++);
          const Tensor out = matmul(a.t, b.t);
          EXPECT_EQ(out.dtype(), dt);
          EXPECT_EQ(out.device(), d);
          EXPECT_TRUE(ref::close(out, ref::matmul(a.r, b.r), matmul_tol(dt, c.a.back())));
          EXPECT_TRUE(ref::close(a.t.matmul(b.t), ref::matmul(a.r, b.r), matmul_tol(dt, c.a.back())));
          EXPECT_TRUE(ref::exact(a.t, a.r));
          EXPECT_TRUE(ref::exact(b.t, b.r));
        });
      }
}

TEST_P(Matmul, ViewsOfLargerTensors) {
  // Operands that are slices of bigger matrices (leading dimension > width),
  // and a batch that is itself a permuted view.
  const Device d = device();
  for (DType dt : {f32, f64, f16, bf16}) {
    SCOPED_TRACE(to_string(dt));
    const auto big = ref::make_input({40, 50}, Layout::Contiguous, dt, d, Domain{-1, 1}, 3);
    const Tensor a = big.t.slice(0, 3, 20).slice(1, 5, 30);   // [17, 25], ld 50
    const Tensor b = big.t.slice(0, 10, 35).slice(1, 1, 12);  // [25, 11], ld 50
    const ref::Array ar = ref::slice(ref::slice(big.r, 0, 3, 20), 1, 5, 30);
    const ref::Array br = ref::slice(ref::slice(big.r, 0, 10, 35), 1, 1, 12);
    EXPECT_TRUE(ref::close(matmul(a, b), ref::matmul(ar, br), matmul_tol(dt, 25)));
    EXPECT_TRUE(ref::close(mm(a, b), ref::matmul(ar, br), matmul_tol(dt, 25)));
    EXPECT_TRUE(ref::close(matmul(b.t(), a.t()), ref::matmul(ref::transpose(br, 0, 1), ref::transpose(ar, 0, 1)),
                           matmul_tol(dt, 25)));
    const auto batch = ref::make_input({3, 4, 6}, Layout::Contiguous, dt, d, Domain{-1, 1}, 4);
    const Tensor p = batch.t.permute({1, 0, 2});  // [4, 3, 6]
    const ref::Array pr = ref::permute(batch.r, {1, 0, 2});
    const auto w = ref::make_input({4, 6, 2}, Layout::Contiguous, dt, d, Domain{-1, 1}, 5);
    EXPECT_TRUE(ref::close(matmul(p, w.t), ref::matmul(pr, w.r), matmul_tol(dt, 6)));
    EXPECT_TRUE(ref::close(bmm(p, w.t), ref::matmul(pr, w.r), matmul_tol(dt, 6)));
    // A broadcast (stride-0) operand.
    const Tensor e = w.t.select(0, 1).unsqueeze(0).expand({5, 6, 2});
    const auto lhs = ref::make_input({5, 3, 6}, Layout::Transposed, dt, d, Domain{-1, 1}, 6);
    EXPECT_TRUE(ref::close(matmul(lhs.t, e), ref::matmul(lhs.r, ref::expand(ref::select(w.r, 0, 1), {5, 6, 2})),
                           matmul_tol(dt, 6)));
  }
}

// A 4-D channels-last operand (an NHWC tensor seen as NCHW) is no GEMM matrix
// over one batch stride, and a copy in its own layout is none either: it is
// copied row-major (the copy kept its layout, and the GEMM read past it).
TEST_P(Matmul, ChannelsLastOperands) {
  const Device d = device();
  for (DType dt : {f32, f64, f16}) {
    SCOPED_TRACE(to_string(dt));
    const auto nhwc = ref::make_input({2, 4, 5, 3}, Layout::Contiguous, dt, d, Domain{-1, 1}, 7);
    const Tensor x = nhwc.t.permute({0, 3, 1, 2});  // [2, 3, 4, 5], channels-last strides
    const ref::Array xr = ref::permute(nhwc.r, {0, 3, 1, 2});
    const auto right = ref::make_input({5, 2}, Layout::Contiguous, dt, d, Domain{-1, 1}, 8);
    const auto left = ref::make_input({2, 4}, Layout::Contiguous, dt, d, Domain{-1, 1}, 9);
    EXPECT_TRUE(ref::close(matmul(x, right.t), ref::matmul(xr, right.r), matmul_tol(dt, 5)));
    EXPECT_TRUE(ref::close(matmul(left.t, x), ref::matmul(left.r, xr), matmul_tol(dt, 4)));
  }
}

TEST_P(Matmul, MmBmmDotOuter) {
  const Device d = device();
  std::uint64_t seed = 77;
  for (DType dt : {f32, f64, f16, bf16}) {
    SCOPED_TRACE(to_string(dt));
    for (auto [la, lb] :
         {std::pair{Layout::Contiguous, Layout::Contiguous}, std::pair{Layout::Transposed, Layout::Stepped}}) {
      SCOPED_TRACE(std::string(ref::name(la)) + "/" + ref::name(lb));
      const auto a = ref::make_input({9, 13}, la, dt, d, Domain{-1, 1}, seed++);
      const auto b = ref::make_input({13, 7}, lb, dt, d, Domain{-1, 1}, seed++);
      EXPECT_TRUE(ref::close(mm(a.t, b.t), ref::matmul(a.r, b.r), matmul_tol(dt, 13)));
      const auto x = ref::make_input({4, 9, 13}, la, dt, d, Domain{-1, 1}, seed++);
      const auto y = ref::make_input({4, 13, 7}, lb, dt, d, Domain{-1, 1}, seed++);
      EXPECT_TRUE(ref::close(bmm(x.t, y.t), ref::matmul(x.r, y.r), matmul_tol(dt, 13)));
      const auto u = ref::make_input({1023}, lb, dt, d, Domain{-1, 1}, seed++);
      const auto v = ref::make_input({1023}, la, dt, d, Domain{-1, 1}, seed++);
      const Tensor dt_uv = dot(u.t, v.t);
      EXPECT_EQ(dt_uv.dim(), 0);
      EXPECT_TRUE(ref::close(dt_uv, ref::matmul(u.r, v.r), matmul_tol(dt, 1023)));
      const auto p = ref::make_input({5}, la, dt, d, Domain{-1, 1}, seed++);
      const auto q = ref::make_input({7}, lb, dt, d, Domain{-1, 1}, seed++);
      const Tensor o = outer(p.t, q.t);
      EXPECT_EQ(o.shape(), (Shape{5, 7}));
      EXPECT_TRUE(ref::close(
          o, ref::zip(ref::reshape(p.r, {5, 1}), ref::reshape(q.r, {1, 7}), std::multiplies<double>()), ref::tol(dt)));
    }
  }
}

// linear on [..., K]: a contiguous input is folded into one addmm (PyTorch's
// way), any other takes matmul then the bias; values and gradients as the
// composite matmul(x, w.t()) + b (matmul is checked against the reference).
TEST_P(Matmul, LinearOverLeadingDims) {
  const Device d = device();
  std::uint64_t seed = 88;
  for (DType dt : {f32, f64}) {
    SCOPED_TRACE(to_string(dt));
    for (Layout la : {Layout::Contiguous, Layout::Transposed}) {
      SCOPED_TRACE(ref::name(la));
      const auto x = ref::make_input({3, 5, 13}, la, dt, d, Domain{-1, 1}, seed++);
      const auto w = ref::make_input({7, 13}, Layout::Contiguous, dt, d, Domain{-1, 1}, seed++);
      const auto b = ref::make_input({7}, Layout::Contiguous, dt, d, Domain{-1, 1}, seed++);
      const Tensor y = linear(x.t, w.t, b.t);
      EXPECT_EQ(y.shape(), (Shape{3, 5, 7}));
      const Tensor composite = matmul(x.t, w.t.t()) + b.t;
      EXPECT_TRUE(allclose(y, composite, dt == f64 ? 1e-12 : 1e-5, dt == f64 ? 1e-12 : 1e-5));
      Tensor xg = x.t.detach().requires_grad_(), wg = w.t.detach().requires_grad_(), bg = b.t.detach().requires_grad_();
      sum(linear(xg, wg, bg) * linear(xg, wg, bg)).backward();
      Tensor xc = x.t.detach().requires_grad_(), wc = w.t.detach().requires_grad_(), bc = b.t.detach().requires_grad_();
      const Tensor yc = matmul(xc, wc.t()) + bc;
      sum(yc * yc).backward();
      for (const auto& [got, expect] : {std::pair{xg, xc}, std::pair{wg, wc}, std::pair{bg, bc}})
        EXPECT_TRUE(allclose(got.grad(), expect.grad(), dt == f64 ? 1e-10 : 1e-4, dt == f64 ? 1e-10 : 1e-4));
    }
  }
}

TEST_P(Matmul, MmOutWritesInPlace) {
  const Device d = device();
  const auto a = ref::make_input({6, 5}, Layout::Transposed, f32, d, Domain{-1, 1}, 1);
  const auto b = ref::make_input({5, 4}, Layout::Contiguous, f32, d, Domain{-1, 1}, 2);
  Tensor out = full({6, 4}, 100.0, d);
  const Tensor alias = out;
  mm_out(out, a.t, b.t);
  EXPECT_TRUE(out.is_same(alias));
  EXPECT_TRUE(ref::close(out, ref::matmul(a.r, b.r), matmul_tol(f32, 5)));
  Tensor wrong = empty({4, 6}, d);
  EXPECT_THROW(mm_out(wrong, a.t, b.t), ShapeError);
}

TEST_P(Matmul, IdentityAndKnownValues) {
  const Device d = device();
  auto a = tensor({{1.0, 2.0}, {3.0, 4.0}}, d);
  auto b = tensor({{5.0, 6.0}, {7.0, 8.0}}, d);
  EXPECT_TRUE(ref::exact(matmul(a, b), ref::Array({2, 2}, {19, 22, 43, 50})));
  EXPECT_TRUE(ref::exact(matmul(eye(2, std::nullopt, d), b), ref::from_tensor(b)));
  EXPECT_TRUE(ref::exact(matmul(a, tensor({1.0, 1.0}, d)), ref::Array({2}, {3, 7})));
  EXPECT_TRUE(ref::exact(matmul(tensor({1.0, 1.0}, d), a), ref::Array({2}, {4, 6})));
  EXPECT_TRUE(ref::exact(dot(tensor({1.0, 2.0, 3.0}, d), tensor({4.0, 5.0, 6.0}, d)), ref::Array({}, {32})));
}

// Attention's head views (Note [Two-level batches]): [N, L, h, d] seen as
// [N, h, L, d], whose batch dims no single stride steps through, with a
// transposed one, and operands broadcast over either batch level. The
// values are those of contiguous copies in the same orientation (a GEMM's
// bits may depend on whether an operand is transposed), bit for bit, on
// every device; gradients too.
TEST_P(Matmul, HeadViewsMatchTheirContiguousCopies) {
  const Device d = device();
  for (DType dt : {f32, f64, f16, bf16}) {
    SCOPED_TRACE(to_string(dt));
    const std::int64_t N = 3, L = 5, S = 7, h = 4, dh = 6;
    const auto qx = ref::make_input({N, L, h, dh}, Layout::Contiguous, dt, d, Domain{-1, 1}, 11);
    const auto kx = ref::make_input({N, S, h, dh}, Layout::Contiguous, dt, d, Domain{-1, 1}, 12);
    const Tensor q = qx.t.transpose(1, 2), k = kx.t.transpose(1, 2);  // [N, h, L, dh], [N, h, S, dh]
    const Tensor scores = matmul(q, k.transpose(-2, -1));             // [N, h, L, S]
    EXPECT_TRUE(scores.equal(matmul(q.contiguous(), k.contiguous().transpose(-2, -1))));
    EXPECT_TRUE(ref::close(scores, ref::matmul(ref::permute(qx.r, {0, 2, 1, 3}), ref::permute(kx.r, {0, 2, 3, 1})),
                           matmul_tol(dt, dh)));
    EXPECT_TRUE(matmul(scores, k).equal(matmul(scores, k.contiguous())));  // [N, h, L, dh]
    // B broadcast over the outer level (one per head) and over the inner (one per item).
    const auto per_head = ref::make_input({h, dh, S}, Layout::Contiguous, dt, d, Domain{-1, 1}, 13);
    EXPECT_TRUE(matmul(q, per_head.t).equal(matmul(q.contiguous(), per_head.t)));
    const auto per_item = ref::make_input({N, 1, dh, S}, Layout::Contiguous, dt, d, Domain{-1, 1}, 14);
    EXPECT_TRUE(matmul(q, per_item.t).equal(matmul(q.contiguous(), per_item.t)));
    // The longer batch stride inside: [h, N] over the same storage. The CPU
    // takes another kernel for it than for the copies, so only the values hold.
    const Tensor qt = qx.t.permute({2, 0, 1, 3}), kt = kx.t.permute({2, 0, 1, 3});  // [h, N, L, dh]
    EXPECT_TRUE(ref::close(matmul(qt, kt.transpose(-2, -1)),
                           ref::matmul(ref::permute(qx.r, {2, 0, 1, 3}), ref::permute(kx.r, {2, 0, 3, 1})),
                           matmul_tol(dt, dh)));
  }
  // Gradients through the views, against the same graph on copies.
  const auto qx = ref::make_input({2, 5, 3, 4}, Layout::Contiguous, f64, d, Domain{-1, 1}, 15);
  const auto kx = ref::make_input({2, 6, 3, 4}, Layout::Contiguous, f64, d, Domain{-1, 1}, 16);
  Tensor gq[2], gk[2];
  for (int copy = 0; copy < 2; ++copy) {
    const Tensor qv = qx.t.detach().requires_grad_(), kv = kx.t.detach().requires_grad_();
    Tensor q = qv.transpose(1, 2), k = kv.transpose(1, 2);
    if (copy) {
      q = q.contiguous();
      k = k.contiguous();
    }
    const Tensor s = matmul(q, k.transpose(-2, -1));
    (matmul(s, k) * matmul(s, k)).sum().backward();
    gq[copy] = qv.grad();
    gk[copy] = kv.grad();
  }
  EXPECT_TRUE(gq[0].equal(gq[1]));
  EXPECT_TRUE(gk[0].equal(gk[1]));
}

// On the CPU, which takes a two-level batch, the head views are read where
// they lie: one GEMM and no copy.
TEST(MatmulCpuTwoLevelBatch, HeadViewsAreNotCopied) {
  const Tensor q = randn({8, 17, 4, 16}).transpose(1, 2), k = randn({8, 17, 4, 16}).transpose(1, 2);
  for (DType dt : {f32, f64, bf16}) {
    SCOPED_TRACE(to_string(dt));
    const Tensor qd = q.to(dt), kd = k.to(dt);
    const Ledger scope;
    const Tensor scores = matmul(qd, kd.transpose(-2, -1));
    const DeviceWork work = scope.report().device_work(cpu());
    EXPECT_EQ(work.launches, 1u) << scope.report();
    EXPECT_EQ(work.bytes_allocated, static_cast<std::uint64_t>(scores.numel()) * element_size(dt));
    EXPECT_EQ(work.bytes_read, static_cast<std::uint64_t>(q.numel() + k.numel()) * element_size(dt));
  }
}

// A weight's gradient, a small output over a long k (Note [Splitting k
// between threads]): on two threads its k is shared, and the result matches
// the reference with A either way round, a k that leaves a short last chunk,
// alpha and beta, a bias and a C full of NaN (beta 0 never reads it); on one
// thread nothing is split. The load bound is off and the wake cost fixed, as
// ThreadsGuard does in test_core_threads.cpp: team sizes follow the work only
// (64 x k x 64 is two threads' work at the reference wake).
TEST(MatmulCpuKSplit, WeightGradientsShareTheirK) {
  namespace cpu_threads = anvil::cpu_backend;
  const int saved = num_threads();
  cpu_threads::set_load_bound(false);
  cpu_threads::set_parallel_wake_us(cpu_threads::kReferenceWakeUs);
  std::uint64_t seed = 900;
  for (const int threads : {2, 1}) {
    set_num_threads(threads);
    for (DType dt : {f32, f64})
      for (const std::int64_t k : {2176, 2100})
        for (const Layout la : {Layout::Transposed, Layout::Contiguous}) {
          SCOPED_TRACE(std::string(to_string(dt)) + " k " + std::to_string(k) + " on " + std::to_string(threads));
          const auto a = ref::make_input({64, k}, la, dt, cpu(), Domain{-1, 1}, seed++);
          const auto b = ref::make_input({k, 64}, Layout::Contiguous, dt, cpu(), Domain{-1, 1}, seed++);
          const auto c = ref::make_input({64, 64}, Layout::Contiguous, dt, cpu(), Domain{-1, 1}, seed++);
          const auto bias = ref::make_input({64}, Layout::Contiguous, dt, cpu(), Domain{-1, 1}, seed++);
          const ref::Array ab = ref::matmul(a.r, b.r);
          cpu_threads::reset_parallel_stats();
          Tensor out = full({64, 64}, std::nan(""), cpu(), dt);
          mm_out(out, a.t, b.t);
          EXPECT_TRUE(ref::close(out, ab, matmul_tol(dt, k)));
          const ref::Array scaled = ref::zip(c.r, ab, [](double x, double y) { return 0.5 * x + 2.0 * y; });
          EXPECT_TRUE(ref::close(addmm(c.t, a.t, b.t, 0.5, 2.0), scaled, matmul_tol(dt, k)));
          // Linear's case: the bias in every row (the add in f64 is the reference).
          const Tensor want_bias = ref::to_tensor(ab, f64, cpu()) + bias.t.to(f64);
          const double tol = dt == f32 ? 1e-4 : 1e-10;
          EXPECT_TRUE(allclose(addmm(bias.t, a.t, b.t).to(f64), want_bias, tol, tol));
          EXPECT_EQ(cpu_threads::parallel_stats().gemm_k_split, threads == 2 ? 3u : 0u);
        }
    // Operands and an output that start inside larger tensors (offsets not 0).
    for (const Layout la : {Layout::Transposed, Layout::Contiguous}) {
      SCOPED_TRACE(std::string(la == Layout::Transposed ? "A transposed" : "A") + " at an offset, on " +
                   std::to_string(threads));
      const auto a = ref::make_input({70, 2100}, la, f32, cpu(), Domain{-1, 1}, seed++);
      const auto b = ref::make_input({2107, 64}, Layout::Contiguous, f32, cpu(), Domain{-1, 1}, seed++);
      const Tensor av = a.t.narrow(0, 3, 64), bv = b.t.narrow(0, 7, 2100);
      const ref::Array ab = ref::matmul(ref::slice(a.r, 0, 3, 67), ref::slice(b.r, 0, 7, 2107));
      Tensor whole = full({70, 64}, std::nan(""), cpu(), f32);
      Tensor out = whole.narrow(0, 5, 64);
      cpu_threads::reset_parallel_stats();
      mm_out(out, av, bv);
      EXPECT_TRUE(ref::close(out, ab, matmul_tol(f32, 2100)));
      EXPECT_TRUE(ref::close(matmul(av, bv), ab, matmul_tol(f32, 2100)));
      EXPECT_EQ(cpu_threads::parallel_stats().gemm_k_split, threads == 2 ? 2u : 0u);
      EXPECT_TRUE(std::isnan(whole[0][0].item<float>())) << "nothing written before the view";
    }
  }
  cpu_threads::set_parallel_wake_us(0);
  cpu_threads::set_load_bound(true);
  set_num_threads(saved);
}

// More batch entries than CUDA allows grid blocks in z (65535): device
// kernels run it in pieces, each offset into A, B and C.
TEST_P(Matmul, BatchLargerThanOneLaunchGrid) {
  const Device d = device();
  const std::int64_t batch = 65535 + 4465;
  Tensor a = randint(-7, 7, {batch, 2, 2}, cpu());
  Tensor b = randint(-5, 5, {batch, 2, 2}, cpu());
  const std::vector<std::int64_t> want = bmm(a, b).to_vector<std::int64_t>();
  EXPECT_EQ(bmm(a.to(d), b.to(d)).to_vector<std::int64_t>(), want);
}

TEST_P(Matmul, ShapeMismatchNamesTheOpAndBothShapes) {
  const Device d = device();
  auto expect_shape_error = [](const std::function<void()>& f, const std::vector<std::string>& pieces) {
    try {
      f();
      ADD_FAILURE() << "no ShapeError";
    } catch (const ShapeError& e) {
      const std::string m = e.what();
      for (const auto& p : pieces) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' missing from: " << m;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type: " << e.what();
    }
  };
  auto a = ones({2, 3}, d), b = ones({4, 5}, d);
  expect_shape_error([&] { (void)matmul(a, b); }, {"matmul", "[2, 3]", "[4, 5]"});
  expect_shape_error([&] { (void)a.matmul(b); }, {"matmul", "[2, 3]", "[4, 5]"});
  expect_shape_error([&] { (void)matmul(ones({3}, d), ones({4}, d)); }, {"matmul", "[3]", "[4]"});
  expect_shape_error(
      [&] {
        (void)matmul(ones({2, 3, 4}, d), ones({3, 5, 2}, d));
      },
      {"matmul", "[2, 3, 4]", "[3, 5, 2]"});
  // Batch dims that do not broadcast.
  expect_shape_error(
      [&] {
        (void)matmul(ones({2, 3, 4}, d), ones({3, 4, 5}, d));
      },
      {"matmul", "[2, 3, 4]", "[3, 4, 5]"});
  // 0-dim operands.
  expect_shape_error([&] { (void)matmul(ones({}, d), ones({3}, d)); }, {"matmul"});
  expect_shape_error([&] { (void)mm(a, b); }, {"mm", "[2, 3]", "[4, 5]"});
  expect_shape_error([&] { (void)mm(ones({2, 3, 4}, d), ones({4, 2}, d)); }, {"mm"});
  expect_shape_error([&] { (void)bmm(ones({2, 3, 4}, d), ones({3, 4, 5}, d)); }, {"bmm"});
  expect_shape_error([&] { (void)bmm(ones({3, 4}, d), ones({4, 5}, d)); }, {"bmm"});
  expect_shape_error([&] { (void)dot(ones({3}, d), ones({4}, d)); }, {"dot", "[3]", "[4]"});
  expect_shape_error([&] { (void)dot(ones({3, 1}, d), ones({3, 1}, d)); }, {"dot"});
  expect_shape_error([&] { (void)outer(ones({3, 1}, d), ones({3}, d)); }, {"outer"});
  // Still usable.
  EXPECT_TRUE(ref::exact(matmul(ones({2, 3}, d), ones({3, 1}, d)), ref::Array::filled({2, 1}, 3)));
}

TEST_P(Matmul, MixedDTypesAreAnError) {
  const Device d = device();
  // torch.matmul does not promote: f32 @ f64 is an error.
  EXPECT_THROW(matmul(ones({2, 2}, d), ones({2, 2}, d, f64)), DTypeError);
}

ANVIL_INSTANTIATE_DEVICE_TEST(Matmul);

// The CPU backend gives small f32/f64 products to libxsmm and the rest to
// OpenBLAS (Note [libxsmm for small GEMMs] in cpu_gemm.cpp). Each case names
// the path it must take, so a product routed the wrong way fails here as
// surely as a wrong result does; results are checked against the
// double-precision reference.
TEST(MatmulCpuSmallGemm, EachPathAgainstReference) {
  namespace cpu_threads = anvil::cpu_backend;
  const Device d = cpu();
  struct Case {
    const char* what;
    ref::Dims a, b;
    Layout la, lb;
    bool small;  // libxsmm's path
  };
  const Case cases[] = {
      {"64^3", {64, 64}, {64, 64}, Layout::Contiguous, Layout::Contiguous, true},
      {"A transposed", {64, 48}, {48, 32}, Layout::Transposed, Layout::Contiguous, true},
      {"stepped", {24, 40}, {40, 16}, Layout::Stepped, Layout::Stepped, true},
      {"tiny", {3, 5}, {5, 8}, Layout::Contiguous, Layout::Contiguous, true},
      {"long rows", {6, 25}, {25, 100}, Layout::Contiguous, Layout::Contiguous, true},
      {"batched", {5, 16, 32}, {5, 32, 24}, Layout::Contiguous, Layout::Contiguous, true},
      {"batch · matrix", {4, 12, 20}, {20, 8}, Layout::Transposed, Layout::Contiguous, true},
      {"B transposed", {64, 64}, {64, 64}, Layout::Contiguous, Layout::Transposed, false},
      {"short odd rows", {64, 256}, {256, 10}, Layout::Contiguous, Layout::Contiguous, false},
      {"the chapter's 100^3", {100, 100}, {100, 100}, Layout::Contiguous, Layout::Contiguous, true},
      {"100^3, A transposed", {100, 100}, {100, 100}, Layout::Transposed, Layout::Contiguous, false},
      {"past the crossover", {112, 112}, {112, 112}, Layout::Contiguous, Layout::Contiguous, false},
      {"long k past 80^3", {16, 512}, {512, 96}, Layout::Contiguous, Layout::Contiguous, false},
  };
  std::uint64_t seed = 500;
  for (DType dt : {f32, f64})
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(to_string(dt)) + " " + c.what);
      const auto a = ref::make_input(c.a, c.la, dt, d, Domain{-1, 1}, seed++);
      const auto b = ref::make_input(c.b, c.lb, dt, d, Domain{-1, 1}, seed++);
      cpu_threads::reset_parallel_stats();
      const Tensor out = matmul(a.t, b.t);
      const auto stats = cpu_threads::parallel_stats();
      EXPECT_EQ(stats.gemm_small, c.small ? 1u : 0u);
      EXPECT_EQ(stats.gemm_single + stats.gemm_threaded, c.small ? 0u : 1u);
      EXPECT_TRUE(ref::close(out, ref::matmul(a.r, b.r), matmul_tol(dt, c.a.back())));
    }
}

// C = A·B into a C full of NaN (beta = 0 never reads C: no NaN may
// survive), then addmm and baddbmm at beta = alpha = 1 (the sum in the GEMM),
// at other scales and at beta = 0, against beta·C + alpha·A·B in double.
// A is [32, 40], B [40, 16] in `b_layout`, C [32, 16].
void expect_gemm_scales_and_overwrites(DType dt, Layout b_layout, std::uint64_t seed) {
  const Device d = cpu();
  const auto a = ref::make_input({32, 40}, Layout::Contiguous, dt, d, Domain{-1, 1}, seed);
  const auto b = ref::make_input({40, 16}, b_layout, dt, d, Domain{-1, 1}, seed + 1);
  const auto c = ref::make_input({32, 16}, Layout::Contiguous, dt, d, Domain{-1, 1}, seed + 2);
  const ref::Array ab = ref::matmul(a.r, b.r);
  Tensor out = full({32, 16}, std::nan(""), d, dt);
  mm_out(out, a.t, b.t);
  EXPECT_TRUE(ref::close(out, ab, matmul_tol(dt, 40)));
  // beta = 0 ignores the input, NaN included, as PyTorch.
  const Tensor nan_input = full({32, 16}, std::nan(""), d, dt);
  EXPECT_TRUE(ref::close(addmm(nan_input, a.t, b.t, 0.0, 1.0), ab, matmul_tol(dt, 40)));
  for (const auto& [beta, alpha] : {std::pair{1.0, 1.0}, std::pair{0.5, 2.0}, std::pair{0.0, 1.0}}) {
    SCOPED_TRACE(std::to_string(beta) + " " + std::to_string(alpha));
    const ref::Array want =
        ref::zip(c.r, ab, [&](double x, double y) { return (beta == 0 ? 0.0 : beta * x) + alpha * y; });
    EXPECT_TRUE(ref::close(addmm(c.t, a.t, b.t, beta, alpha), want, matmul_tol(dt, 40)));
    const Tensor batched = baddbmm(c.t.unsqueeze(0).expand({3, 32, 16}), a.t.unsqueeze(0).expand({3, 32, 40}),
                                   b.t.unsqueeze(0).expand({3, 40, 16}), beta, alpha);
    for (std::int64_t i = 0; i < 3; ++i) EXPECT_TRUE(ref::close(batched.select(0, i), want, matmul_tol(dt, 40)));
  }
}

// f32 and f64 products this small are libxsmm's (beta = 1 is its kernel
// without BETA_0).
TEST(MatmulCpuSmallGemm, AccumulateAndOverwrite) {
  namespace cpu_threads = anvil::cpu_backend;
  for (DType dt : {f32, f64}) {
    SCOPED_TRACE(to_string(dt));
    cpu_threads::reset_parallel_stats();
    expect_gemm_scales_and_overwrites(dt, Layout::Contiguous, 1);
    EXPECT_GE(cpu_threads::parallel_stats().gemm_small, 7u) << "these products are libxsmm's";
    EXPECT_EQ(cpu_threads::parallel_stats().gemm_single, 0u);
  }
}

// f32 with B transposed is past libxsmm: oneDNN's matmul on CPUs with
// AVX-512 (Note [GEMM through oneDNN]), OpenBLAS elsewhere.
TEST(MatmulCpuLibraryGemm, F32ScalesAccumulatesAndOverwrites) {
  namespace cpu_threads = anvil::cpu_backend;
  cpu_threads::reset_parallel_stats();
  expect_gemm_scales_and_overwrites(f32, Layout::Transposed, 21);
  const auto stats = cpu_threads::parallel_stats();
  EXPECT_EQ(stats.gemm_small, 0u);
  EXPECT_GE(stats.gemm_single + stats.gemm_threaded, 7u) << "these products are a library's";
}

// bf16 on the CPU goes to oneDNN where the CPU has bf16 instructions (Note
// [GEMM through oneDNN]), else through f32: the same contract either way.
TEST(MatmulCpuBf16, ScalesAccumulatesAndOverwrites) { expect_gemm_scales_and_overwrites(bf16, Layout::Transposed, 11); }

// addmm with a row of bias (Linear's case) is one backend call on the CPU
// (FusedOp::GemmBias): oneDNN adds the bias in its epilogue; libxsmm and
// OpenBLAS get it written into C's rows first. Each path against the double
// reference, with the bias as [n], as [1, n] and as a strided view (not a
// contiguous row: the copy first, two calls), and its gradients unchanged.
TEST(MatmulCpuGemmBias, EachPathAddsTheRowOnce) {
  struct Case {
    const char* what;
    DType dt;
    std::int64_t m, k, n;
    Layout lb;
  };
  const Case cases[] = {
      {"oneDNN or OpenBLAS f32", f32, 64, 96, 40, Layout::Transposed},
      {"libxsmm f32", f32, 16, 24, 32, Layout::Contiguous},
      {"libxsmm f64", f64, 16, 24, 32, Layout::Contiguous},
      {"OpenBLAS f64", f64, 64, 96, 40, Layout::Transposed},
      {"bf16", bf16, 32, 40, 16, Layout::Transposed},
  };
  std::uint64_t seed = 900;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const auto a = ref::make_input({c.m, c.k}, Layout::Contiguous, c.dt, cpu(), Domain{-1, 1}, seed++);
    const auto b = ref::make_input({c.k, c.n}, c.lb, c.dt, cpu(), Domain{-1, 1}, seed++);
    const Tensor wide = randn({c.n, 2}).to(c.dt);
    const Tensor bias = wide.select(1, 0).contiguous();
    const ref::Array ab = ref::matmul(a.r, b.r);
    const std::vector<double> row = bias.to(f64).to_vector<double>();
    ref::Array want = ab;
    for (std::size_t i = 0; i < want.v.size(); ++i) want.v[i] += row[i % static_cast<std::size_t>(c.n)];
    for (const auto& [b_in, calls] :
         {std::pair{bias, 1u}, std::pair{bias.reshape({1, c.n}), 1u}, std::pair{wide.select(1, 0), 2u}}) {
      Ledger ledger;
      const Tensor out = addmm(b_in, a.t, b.t);
      EXPECT_EQ(ledger.report().device_work(cpu()).launches, calls) << ledger.report();
      EXPECT_TRUE(ref::close(out, want, matmul_tol(c.dt, c.k)));
    }
  }
  // The gradients are addmm's, whichever way the bias was added.
  const Tensor x = randn({8, 5}).requires_grad_(), w = randn({5, 3}).requires_grad_(),
               bias = randn({3}).requires_grad_();
  addmm(bias, x, w).sum().backward();
  EXPECT_TRUE(allclose(bias.grad(), full({3}, 8.0)));
  EXPECT_TRUE(allclose(x.grad(), ones({8, 3}).matmul(w.detach().t()), 1e-5, 1e-6));
  EXPECT_TRUE(allclose(w.grad(), x.detach().t().matmul(ones({8, 3})), 1e-5, 1e-6));
}

}  // namespace
