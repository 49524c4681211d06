// The CUDA backend's Conv2d family (backend.h, Conv2dArgs) through cuDNN's
// legacy convolution API (cudnn_api.h), as oneDNN serves the CPU's
// (cpu_conv.cpp).
//
// Note [cuDNN convolution]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// - Which: f32, f64, f16 (sm 6+) and bf16 (sm 8+) of any geometry, every
//   tensor below 2^31 elements, while cuDNN is loaded and enabled; the rest
//   takes im2col + cuBLAS. 16-bit convolutions accumulate in f32.
// - Layouts: activations and output gradients with their own strides; a
//   non-contiguous weight (and for the weight gradient any operand) is copied
//   contiguous first. Outputs are NCHW (the frontend allocates them).
// - Precision: TF32 unless set_allow_tf32(false) (CUDNN_FMA_MATH, tensor-op
//   algorithms skipped); 16-bit ones use tensor cores.
// - Plans are cached per device by direction, dtype, geometry, strides and
//   math; the algorithm: the heuristics' first usable one, or in benchmark
//   mode Note [Benchmark mode's choice] (backends/common/algorithm_choice.h).
//   Bias: cudnnAddTensor / BackwardBias, else the shared kernels.
#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "anvil/error.h"
#include "backends/common/algorithm_choice.h"
#include "backends/common/scratch.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/runtime.h"
#include "core/backend_settings.h"
#include "core/observer.h"

namespace anvil::cuda {

namespace {

using detail::Conv2dArgs;
using detail::FusedOp;
using detail::KernelOperand;
using device_common::Scratch;

std::atomic<std::uint64_t> plans_made{0};

void* at(const KernelOperand& o, DType t) noexcept {
  return static_cast<char*>(o.data) + o.offset * static_cast<std::int64_t>(element_size(t));
}

// Whether operand `o` of `shape` is contiguous (a dim of size 1 may have any
// stride).
bool is_contiguous(const KernelOperand& o, const std::array<std::int64_t, 4>& shape) noexcept {
  std::int64_t expect = 1;
  for (int i = 3; i >= 0; --i) {
    if (shape[i] != 1 && o.strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

// Whether operand `o` of `shape` [N, C, H, W] is channels-last: dense with
// C fastest, then W, H, N (a dim of size 1 may have any stride).
bool is_channels_last(const KernelOperand& o, const std::array<std::int64_t, 4>& shape) noexcept {
  std::int64_t expect = 1;
  for (const int i : {1, 3, 2, 0}) {
    if (shape[i] != 1 && o.strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

// Whether cuDNN gets the filter as NHWC: when image, output and weight are
// all channels-last (f32 or 16 bits: conv2d_dnn_takes), and not when image
// and output are NCHW as well. A dim of size 1 makes both
// layouts true at once (a one-channel image, a 1x1 map): such a convolution
// stays NCHW, the only filter cuDNN takes beside NCHW activations.
bool nhwc_filter(const Conv2dArgs& a) noexcept {
  const detail::Window2dGeometry& g = a.g;
  const std::array<std::int64_t, 4> wshape{a.out_channels, g.c / a.groups, g.kh, g.kw};
  const std::array<std::int64_t, 4> xshape{g.n, g.c, g.h, g.w};
  const std::array<std::int64_t, 4> yshape{g.n, a.out_channels, g.oh, g.ow};
  if (is_contiguous(a.image, xshape) && is_contiguous(a.out, yshape)) return false;
  return is_channels_last(a.image, xshape) && is_channels_last(a.out, yshape) && is_channels_last(a.weight, wshape);
}

// An operand's strides for its cuDNN descriptor: where it is dense in the
// layout the filter has, a dim of size 1 takes the stride that layout gives
// it (its own may be anything), so cuDNN sees the layout it is told; other
// operands' strides as they are.
std::array<int, 4> descriptor_strides(const KernelOperand& o, const std::array<std::int64_t, 4>& shape, bool nhwc) {
  std::array<int, 4> st{};
  for (int i = 0; i < 4; ++i) st[static_cast<std::size_t>(i)] = static_cast<int>(o.strides[i]);
  if (!(nhwc ? is_channels_last(o, shape) : is_contiguous(o, shape))) return st;
  const std::array<int, 4> order = nhwc ? std::array<int, 4>{1, 3, 2, 0} : std::array<int, 4>{3, 2, 1, 0};
  std::int64_t expect = 1;
  for (const int i : order) {
    st[static_cast<std::size_t>(i)] = static_cast<int>(expect);
    expect *= shape[static_cast<std::size_t>(i)];
  }
  return st;
}

struct ConvKey {
  std::array<std::int64_t, 32> v{};
  bool operator==(const ConvKey&) const = default;
};
struct ConvKeyHash {
  std::size_t operator()(const ConvKey& k) const noexcept {
    std::uint64_t h = 1469598103934665603ull;
    for (std::int64_t x : k.v) h = (h ^ static_cast<std::uint64_t>(x)) * 1099511628211ull;
    return static_cast<std::size_t>(h);
  }
};

// One direction of one convolution, ready to run.
struct ConvPlan {
  explicit ConvPlan(const CudnnApi& a) : api(a) {}
  ~ConvPlan() {
    if (x) api.cudnnDestroyTensorDescriptor(x);
    if (y) api.cudnnDestroyTensorDescriptor(y);
    if (b) api.cudnnDestroyTensorDescriptor(b);
    if (w) api.cudnnDestroyFilterDescriptor(w);
    if (conv) api.cudnnDestroyConvolutionDescriptor(conv);
  }
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;

  const CudnnApi& api;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  std::size_t workspace = 0;
  std::string math;           // for the profiler: "f32 DEFAULT tf32", "f32 FMA", "bf16 TENSOR_OP", ...
  bool bias_by_cudnn = true;  // false once cuDNN refused the bias op in this dtype
};

struct ConvState {
  std::unordered_map<ConvKey, std::unique_ptr<ConvPlan>, ConvKeyHash> plans;
};

ConvKey key_of(FusedOp which, const Conv2dArgs& a, bool tf32, bool benchmark) {
  const detail::Window2dGeometry& g = a.g;
  ConvKey k;
  std::int64_t* v = k.v.data();
  *v++ = static_cast<std::int64_t>(which);
  *v++ = static_cast<std::int64_t>(a.dtype);
  *v++ = (tf32 ? 1 : 0) | (benchmark ? 2 : 0);
  for (std::int64_t x : {g.n, g.c, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, a.out_channels, a.groups})
    *v++ = x;
  for (int i = 0; i < 4; ++i) *v++ = a.image.strides[i];
  for (int i = 0; i < 4; ++i) *v++ = a.out.strides[i];
  for (int i = 0; i < 4; ++i) *v++ = a.weight.strides[i];
  // Each operand's alignment, up to 16 bytes: an algorithm chosen on aligned
  // buffers may refuse a misaligned view of the same geometry.
  for (const KernelOperand* o : {&a.image, &a.out, &a.weight}) {
    const auto address = reinterpret_cast<std::uintptr_t>(at(*o, a.dtype));
    *v++ = static_cast<std::int64_t>(address == 0 ? 16 : std::min<std::uintptr_t>(16, address & (~address + 1)));
  }
  return k;
}

// cuDNN's names for its algorithms and math types, as the profiler shows them.
const char* algorithm_name(FusedOp which, int algo) noexcept {
  if (which == FusedOp::Conv2d) {
    switch (static_cast<cudnnConvolutionFwdAlgo_t>(algo)) {
      case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
        return "IMPLICIT_GEMM";
      case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
        return "IMPLICIT_PRECOMP_GEMM";
      case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
        return "GEMM";
      case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
        return "DIRECT";
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
        return "FFT";
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
        return "FFT_TILING";
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
        return "WINOGRAD";
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
        return "WINOGRAD_NONFUSED";
      default:
        return "UNKNOWN";
    }
  }
  if (which == FusedOp::Conv2dBackwardData) {
    switch (static_cast<cudnnConvolutionBwdDataAlgo_t>(algo)) {
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
        return "ALGO_0";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
        return "ALGO_1";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
        return "FFT";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
        return "FFT_TILING";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
        return "WINOGRAD";
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
        return "WINOGRAD_NONFUSED";
      default:
        return "UNKNOWN";
    }
  }
  switch (static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo)) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
      return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
      return "FFT_TILING";
    default:
      return "UNKNOWN";
  }
}
const char* math_name(cudnnMathType_t m) noexcept {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "DEFAULT";
    case CUDNN_TENSOR_OP_MATH:
      return "TENSOR_OP";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "TENSOR_OP_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH:
      return "FMA";
    default:
      return "UNKNOWN";
  }
}
const char* direction_name(FusedOp which) noexcept {
  return which == FusedOp::Conv2d               ? "forward"
         : which == FusedOp::Conv2dBackwardData ? "backward_data"
                                                : "backward_weight";
}

// Benchmark mode's workspace cap: ANVIL_CUDNN_BENCHMARK_WORKSPACE_MB
// (MiB, read once), 1024 by default: room for the GEMM and Winograd
// algorithms at ResNet's shapes, not for the FFT ones' gigabytes.
std::size_t benchmark_workspace_cap() noexcept {
  static const std::size_t cap = [] {
    std::size_t mb = 1024;
    if (const char* e = std::getenv("ANVIL_CUDNN_BENCHMARK_WORKSPACE_MB"); e != nullptr && *e != '\0') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(e, &end, 10);
      if (end != nullptr && *end == '\0') mb = static_cast<std::size_t>(v);
    }
    return mb << 20;
  }();
  return cap;
}

// Whether perf result `p` may run: supported, and no tensor-op math for
// strict f32.
template <class Perf>
bool usable(const Perf& p, bool strict_f32) noexcept {
  if (p.status != CUDNN_STATUS_SUCCESS) return false;
  return !(strict_f32 && (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION));
}

// Whether `bytes` of workspace can be had now (the block goes back to the
// cache, where the call takes it again).
bool workspace_fits(Slot& s, std::size_t bytes) {
  if (bytes == 0) return true;
  try {
    void* p = s.allocator.allocate(bytes);
    s.allocator.deallocate(p, bytes);
    return true;
  } catch (const OutOfMemory&) {
    return false;
  }
}

// The pointers one call runs on.
struct ConvPointers {
  void* x;  // image (or its gradient)
  void* w;  // weight (or its gradient)
  void* y;  // output (or its gradient)
  void* b;  // bias (or its gradient); null without
};

// The median time of `run` (one call of an algorithm on the plan's own
// operands) over kBenchmarkRuns runs after one to warm up, each between two
// events on the device's stream; -1 when cuDNN refuses a run.
template <class Run>
double time_algorithm(Slot& s, Run run) {
  const std::string& label = s.label();
  struct Events {
    cudaEvent_t start = nullptr, end = nullptr;
    ~Events() {
      if (start) cudaEventDestroy(start);
      if (end) cudaEventDestroy(end);
    }
  } e;
  ANVIL_CUDA_CHECK(label, cudaEventCreate(&e.start));
  ANVIL_CUDA_CHECK(label, cudaEventCreate(&e.end));
  if (run() != CUDNN_STATUS_SUCCESS) return -1;
  std::vector<double> ms;
  for (int r = 0; r < device_common::kBenchmarkRuns; ++r) {
    ANVIL_CUDA_CHECK(label, cudaEventRecord(e.start, s.queue.stream));
    const cudnnStatus_t st = run();
    ANVIL_CUDA_CHECK(label, cudaEventRecord(e.end, s.queue.stream));
    ANVIL_CUDA_CHECK(label, cudaEventSynchronize(e.end));
    if (st != CUDNN_STATUS_SUCCESS) return -1;
    float one = 0;
    ANVIL_CUDA_CHECK(label, cudaEventElapsedTime(&one, e.start, e.end));
    ms.push_back(one);
  }
  return device_common::median_ms(std::move(ms));
}

// Picks the plan's algorithm: cuDNN's heuristics' first usable one that can
// be allocated, or with `benchmark` the fastest of their top few within the
// workspace cap, timed on the call's own operands (it writes the call's
// output, which the call then overwrites): Note [Benchmark mode's choice].
// Where cuDNN's heuristics offer nothing that can run (it happens for some
// strict-f32 geometries), cudnnFind times every algorithm instead.
template <class Perf, class Get, class Find, class Run>
void choose(Slot& s, ConvPlan& plan, const char* dtype, bool strict_f32, bool benchmark, int max_count, Get get,
            Find find, Run run) {
  const std::string& label = s.label();
  std::vector<Perf> perf(static_cast<std::size_t>(std::max(max_count, 1)));
  int count = 0;
  ANVIL_CUDNN_CHECK(label, get(max_count, &count, perf.data()));
  const auto take = [&](const Perf& p) {
    plan.algo = static_cast<int>(p.algo);
    plan.workspace = p.memory;
    const cudnnMathType_t math = strict_f32 ? CUDNN_FMA_MATH : p.mathType;
    ANVIL_CUDNN_CHECK(label, plan.api.cudnnSetConvolutionMathType(plan.conv, math));
    // f32 with TF32 allowed may run on tensor cores under any math type but FMA.
    const bool tf32 = std::strcmp(dtype, "f32") == 0 && !strict_f32;
    plan.math = detail::cat(dtype, " ", math_name(math), tf32 ? " tf32" : "");
  };
  const auto pick = [&]() -> bool {
    for (int i = 0; i < count; ++i) {
      if (!usable(perf[i], strict_f32) || !workspace_fits(s, perf[i].memory)) continue;
      take(perf[i]);
      return true;
    }
    return false;
  };
  const auto timed_pick = [&]() -> bool {
    const std::size_t cap = benchmark_workspace_cap();
    std::vector<device_common::AlgorithmCandidate> c;
    for (int i = 0; i < count && i < device_common::kBenchmarkCandidates; ++i) {
      device_common::AlgorithmCandidate x{.algo = static_cast<int>(perf[i].algo), .workspace = perf[i].memory};
      x.usable = usable(perf[i], strict_f32) && x.workspace <= cap && workspace_fits(s, x.workspace);
      if (x.usable) {
        take(perf[i]);  // the math type the run needs
        Scratch ws(s.allocator, x.workspace);
        x.median_ms = time_algorithm(s, [&] { return run(perf[i].algo, ws.get(), ws.size()); });
        if (x.median_ms < 0) {  // cuDNN refused to run it: no candidate here, nor for pick()
          x.usable = false;
          perf[i].status = CUDNN_STATUS_NOT_SUPPORTED;
        }
      }
      c.push_back(x);
    }
    const int chosen = device_common::choose_algorithm(c, cap);
    if (chosen < 0) return false;
    take(perf[static_cast<std::size_t>(chosen)]);
    return true;
  };
  if (benchmark && timed_pick()) return;
  if (pick()) return;
  std::string offered;
  const auto note = [&](const char* how) {
    offered += detail::cat(offered.empty() ? "" : "; ", how, ":");
    for (int i = 0; i < count; ++i)
      offered +=
          detail::cat(" algo ", static_cast<int>(perf[i].algo), " (", plan.api.cudnnGetErrorString(perf[i].status),
                      ", math ", static_cast<int>(perf[i].mathType), ", ", perf[i].memory, " bytes)");
  };
  note("heuristics");
  std::size_t most = std::size_t{1} << 30;
  for (int i = 0; i < count; ++i)
    if (usable(perf[i], strict_f32)) most = std::max(most, perf[i].memory);
  while (most > 0 && !workspace_fits(s, most)) most /= 2;
  {
    Scratch ws(s.allocator, most);
    int found = 0;
    ANVIL_CUDNN_CHECK(label, find(max_count, &found, perf.data(), ws.get(), ws.size()));
    count = found;
  }
  if (pick()) return;
  note("timed");
  throw BackendError(detail::cat(current_op(), ": cuDNN offers no algorithm for this convolution on ", label,
                                 strict_f32 ? " without TF32" : "", " within the free memory (", offered,
                                 "); run with ANVIL_CUDNN=0 to use im2col"));
}

std::unique_ptr<ConvPlan> make_plan(Slot& s, const CudnnApi& api, cudnnHandle_t h, FusedOp which, const Conv2dArgs& a,
                                    bool tf32, bool benchmark, const ConvPointers& p) {
  const std::string& label = s.label();
  const detail::Window2dGeometry& g = a.g;
  const cudnnDataType_t t = cudnn_data_type(a.dtype);
  auto plan = std::make_unique<ConvPlan>(api);
  const auto i32 = [](std::int64_t v) { return static_cast<int>(v); };
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateTensorDescriptor(&plan->x));
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateTensorDescriptor(&plan->y));
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateTensorDescriptor(&plan->b));
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateFilterDescriptor(&plan->w));
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateConvolutionDescriptor(&plan->conv));
  const bool nhwc = nhwc_filter(a);
  const std::array<int, 4> xs = descriptor_strides(a.image, {g.n, g.c, g.h, g.w}, nhwc);
  const std::array<int, 4> ys = descriptor_strides(a.out, {g.n, a.out_channels, g.oh, g.ow}, nhwc);
  ANVIL_CUDNN_CHECK(label, api.cudnnSetTensor4dDescriptorEx(plan->x, t, i32(g.n), i32(g.c), i32(g.h), i32(g.w), xs[0],
                                                            xs[1], xs[2], xs[3]));
  ANVIL_CUDNN_CHECK(label, api.cudnnSetTensor4dDescriptorEx(plan->y, t, i32(g.n), i32(a.out_channels), i32(g.oh),
                                                            i32(g.ow), ys[0], ys[1], ys[2], ys[3]));
  const std::int64_t o = a.out_channels;
  ANVIL_CUDNN_CHECK(label, api.cudnnSetTensor4dDescriptorEx(plan->b, t, 1, i32(o), 1, 1, i32(o), 1, 1, 1));
  // conv2d_dnn passes an NCHW weight, or a channels-last one where
  // nhwc_filter says so.
  const cudnnTensorFormat_t filter_format = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  ANVIL_CUDNN_CHECK(label, api.cudnnSetFilter4dDescriptor(plan->w, t, filter_format, i32(o), i32(g.c / a.groups),
                                                          i32(g.kh), i32(g.kw)));
  // 16-bit data accumulates in f32 (PyTorch's choice).
  const cudnnDataType_t compute = a.dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  ANVIL_CUDNN_CHECK(label, api.cudnnSetConvolution2dDescriptor(plan->conv, i32(g.ph), i32(g.pw), i32(g.sh), i32(g.sw),
                                                               i32(g.dh), i32(g.dw), CUDNN_CROSS_CORRELATION, compute));
  ANVIL_CUDNN_CHECK(label, api.cudnnSetConvolutionGroupCount(plan->conv, i32(a.groups)));
  const bool strict_f32 = a.dtype == DType::F32 && !tf32;
  const cudnnMathType_t math = is_half(a.dtype) ? CUDNN_TENSOR_OP_MATH
                               : strict_f32     ? CUDNN_FMA_MATH
                                                : CUDNN_DEFAULT_MATH;
  ANVIL_CUDNN_CHECK(label, api.cudnnSetConvolutionMathType(plan->conv, math));

  ConvPlan& c = *plan;
  const std::string dtype(to_string(a.dtype));
  const double one_d = 1.0, zero_d = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const void* one = a.dtype == DType::F64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = a.dtype == DType::F64 ? static_cast<const void*>(&zero_d) : &zero_f;
  int max_count = 0;
  if (which == FusedOp::Conv2d) {
    ANVIL_CUDNN_CHECK(label, api.cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
    choose<cudnnConvolutionFwdAlgoPerf_t>(
        s, c, dtype.c_str(), strict_f32, benchmark, max_count,
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* r) {
          return api.cudnnGetConvolutionForwardAlgorithm_v7(h, c.x, c.w, c.conv, c.y, n, got, r);
        },
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* r, void* ws, std::size_t bytes) {
          return api.cudnnFindConvolutionForwardAlgorithmEx(h, c.x, p.x, c.w, p.w, c.conv, c.y, p.y, n, got, r, ws,
                                                            bytes);
        },
        [&](cudnnConvolutionFwdAlgo_t algo, void* ws, std::size_t bytes) {
          return api.cudnnConvolutionForward(h, one, c.x, p.x, c.w, p.w, c.conv, algo, ws, bytes, zero, c.y, p.y);
        });
  } else if (which == FusedOp::Conv2dBackwardData) {
    ANVIL_CUDNN_CHECK(label, api.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
    choose<cudnnConvolutionBwdDataAlgoPerf_t>(
        s, c, dtype.c_str(), strict_f32, benchmark, max_count,
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r) {
          return api.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, c.w, c.y, c.conv, c.x, n, got, r);
        },
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r, void* ws, std::size_t bytes) {
          return api.cudnnFindConvolutionBackwardDataAlgorithmEx(h, c.w, p.w, c.y, p.y, c.conv, c.x, p.x, n, got, r, ws,
                                                                 bytes);
        },
        [&](cudnnConvolutionBwdDataAlgo_t algo, void* ws, std::size_t bytes) {
          return api.cudnnConvolutionBackwardData(h, one, c.w, p.w, c.y, p.y, c.conv, algo, ws, bytes, zero, c.x, p.x);
        });
  } else {
    ANVIL_CUDNN_CHECK(label, api.cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
    choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
        s, c, dtype.c_str(), strict_f32, benchmark, max_count,
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r) {
          return api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, c.x, c.y, c.conv, c.w, n, got, r);
        },
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r, void* ws, std::size_t bytes) {
          return api.cudnnFindConvolutionBackwardFilterAlgorithmEx(h, c.x, p.x, c.y, p.y, c.conv, c.w, p.w, n, got, r,
                                                                   ws, bytes);
        },
        [&](cudnnConvolutionBwdFilterAlgo_t algo, void* ws, std::size_t bytes) {
          return api.cudnnConvolutionBackwardFilter(h, one, c.x, p.x, c.y, p.y, c.conv, algo, ws, bytes, zero, c.w,
                                                    p.w);
        });
  }
  plans_made.fetch_add(1, std::memory_order_relaxed);
  return plan;
}

// out [N, O, OH, OW] += bias [O] with the shared broadcast add.
void add_bias_shared(Slot& s, const Conv2dArgs& a) {
  detail::ElementwiseArgs e;
  e.ndim = 4;
  const std::int64_t shape[4] = {a.g.n, a.out_channels, a.g.oh, a.g.ow};
  std::copy(shape, shape + 4, e.shape);
  e.numel = shape[0] * shape[1] * shape[2] * shape[3];
  e.out = a.out;
  e.in[0] = a.out;
  e.in[1] = a.bias;
  std::fill(e.in[1].strides, e.in[1].strides + kMaxDims, 0);
  e.in[1].strides[1] = a.bias.strides[0];
  e.nin = 2;
  device_common::binary(s, detail::BinaryOp::Add, e);
}

// bias gradient [O] = the output gradient summed over N, OH, OW, with the
// shared reduction.
void bias_gradient_shared(Slot& s, const Conv2dArgs& a) {
  detail::ReduceArgs r;
  r.nkept = 1;
  r.nreduced = 3;
  const std::int64_t shape[4] = {a.out_channels, a.g.n, a.g.oh, a.g.ow};
  std::copy(shape, shape + 4, r.shape);
  r.out_numel = a.out_channels;
  r.reduce_numel = a.g.n * a.g.oh * a.g.ow;
  r.out = a.bias;
  r.in = a.out;
  const std::int64_t* os = a.out.strides;
  const std::int64_t in_strides[4] = {os[1], os[0], os[2], os[3]};
  std::copy(in_strides, in_strides + 4, r.in.strides);
  device_common::reduce(s, detail::ReduceOp::Sum, r);
}

// to = from over a 4-d `shape` (the shared strided copy).
void copy4(Slot& s, const std::array<std::int64_t, 4>& shape, const KernelOperand& from, const KernelOperand& to) {
  detail::ElementwiseArgs e;
  e.ndim = 4;
  std::copy(shape.begin(), shape.end(), e.shape);
  e.numel = shape[0] * shape[1] * shape[2] * shape[3];
  e.out = to;
  e.in[0] = from;
  e.nin = 1;
  device_common::copy(s, e);
}

// A contiguous stand-in for operand `o` of `shape` from the caching
// allocator, held by `block`; with `fill` it starts as a copy of `o`.
KernelOperand contiguous_block(Slot& s, const KernelOperand& o, const std::array<std::int64_t, 4>& shape, DType t,
                               std::unique_ptr<Scratch>& block, bool fill) {
  block = std::make_unique<Scratch>(
      s.allocator, static_cast<std::size_t>(shape[0] * shape[1] * shape[2] * shape[3]) * element_size(t));
  KernelOperand c = o;
  c.data = block->get();
  c.offset = 0;
  std::fill(c.strides, c.strides + kMaxDims, 0);
  c.strides[3] = 1;
  c.strides[2] = shape[3];
  c.strides[1] = shape[2] * shape[3];
  c.strides[0] = shape[1] * shape[2] * shape[3];
  if (fill) copy4(s, shape, o, c);
  return c;
}

}  // namespace

std::uint64_t cudnn_conv_plans_made() noexcept { return plans_made.load(std::memory_order_relaxed); }

bool Runtime::conv2d_dnn_dtype(const DeviceEntry& e, DType t) noexcept {
  if (cudnn_if_enabled() == nullptr) return false;
  switch (t) {
    case DType::F32:
    case DType::F64:
      return true;
    case DType::F16:
      return e.major >= 6;
    case DType::BF16:
      return e.major >= 8;
    default:
      return false;
  }
}

bool Runtime::conv2d_dnn_takes(const DeviceEntry& e, const detail::Conv2dArgs& a) noexcept {
  if (!conv2d_dnn_dtype(e, a.dtype)) return false;
  const detail::Window2dGeometry& g = a.g;
  const std::int64_t cg = a.groups > 0 ? g.c / a.groups : 0;
  const std::int64_t sizes[] = {g.n, g.c, g.h, g.w, g.oh, g.ow, a.out_channels, g.kh, g.kw, a.groups};
  for (std::int64_t v : sizes)
    if (v <= 0 || v > INT_MAX) return false;
  // cuDNN's legacy API indexes a tensor with 32-bit ints.
  const double limit = static_cast<double>(INT_MAX);
  const auto numel = [](std::initializer_list<std::int64_t> d) {
    double n = 1;
    for (std::int64_t v : d) n *= static_cast<double>(v);
    return n;
  };
  // f64 stays NCHW, as PyTorch keeps it (cuDNN's NHWC filters are for f32
  // and 16 bits): a channels-last f64 image takes the generic path.
  const std::array<std::int64_t, 4> xshape{g.n, g.c, g.h, g.w};
  if (a.dtype == DType::F64 && a.image.data != nullptr && is_channels_last(a.image, xshape) &&
      !is_contiguous(a.image, xshape))
    return false;
  return numel({g.n, g.c, g.h, g.w}) < limit && numel({g.n, a.out_channels, g.oh, g.ow}) < limit &&
         numel({a.out_channels, cg, g.kh, g.kw}) < limit;
}

void Runtime::conv2d_dnn(Slot& s, detail::FusedOp which, const detail::Conv2dArgs& args) {
  // Not cudnn_if_enabled(): the switch decides at dispatch, and a gradient
  // of a convolution cuDNN ran forward still comes here after
  // set_enabled(false).
  const CudnnApi* api = load_cudnn(nullptr);
  ANVIL_ASSERT(api != nullptr, "conv2d_dnn without cuDNN");
  Queue& q = s.queue;
  cudnnHandle_t h = q.dnn(*api, s.allocator);
  if (!q.dnn_conv_state) q.dnn_conv_state = std::make_shared<ConvState>();
  auto& state = *static_cast<ConvState*>(q.dnn_conv_state.get());
  const detail::VendorSettings& settings = detail::vendor_settings();
  const bool tf32 = settings.cudnn_allow_tf32.load(std::memory_order_relaxed);
  const bool benchmark = settings.cudnn_benchmark.load(std::memory_order_relaxed);

  // Operands cuDNN cannot take as they are go through contiguous blocks.
  // Measured on an H200 (cuDNN 9.19, test_cudnn): every algorithm answered
  // NOT_SUPPORTED for an NHWC filter beside NCHW activations (all three
  // directions), and for the weight gradient of a channels-last image beside
  // an NCHW output gradient; forward and data gradient took that image as
  // it is. So an NHWC filter goes to cuDNN only beside a channels-last image
  // and output (PyTorch's channels_last path; not yet run on a GPU);
  // otherwise the weight is NCHW, and the weight gradient's operands all are.
  detail::Conv2dArgs a = args;
  const std::array<std::int64_t, 4> wshape{a.out_channels, a.g.c / a.groups, a.g.kh, a.g.kw};
  const std::array<std::int64_t, 4> xshape{a.g.n, a.g.c, a.g.h, a.g.w};
  const std::array<std::int64_t, 4> yshape{a.g.n, a.out_channels, a.g.oh, a.g.ow};
  const bool weight_gradient = which == FusedOp::Conv2dBackwardWeight;
  const bool all_nhwc = nhwc_filter(a);
  std::unique_ptr<Scratch> wblock, xblock, yblock;
  if (!all_nhwc && !is_contiguous(a.weight, wshape))
    a.weight = contiguous_block(s, args.weight, wshape, a.dtype, wblock, !weight_gradient);
  if (!all_nhwc && weight_gradient && !is_contiguous(a.image, xshape))
    a.image = contiguous_block(s, args.image, xshape, a.dtype, xblock, true);
  if (!all_nhwc && weight_gradient && !is_contiguous(a.out, yshape))
    a.out = contiguous_block(s, args.out, yshape, a.dtype, yblock, true);
  const ConvPointers p{at(a.image, a.dtype), at(a.weight, a.dtype), at(a.out, a.dtype),
                       a.has_bias && a.bias.data != nullptr ? at(a.bias, a.dtype) : nullptr};

  const ConvKey key = key_of(which, a, tf32, benchmark);
  auto it = state.plans.find(key);
  if (it == state.plans.end()) [[unlikely]]
    it = state.plans.emplace(key, make_plan(s, *api, h, which, a, tf32, benchmark, p)).first;
  ConvPlan& plan = *it->second;

  const std::string& label = s.label();
  const double one_d = 1.0, zero_d = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const bool f64 = a.dtype == DType::F64;
  const void* one = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  Scratch ws(s.allocator, plan.workspace);
  // The profiler's record of this call (Note [Convolution algorithms] in core/observer.h).
  detail::observe_conv_algorithm({.direction = direction_name(which),
                                  .algorithm = algorithm_name(which, plan.algo),
                                  .math = plan.math,
                                  .workspace_bytes = plan.workspace});
  if (which == FusedOp::Conv2d) {
    ANVIL_CUDNN_CHECK(label, api->cudnnConvolutionForward(h, one, plan.x, p.x, plan.w, p.w, plan.conv,
                                                          static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), ws.get(),
                                                          ws.size(), zero, plan.y, p.y));
    if (p.b != nullptr) {
      if (plan.bias_by_cudnn) {
        const cudnnStatus_t st = api->cudnnAddTensor(h, one, plan.b, p.b, one, plan.y, p.y);
        if (st == CUDNN_STATUS_NOT_SUPPORTED)
          plan.bias_by_cudnn = false;
        else if (st != CUDNN_STATUS_SUCCESS)
          throw_cudnn_error(st, "cudnnAddTensor(h, one, plan.b, p.b, one, plan.y, p.y)", __FILE__, __LINE__, label);
      }
      if (!plan.bias_by_cudnn) add_bias_shared(s, a);
    }
  } else if (which == FusedOp::Conv2dBackwardData) {
    ANVIL_CUDNN_CHECK(label, api->cudnnConvolutionBackwardData(h, one, plan.w, p.w, plan.y, p.y, plan.conv,
                                                               static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo),
                                                               ws.get(), ws.size(), zero, plan.x, p.x));
  } else {
    ANVIL_CUDNN_CHECK(
        label, api->cudnnConvolutionBackwardFilter(h, one, plan.x, p.x, plan.y, p.y, plan.conv,
                                                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), ws.get(),
                                                   ws.size(), zero, plan.w, p.w));
    if (wblock) copy4(s, wshape, a.weight, args.weight);
    if (p.b != nullptr) {
      if (plan.bias_by_cudnn) {
        const cudnnStatus_t st = api->cudnnConvolutionBackwardBias(h, one, plan.y, p.y, zero, plan.b, p.b);
        if (st == CUDNN_STATUS_NOT_SUPPORTED)
          plan.bias_by_cudnn = false;
        else if (st != CUDNN_STATUS_SUCCESS)
          throw_cudnn_error(st, "cudnnConvolutionBackwardBias(h, one, plan.y, p.y, zero, plan.b, p.b)", __FILE__,
                            __LINE__, label);
      }
      if (!plan.bias_by_cudnn) bias_gradient_shared(s, a);
    }
  }
}

}  // namespace anvil::cuda
