// The CPU backend's Conv2d family (backend.h, Conv2dArgs) through oneDNN's
// direct and Winograd convolutions. See Note [oneDNN for CPU convolution]
// (the bench_conv_dnnl program) for what was measured, and Note [oneDNN
// convolution in the CPU backend] below for how it is used.
#include <omp.h>

#include <algorithm>
#include <array>
#include <compare>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>

#include "anvil/error.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dnnl_common.h"
#include "backends/cpu/threads.h"
#include "core/env_flag.h"
#include "core/observer.h"

namespace anvil::cpu_backend {

// Note [oneDNN convolution in the CPU backend]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// - Which: f32, and bf16 where the CPU has bf16 instructions, with at least
//   min_channels_per_group() input channels per group (4; 1 for ungrouped f32
//   on AVX-512); with fewer oneDNN pads to 8 channels and loses to im2col.
// - Layouts: oneDNN's choice (`any`) inside, reordered from and back to
//   anvil's contiguous NCHW; that beat channels-last throughout (a ResNet-18
//   step 1.65-1.78 s against 2.07-2.36 s).
// - Threads: conv_threads() from the work's size and usable_threads(), held by
//   DnnlThreads around creation and run; the count is part of the cache key.
// - Primitives are cached (LRU, kCacheCapacity); scratchpads come per call
//   from the caching allocator, so a primitive runs on several threads at once.
// - Why: LeNet on 1 thread 18.6 s/epoch against 24.5 s with im2col (LibTorch
//   21.0 s). All figures: docs/measurements.md.

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using detail::Conv2dArgs;
using detail::FusedOp;

// Input channels per group below which a convolution takes im2col +
// OpenBLAS instead. oneDNN's AVX2 kernels pad the channels to 8, and there
// LeNet's first layer (one input channel) lost: a LeNet step on one thread
// of the 2-core Zen 4 with oneDNN held to AVX2 took 18.0 ms with that layer
// on oneDNN against 13.9 ms on im2col, its weight gradient most of the
// difference. oneDNN's AVX-512 kernels take such first layers as they are:
// there the same step took 12.1 against 14.1 ms, and on two threads 8.1
// against 10.7 (the layer's forward 1.1 against 1.5 ms). Grouped
// convolutions (depthwise) keep the threshold: not measured; so does bf16,
// whose one-channel layers oneDNN 2.6 has no fast kernel for (the amp
// test's bf16 LeNet epoch took 5.2-5.8 s with it, 2.6 s without).
std::int64_t min_channels_per_group(const Conv2dArgs& a) noexcept {
  return a.dtype == DType::F32 && a.groups == 1 && cpu_has_avx512() ? 1 : 4;
}
constexpr std::size_t kCacheCapacity = 64;

// The thread count for one oneDNN call: that of the GEMM with its
// multiply-adds, [O] x [N*OH*OW] x [C/G*KH*KW]. Inside a parallel region
// oneDNN runs on the calling thread alone.
int conv_threads(const Conv2dArgs& a) {
  const detail::Window2dGeometry& g = a.g;
  const int threads = omp_in_parallel() ? 1
                                        : gemm_threads(a.out_channels, g.n * g.oh * g.ow, g.c / a.groups * g.kh * g.kw,
                                                       usable_threads());
  record_conv_call(threads);
  return threads;
}

// conv_threads's work in units of its threshold (Note [Parallel cost report]).
double conv_width(const Conv2dArgs& a) noexcept {
  const detail::Window2dGeometry& g = a.g;
  return gemm_width(a.out_channels, g.n * g.oh * g.ow, g.c / a.groups * g.kh * g.kw);
}

struct Key {
  FusedOp op;
  DType dtype;
  int threads;
  bool bias, winograd;
  std::array<std::int64_t, 16> geometry;
  auto operator<=>(const Key&) const = default;
};

Key key_of(FusedOp op, const Conv2dArgs& a, int threads, bool winograd) {
  const detail::Window2dGeometry& g = a.g;
  return {op,
          a.dtype,
          threads,
          a.has_bias,
          winograd,
          {g.n, g.c, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.oh, g.ow, g.dh, g.dw, a.out_channels, a.groups}};
}

// One cached primitive and the layouts it wants. For the backward
// directions `image`, `weight`, `bias` and `out` are the descs of the
// gradients it reads or writes in those places.
struct Conv {
  dnnl::primitive primitive;
  memory::desc image, weight, bias, out, scratchpad;
  std::string impl;  // oneDNN's name for the implementation it chose ("brgconv:avx2"): Note [Convolution algorithms]
};

// The logical dims of the four operands (weights grouped as goihw).
struct Dims {
  memory::dims image, weight, bias, out;
};

Dims dims_of(const Conv2dArgs& a) {
  const detail::Window2dGeometry& g = a.g;
  const std::int64_t o = a.out_channels, cg = g.c / a.groups;
  return {{g.n, g.c, g.h, g.w},
          a.groups == 1 ? memory::dims{o, cg, g.kh, g.kw} : memory::dims{a.groups, o / a.groups, cg, g.kh, g.kw},
          {o},
          {g.n, o, g.oh, g.ow}};
}

// Note [Winograd convolution on the CPU]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// oneDNN's F(4x4, 3x3) Winograd kernels (AVX-512, f32; PyTorch's CPU path
// never uses them) against its direct ones, time ratio over batch 32-256,
// C = O 64-512, H = W 4-56, 1 and 2 threads: the weight gradient 0.33-0.94
// everywhere; forward and data gradient 0.36-0.94 from 128 output tiles of
// 4x4 (N x ceil(OH/4) x ceil(OW/4)), mixed below (up to 1.84). So only from
// 64 channels, where it was measured, and never by thread count, which thus
// never changes a convolution's rounding. Error against float64: 1.4e-6 rms
// relative (direct 2.2e-7; below 64 channels direct stays exact on integers),
// far inside the TF32 PyTorch allows in cuDNN. ANVIL_CPU_WINOGRAD=0 turns it
// off (read per call). Figures, ResNet-18 steps: docs/measurements.md.
constexpr std::int64_t kWinogradMinTiles = 128, kWinogradMinChannels = 64;

bool use_winograd(FusedOp op, const Conv2dArgs& a) {
  const detail::Window2dGeometry& g = a.g;
  const bool shape = a.dtype == DType::F32 && a.groups == 1 && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 &&
                     g.dh == 1 && g.dw == 1 && std::min(g.c, a.out_channels) >= kWinogradMinChannels &&
                     cpu_has_avx512();
  if (!shape || detail::env_flag_off("ANVIL_CPU_WINOGRAD")) return false;
  const std::int64_t tiles = g.n * ((g.oh + 3) / 4) * ((g.ow + 3) / 4);
  return op == FusedOp::Conv2dBackwardWeight || tiles >= kWinogradMinTiles;
}

Conv create(FusedOp op, const Conv2dArgs& a, dnnl::algorithm alg) {
  using dnnl::algorithm;
  using dnnl::convolution_backward_data;
  using dnnl::convolution_backward_weights;
  using dnnl::convolution_forward;
  const detail::Window2dGeometry& g = a.g;
  const Dims d = dims_of(a);
  const memory::data_type dt = dnnl_data_type(a.dtype);
  const memory::desc image(d.image, dt, Tag::any), weight(d.weight, dt, Tag::any), bias(d.bias, dt, Tag::x),
      out(d.out, dt, Tag::any);
  // oneDNN counts dilation from 0 (taps adjacent) and takes both paddings;
  // the output size the frontend computed satisfies its rule with PH, PW on both sides.
  const memory::dims strides{g.sh, g.sw}, dilates{g.dh - 1, g.dw - 1}, pad{g.ph, g.pw};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // The forward descriptor is also the backward directions' hint: same algorithm.
  const auto fwd_desc = a.has_bias ? convolution_forward::desc(dnnl::prop_kind::forward_training, alg, image, weight,
                                                               bias, out, strides, dilates, pad, pad)
                                   : convolution_forward::desc(dnnl::prop_kind::forward_training, alg, image, weight,
                                                               out, strides, dilates, pad, pad);
  const convolution_forward::primitive_desc fwd(fwd_desc, attr, dnnl_engine());
  switch (op) {
    case FusedOp::Conv2d:
      return {convolution_forward(fwd), fwd.src_desc(),        fwd.weights_desc(), fwd.bias_desc(),
              fwd.dst_desc(),           fwd.scratchpad_desc(), fwd.impl_info_str()};
    case FusedOp::Conv2dBackwardData: {
      const convolution_backward_data::primitive_desc pd(
          convolution_backward_data::desc(alg, image, weight, out, strides, dilates, pad, pad), attr, dnnl_engine(),
          fwd);
      return {convolution_backward_data(pd), pd.diff_src_desc(), pd.weights_desc(), {}, pd.diff_dst_desc(),
              pd.scratchpad_desc(),          pd.impl_info_str()};
    }
    default: {
      const auto desc =
          a.has_bias ? convolution_backward_weights::desc(alg, image, weight, bias, out, strides, dilates, pad, pad)
                     : convolution_backward_weights::desc(alg, image, weight, out, strides, dilates, pad, pad);
      const convolution_backward_weights::primitive_desc pd(desc, attr, dnnl_engine(), fwd);
      return {convolution_backward_weights(pd),
              pd.src_desc(),
              pd.diff_weights_desc(),
              pd.diff_bias_desc(),
              pd.diff_dst_desc(),
              pd.scratchpad_desc(),
              pd.impl_info_str()};
    }
  }
}

// Winograd when asked and oneDNN has it for the shape, otherwise direct.
Conv create(FusedOp op, const Conv2dArgs& a, bool winograd) {
  if (winograd) {
    try {
      return create(op, a, dnnl::algorithm::convolution_winograd);
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;
    }
  }
  return create(op, a, dnnl::algorithm::convolution_direct);
}

// Tells the profiler which implementation ran `op` (Note [Convolution
// algorithms]): its workspace is the scratchpad the call allocated.
void report(FusedOp op, const Conv& conv, DType t) noexcept {
  const char* direction = op == FusedOp::Conv2d               ? "forward"
                          : op == FusedOp::Conv2dBackwardData ? "backward_data"
                                                              : "backward_weight";
  detail::observe_conv_algorithm({.direction = direction,
                                  .algorithm = conv.impl,
                                  .math = to_string(t),
                                  .workspace_bytes = static_cast<std::uint64_t>(conv.scratchpad.get_size())});
}

// The cached primitive for (op, a) at the calling thread's OpenMP count.
Conv cached(FusedOp op, const Conv2dArgs& a, int threads) {
  static DnnlCache<Key, Conv> cache(kCacheCapacity);
  const bool winograd = use_winograd(op, a);
  return cache.get(key_of(op, a, threads, winograd), [&] { return create(op, a, winograd); });
}

// oneDNN's view of an anvil operand: its logical dims with its own strides.
// Grouped weights [O, C/G, KH, KW] are seen as [G, O/G, C/G, KH, KW].
memory::desc desc_of(const memory::dims& dims, const detail::KernelOperand& op, memory::data_type dt) {
  memory::dims strides;
  if (dims.size() == 5) {
    strides = {op.strides[0] * dims[1], op.strides[0], op.strides[1], op.strides[2], op.strides[3]};
  } else {
    strides.assign(op.strides, op.strides + dims.size());
  }
  return memory::desc(dims, dt, strides);
}

void* pointer_of(const detail::KernelOperand& op, memory::data_type dt) {
  return static_cast<char*>(op.data) + op.offset * static_cast<std::int64_t>(memory::data_type_size(dt));
}

// Note [Reorder threads]
// A reorder is a copy: one thread moves about 20 GB/s here, so waking a
// passive pool thread (about 45 us on the 2-core VM) pays only when each
// thread gets at least kReorderBytesPerThread. With the convolution's thread
// count for every reorder, a ResNet-18 step on two threads spent 11.1 ms on
// 64x64x3x3 weight reorders that took 3.2 ms on one thread; from 2.4 MB two
// threads won. So each reorder takes at most one thread per
// kReorderBytesPerThread of its output, and never more than the convolution;
// like every threshold it is scaled to the measured wake cost (Note [Threads
// from the measured wake cost]). Figures: docs/measurements.md.
constexpr std::int64_t kReorderBytesPerThread = std::int64_t{1} << 20;

void reorder(memory& from, memory& to, dnnl::stream& s) {
  const auto most = static_cast<std::size_t>(thread_bound());
  const auto per_thread = static_cast<std::size_t>(scaled_work(kReorderBytesPerThread));
  const std::size_t by_size = std::max<std::size_t>(1, to.get_desc().get_size() / per_thread);
  const DnnlThreads threads(static_cast<int>(std::min(most, by_size)));
  record_reorder_call(threads.threads());
  const ParallelWork work(threads.threads(),
                          static_cast<double>(to.get_desc().get_size()) / static_cast<double>(kReorderBytesPerThread));
  dnnl::reorder(from, to).execute(s, from, to);
}

// An operand the primitive reads, reordered into `want` when its layout differs.
memory read_operand(const memory::dims& dims, const detail::KernelOperand& op, const memory::desc& want,
                    dnnl::stream& s, DnnlTemporaries& temporaries) {
  memory given(desc_of(dims, op, want.data_type()), dnnl_engine(), pointer_of(op, want.data_type()));
  if (given.get_desc() == want) return given;
  memory wanted = temporaries.make(want);
  reorder(given, wanted, s);
  return wanted;
}

// An operand the primitive writes: itself when its layout is `want`,
// otherwise a temporary that finish() reorders into it.
struct Written {
  memory target, work;
  Written(const memory::dims& dims, const detail::KernelOperand& op, const memory::desc& want,
          DnnlTemporaries& temporaries)
      : target(desc_of(dims, op, want.data_type()), dnnl_engine(), pointer_of(op, want.data_type())),
        work(target.get_desc() == want ? target : temporaries.make(want)) {}
  void finish(dnnl::stream& s) {
    if (work.get_data_handle() != target.get_data_handle()) reorder(work, target, s);
  }
};

// Runs `op` for `a`. With `weight_too` (only for Conv2dBackwardData: both
// gradients of one convolution, Backend::conv2d_backward), the weight
// gradient follows, reading the output gradient already laid out for the
// data gradient where its primitive wants the same layout: one reorder of
// [N, O, OH, OW] saved per convolution, 19 in a ResNet-18 step (batch 32,
// 28x28), which took about 1.5 ms of its 0.23 s on 2 threads (oneDNN's
// verbose log over 20 steps).
void run(FusedOp op, const Conv2dArgs& a, detail::CachingAllocator& allocator, const Conv2dArgs* weight_too = nullptr) {
  try {
    const DnnlThreads threads(conv_threads(a));
    const Conv conv = cached(op, a, threads.threads());
    const Dims d = dims_of(a);
    DnnlTemporaries temporaries(allocator);
    dnnl::stream s(dnnl_engine());
    const auto read = [&](const memory::dims& dims, const detail::KernelOperand& op, const memory::desc& want) {
      return read_operand(dims, op, want, s, temporaries);
    };
    // The weight (and bias) gradient of `wa` by `wconv`, taking `diff_dst`
    // as the output gradient when it is in the layout wconv wants.
    const auto backward_weight = [&](const Conv& wconv, const Conv2dArgs& wa, const memory* diff_dst) {
      Written weight(d.weight, wa.weight, wconv.weight, temporaries);
      const bool shared = diff_dst != nullptr && diff_dst->get_desc() == wconv.out;
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, read(d.image, wa.image, wconv.image)},
                                           {DNNL_ARG_DIFF_DST, shared ? *diff_dst : read(d.out, wa.out, wconv.out)},
                                           {DNNL_ARG_DIFF_WEIGHTS, weight.work},
                                           {DNNL_ARG_SCRATCHPAD, temporaries.make(wconv.scratchpad)}};
      std::optional<Written> bias;
      if (wa.has_bias) {
        bias.emplace(d.bias, wa.bias, wconv.bias, temporaries);
        args.emplace(DNNL_ARG_DIFF_BIAS, bias->work);
      }
      {
        const ParallelWork work(threads.threads(), conv_width(wa));
        wconv.primitive.execute(s, args);
      }
      report(FusedOp::Conv2dBackwardWeight, wconv, wa.dtype);
      weight.finish(s);
      if (bias) bias->finish(s);
    };
    switch (op) {
      case FusedOp::Conv2d: {
        Written out(d.out, a.out, conv.out, temporaries);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, read(d.image, a.image, conv.image)},
                                             {DNNL_ARG_WEIGHTS, read(d.weight, a.weight, conv.weight)},
                                             {DNNL_ARG_DST, out.work},
                                             {DNNL_ARG_SCRATCHPAD, temporaries.make(conv.scratchpad)}};
        if (a.has_bias) args.emplace(DNNL_ARG_BIAS, read(d.bias, a.bias, conv.bias));
        {
          const ParallelWork work(threads.threads(), conv_width(a));
          conv.primitive.execute(s, args);
        }
        report(op, conv, a.dtype);
        out.finish(s);
        break;
      }
      case FusedOp::Conv2dBackwardData: {
        Written image(d.image, a.image, conv.image, temporaries);
        const memory diff_dst = read(d.out, a.out, conv.out);
        const memory weight = read(d.weight, a.weight, conv.weight);
        {
          const ParallelWork work(threads.threads(), conv_width(a));
          conv.primitive.execute(s, {{DNNL_ARG_DIFF_DST, diff_dst},
                                     {DNNL_ARG_WEIGHTS, weight},
                                     {DNNL_ARG_DIFF_SRC, image.work},
                                     {DNNL_ARG_SCRATCHPAD, temporaries.make(conv.scratchpad)}});
        }
        report(op, conv, a.dtype);
        image.finish(s);
        if (weight_too != nullptr) {
          record_conv_call(threads.threads());  // a second convolution primitive
          backward_weight(cached(FusedOp::Conv2dBackwardWeight, *weight_too, threads.threads()), *weight_too,
                          &diff_dst);
        }
        break;
      }
      default:
        backward_weight(conv, a, nullptr);
        break;
    }
    s.wait();
  } catch (const dnnl::error& e) {
    throw BackendError(detail::cat(detail::name(op), ": oneDNN failed (status ", static_cast<int>(e.status), ": ",
                                   e.what(), ") for input [", a.g.n, ", ", a.g.c, ", ", a.g.h, ", ", a.g.w, "], ",
                                   a.out_channels, " output channels, kernel ", a.g.kh, "x", a.g.kw, ", groups ",
                                   a.groups));
  }
}

}  // namespace

bool CpuBackend::supports_fused_conv2d(int, const Conv2dArgs& a) noexcept {
  return (a.dtype == DType::F32 || (a.dtype == DType::BF16 && cpu_has_bf16_dot())) && a.groups > 0 &&
         a.g.c / a.groups >= min_channels_per_group(a) && a.g.n > 0 && a.out_channels > 0 && a.g.oh > 0 && a.g.ow > 0;
}
void CpuBackend::conv2d(int, const Conv2dArgs& a) {
  count(detail::traffic(a, FusedOp::Conv2d));
  run(FusedOp::Conv2d, a, allocator_);
}
void CpuBackend::conv2d_backward_data(int, const Conv2dArgs& a) {
  count(detail::traffic(a, FusedOp::Conv2dBackwardData));
  run(FusedOp::Conv2dBackwardData, a, allocator_);
}
void CpuBackend::conv2d_backward_weight(int, const Conv2dArgs& a) {
  count(detail::traffic(a, FusedOp::Conv2dBackwardWeight));
  run(FusedOp::Conv2dBackwardWeight, a, allocator_);
}
// Two oneDNN primitives, as the devices' two calls.
void CpuBackend::conv2d_backward(int, const Conv2dArgs& data, const Conv2dArgs& weight) {
  count(detail::traffic(data, FusedOp::Conv2dBackwardData));
  count(detail::traffic(weight, FusedOp::Conv2dBackwardWeight));
  run(FusedOp::Conv2dBackwardData, data, allocator_, &weight);
}

}  // namespace anvil::cpu_backend
