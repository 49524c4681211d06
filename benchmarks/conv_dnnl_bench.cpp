// Issue 12: conv2d on the CPU, anvil's own path (im2col + OpenBLAS GEMM,
// through the public API and autograd) against oneDNN (Debian's libdnnl 2.6,
// what LibTorch 1.13 uses for CPU convolution), on LeNet's and ResNet-18's
// shapes, at 1 and 2 threads. Prints one row per shape and thread count:
//   anvil's im2col path (ANVIL_CONV_IM2COL=1) fwd and bwd (data + weight,
//   through autograd), anvil's conv2d as it runs by default (oneDNN in the
//   CPU backend where it takes the shape; Note [oneDNN convolution in the
//   CPU backend]), fwd and bwd, then oneDNN called directly: fwd,
//   bwd-data, bwd-weight, each with plain nchw memory and with
//   format_tag::any (oneDNN's blocked layouts, plus the reorders from and to
//   nchw that an NCHW library would pay on every call), and with nhwc
//   activations (anvil's conv2d output is a channels-last view) and weights
//   in oneDNN's choice, their reorder counted.
// Median of `reps` runs after a warm-up, ms. Used for Note [oneDNN for CPU
// convolution]. Usage: bench_conv_dnnl [reps] [threads...]
//
// Note [oneDNN for CPU convolution]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Measured on issue 12's 2-core AVX2 machine under load (libdnnl 2.6.3 on
// libgomp), forward + both gradients, oneDNN's time / anvil's im2col path's:
// oneDNN's nchw path is our algorithm (im2col + GEMM) at our speed; its direct
// jit:avx2 kernels (`any`, nhwc) win where the input has channels to vectorise
// over (LeNet's second conv 0.3-0.5x, ResNet-18's 3x3 layers 0.65-0.9x) and
// lose where C_in = 1 (1.0-2.6x: blocked layouts pad one channel to 8).
// Decision: oneDNN's direct convolution behind the CPU backend for f32 with
// C_in >= 4 (1 loses, 6 wins), primitives cached by shape, threads set around
// each call from the work's size as for OpenBLAS; never the nchw gemm path;
// im2col + OpenBLAS for the rest. Done in cpu_conv.cpp (Note [oneDNN
// convolution in the CPU backend]). The tables: benchmarks/README.md.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "anvil/anvil.h"

namespace {

struct Shape {
  const char* name;
  int n, c, h, w, o, k, stride, pad;
};

const std::vector<Shape> kShapes = {
    {"lenet c1 1->6 5x5 p2 28", 256, 1, 28, 28, 6, 5, 1, 2},
    {"lenet c2 6->16 5x5 14", 256, 6, 14, 14, 16, 5, 1, 0},
    {"d2l lenet 1->20 3x3 28", 256, 1, 28, 28, 20, 3, 1, 0},
    {"d2l lenet 20->50 5x5 13", 256, 20, 13, 13, 50, 5, 1, 0},
    {"resnet 64->64 3x3 56 n8", 8, 64, 56, 56, 64, 3, 1, 1},
    {"resnet 128->128 3x3 28 n8", 8, 128, 28, 28, 128, 3, 1, 1},
    {"resnet 256->256 3x3 14 n8", 8, 256, 14, 14, 256, 3, 1, 1},
    {"resnet 512->512 3x3 7 n8", 8, 512, 7, 7, 512, 3, 1, 1},
};

double median_ms(int reps, const std::function<void()>& f) {
  f();  // warm-up: primitive creation, caches
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Times {
  double fwd = 0, bwd_data = 0, bwd_weight = 0;
};

// anvil through its public API: forward alone, then forward + backward
// (both gradients), the backward's share being the difference.
Times anvil_times(const Shape& s, int reps) {
  using namespace anvil;
  const Tensor x = randn({s.n, s.c, s.h, s.w}).requires_grad_();
  const Tensor wt = randn({s.o, s.c, s.k, s.k}).requires_grad_();
  const Tensor b = randn({s.o}).requires_grad_();
  Times t;
  t.fwd = median_ms(reps, [&] {
    NoGradGuard g;
    Tensor y = conv2d(x, wt, b, {s.stride, s.stride}, {s.pad, s.pad});
  });
  const double both = median_ms(reps, [&] {
    Tensor y = conv2d(x, wt, b, {s.stride, s.stride}, {s.pad, s.pad});
    y.backward(ones_like(y));
  });
  t.bwd_data = both - t.fwd;  // data and weight together
  return t;
}

// oneDNN: forward, backward-data, backward-weights (with bias), memory either
// plain nchw/oihw or format_tag::any with reorders from/to nchw counted.
enum class Layout { Nchw, Any, Nhwc };
const char* name(Layout l) { return l == Layout::Nchw ? "nchw" : l == Layout::Any ? "any" : "nhwc"; }

Times dnnl_times(const Shape& s, int reps, Layout layout) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  const int oh = (s.h + 2 * s.pad - s.k) / s.stride + 1, ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
  const memory::dims xd = {s.n, s.c, s.h, s.w}, wd = {s.o, s.c, s.k, s.k}, bd = {s.o}, yd = {s.n, s.o, oh, ow};
  const memory::dims strides = {s.stride, s.stride}, pad = {s.pad, s.pad};
  // Nhwc: activations given and wanted channels-last (no reorder), weights in
  // oneDNN's choice (reordered from oihw, counted).
  const tag act = layout == Layout::Nhwc ? tag::nhwc : tag::nchw;
  auto md = [&](const memory::dims& d, tag plain) {
    const bool free = layout == Layout::Any || (layout == Layout::Nhwc && plain == tag::oihw);
    return memory::desc(d, dt::f32, free ? tag::any : plain == tag::oihw ? plain : act);
  };
  memory xu({xd, dt::f32, act}, eng), wu({wd, dt::f32, tag::oihw}, eng), bu({bd, dt::f32, tag::x}, eng),
      yu({yd, dt::f32, act}, eng);
  memory dxu({xd, dt::f32, act}, eng), dwu({wd, dt::f32, tag::oihw}, eng), dbu({bd, dt::f32, tag::x}, eng),
      dyu({yd, dt::f32, act}, eng);
  for (memory* m : {&xu, &wu, &bu, &dyu}) {
    float* p = static_cast<float*>(m->get_data_handle());
    const std::size_t n = m->get_desc().get_size() / sizeof(float);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<float>((i * 7919) % 17) * 0.1f - 0.8f;
  }
  const auto fd = convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                            md(xd, tag::nchw), md(wd, tag::oihw), memory::desc(bd, dt::f32, tag::x),
                                            md(yd, tag::nchw), strides, pad, pad);
  const convolution_forward::primitive_desc fpd(fd, eng);
  const auto bdd = convolution_backward_data::desc(algorithm::convolution_direct, md(xd, tag::nchw), md(wd, tag::oihw),
                                                   md(yd, tag::nchw), strides, pad, pad);
  const convolution_backward_data::primitive_desc bdpd(bdd, eng, fpd);
  const auto bwd =
      convolution_backward_weights::desc(algorithm::convolution_direct, md(xd, tag::nchw), md(wd, tag::oihw),
                                         memory::desc(bd, dt::f32, tag::x), md(yd, tag::nchw), strides, pad, pad);
  const convolution_backward_weights::primitive_desc bwpd(bwd, eng, fpd);
  // Which kernel oneDNN picked (jit:avx2, gemm:jit, ref, ...), on stderr.
  std::fprintf(stderr, "%s %s: fwd %s, bwd-data %s, bwd-weight %s\n", s.name, name(layout), fpd.impl_info_str(),
               bdpd.impl_info_str(), bwpd.impl_info_str());
  convolution_forward fwd(fpd);
  convolution_backward_data bwdd(bdpd);
  convolution_backward_weights bwdw(bwpd);
  // Reorder `from` into `to_desc` when the layouts differ (timed with the op).
  auto to = [&](const memory& from, const memory::desc& want) {
    if (from.get_desc() == want) return from;
    memory m(want, eng);
    reorder(from, m).execute(st, const_cast<memory&>(from), m);
    return m;
  };
  auto back = [&](const memory& from, memory& plain) {
    if (from.get_desc() != plain.get_desc()) reorder(from, plain).execute(st, const_cast<memory&>(from), plain);
  };
  Times t;
  t.fwd = median_ms(reps, [&] {
    memory x = to(xu, fpd.src_desc()), w = to(wu, fpd.weights_desc());
    memory y = fpd.dst_desc() == yu.get_desc() ? yu : memory(fpd.dst_desc(), eng);
    fwd.execute(st, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, bu}, {DNNL_ARG_DST, y}});
    back(y, yu);
    st.wait();
  });
  t.bwd_data = median_ms(reps, [&] {
    memory dy = to(dyu, bdpd.diff_dst_desc()), w = to(wu, bdpd.weights_desc());
    memory dx = bdpd.diff_src_desc() == dxu.get_desc() ? dxu : memory(bdpd.diff_src_desc(), eng);
    bwdd.execute(st, {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, dx}});
    back(dx, dxu);
    st.wait();
  });
  t.bwd_weight = median_ms(reps, [&] {
    memory dy = to(dyu, bwpd.diff_dst_desc()), x = to(xu, bwpd.src_desc());
    memory dw = bwpd.diff_weights_desc() == dwu.get_desc() ? dwu : memory(bwpd.diff_weights_desc(), eng);
    bwdw.execute(st,
                 {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_WEIGHTS, dw}, {DNNL_ARG_DIFF_BIAS, dbu}});
    back(dw, dwu);
    st.wait();
  });
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 9;
  std::vector<int> threads;
  for (int i = 2; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  if (threads.empty()) threads = {1, 2};
  std::printf("%-27s %3s | %7s %7s %7s | %7s %7s %7s", "shape", "thr", "i2c fwd", "bwd", "sum", "anv fwd", "bwd",
              "sum");
  for (const char* l : {"nchw", "any", "nhwc"}) std::printf(" | %4s fwd %7s %7s %7s", l, "bwd-d", "bwd-w", "sum");
  std::printf("\n");
  for (const Shape& s : kShapes)
    for (int th : threads) {
      anvil::set_num_threads(th);
      omp_set_num_threads(th);
      // anvil's im2col + OpenBLAS path (forced), then conv2d as it runs by
      // default (oneDNN inside the CPU backend where it takes the shape).
      setenv("ANVIL_CONV_IM2COL", "1", 1);
      const Times i2c = anvil_times(s, reps);
      unsetenv("ANVIL_CONV_IM2COL");
      const Times a = anvil_times(s, reps);
      std::printf("%-27s %3d | %7.2f %7.2f %7.2f | %7.2f %7.2f %7.2f", s.name, th, i2c.fwd, i2c.bwd_data,
                  i2c.fwd + i2c.bwd_data, a.fwd, a.bwd_data, a.fwd + a.bwd_data);
      for (Layout l : {Layout::Nchw, Layout::Any, Layout::Nhwc}) {
        const Times d = dnnl_times(s, reps, l);
        std::printf(" | %8.2f %7.2f %7.2f %7.2f", d.fwd, d.bwd_data, d.bwd_weight, d.fwd + d.bwd_data + d.bwd_weight);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  return 0;
}
