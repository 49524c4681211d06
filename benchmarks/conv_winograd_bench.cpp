// oneDNN's Winograd convolution against its direct one (Note [Winograd
// convolution on the CPU] in src/backends/cpu/cpu_conv.cpp), one row per
// shape: 3x3 stride-1 padding-1 f32, C = O, in oneDNN's chosen layouts
// (`any`, as the CPU backend runs it), operands random normal (left
// uninitialised, garbage with denormals made the first measurements
// meaningless). Each cell is Winograd ms / direct ms, best of up to 7 runs;
// below 1 Winograd wins. Threads: OMP_NUM_THREADS. On a CPU without
// AVX-512 oneDNN has no f32 Winograd and the row says so.
// Usage: bench_conv_winograd [batch...]   (default 32 64 128 256)
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <unordered_map>
#include <vector>

namespace {

using dnnl::algorithm;
using dnnl::memory;
using Tag = memory::format_tag;

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <class F>
double best_ms(F&& run) {
  run();  // warm-up
  double best = 1e30;
  const double start = seconds();
  for (int i = 0; i < 7 && (i < 3 || seconds() - start < 0.3); ++i) {
    const double t = seconds();
    run();
    best = std::min(best, seconds() - t);
  }
  return best * 1e3;
}

memory filled(const memory::desc& d, const dnnl::engine& engine, std::mt19937& rng) {
  memory m(d, engine);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < d.get_size() / sizeof(float); ++i) p[i] = normal(rng);
  return m;
}

// Forward, data gradient and weight gradient of one shape with `alg`, ms.
std::array<double, 3> time_directions(algorithm alg, memory::dim n, memory::dim c, memory::dim h,
                                      const dnnl::engine& engine, dnnl::stream& s) {
  using dnnl::convolution_backward_data;
  using dnnl::convolution_backward_weights;
  using dnnl::convolution_forward;
  std::mt19937 rng(1);
  const memory::desc image({n, c, h, h}, memory::data_type::f32, Tag::any),
      weight({c, c, 3, 3}, memory::data_type::f32, Tag::any), bias({c}, memory::data_type::f32, Tag::x),
      out({n, c, h, h}, memory::data_type::f32, Tag::any);
  const memory::dims stride{1, 1}, dilate{0, 0}, pad{1, 1};
  const convolution_forward::primitive_desc fwd(convolution_forward::desc(dnnl::prop_kind::forward_training, alg, image,
                                                                          weight, bias, out, stride, dilate, pad, pad),
                                                engine);
  memory x = filled(fwd.src_desc(), engine, rng), w = filled(fwd.weights_desc(), engine, rng),
         b = filled(fwd.bias_desc(), engine, rng), y = filled(fwd.dst_desc(), engine, rng);
  const convolution_backward_data::primitive_desc data(
      convolution_backward_data::desc(alg, image, weight, out, stride, dilate, pad, pad), engine, fwd);
  const convolution_backward_weights::primitive_desc grad(
      convolution_backward_weights::desc(alg, image, weight, bias, out, stride, dilate, pad, pad), engine, fwd);
  memory gx = filled(data.diff_src_desc(), engine, rng), gw = filled(grad.diff_weights_desc(), engine, rng),
         gb = filled(grad.diff_bias_desc(), engine, rng);
  const auto timed = [&](const dnnl::primitive& p, std::unordered_map<int, memory> args) {
    return best_ms([&] {
      p.execute(s, args);
      s.wait();
    });
  };
  return {
      timed(convolution_forward(fwd),
            {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, y}}),
      timed(convolution_backward_data(data), {{DNNL_ARG_DIFF_DST, y}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, gx}}),
      timed(convolution_backward_weights(grad),
            {{DNNL_ARG_DIFF_DST, y}, {DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_WEIGHTS, gw}, {DNNL_ARG_DIFF_BIAS, gb}})};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<memory::dim> batches;
  for (int i = 1; i < argc; ++i) batches.push_back(std::atol(argv[i]));
  if (batches.empty()) batches = {32, 64, 128, 256};
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(engine);
  const char* threads = std::getenv("OMP_NUM_THREADS");
  std::printf("Winograd ms / direct ms (below 1: Winograd faster), OMP_NUM_THREADS=%s\n",
              threads != nullptr ? threads : "(unset)");
  std::printf("%6s %5s %4s %7s  %22s  %22s  %22s\n", "batch", "C=O", "H=W", "tiles", "forward", "data gradient",
              "weight gradient");
  for (const memory::dim n : batches)
    for (const memory::dim c : {64, 128, 256, 512})
      for (const memory::dim h : {4, 7, 14, 28, 56}) {
        if (n * c * h * h > memory::dim{256} * 64 * 28 * 28) continue;  // a few seconds a row at most
        const memory::dim tiles = n * ((h + 3) / 4) * ((h + 3) / 4);
        std::printf("%6ld %5ld %4ld %7ld", static_cast<long>(n), static_cast<long>(c), static_cast<long>(h),
                    static_cast<long>(tiles));
        try {
          const auto wino = time_directions(algorithm::convolution_winograd, n, c, h, engine, s);
          const auto direct = time_directions(algorithm::convolution_direct, n, c, h, engine, s);
          for (int d = 0; d < 3; ++d) std::printf("  %7.2f/%7.2f = %4.2f", wino[d], direct[d], wino[d] / direct[d]);
          std::printf("\n");
        } catch (const dnnl::error& e) {
          std::printf("  no Winograd here: %s\n", e.what());
        }
        std::fflush(stdout);
      }
}
