// The recurrent layers through oneDNN's RNN primitives (Note [Fused
// recurrent layers] in core/backend.h): each layer's whole sequence is one
// primitive call forward and one backward, where the composite runs a
// dozen ops per layer and time step.
#include <omp.h>

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "anvil/error.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/dnnl_common.h"
#include "backends/cpu/threads.h"

namespace anvil::cpu_backend {

// Note [oneDNN's recurrent layers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// - Which: f32 RNN (tanh, relu), GRU and LSTM (no f64 RNN in oneDNN: the
//   frontend runs the composite). PyTorch's GRU is oneDNN's lbr_gru.
// - One primitive per layer (oneDNN's multi-layer one wants every input H
//   wide); dropout between layers is anvil's, its mask kept in the reserve.
// - Parameters: weight_ih is oneDNN's ldgoi as it is; GRU gates are copied
//   with the first two swapped (oneDNN: u, r, o); one bias per gate (b_ih +
//   b_hh; lbr_gru adds b_hn); zeros for a layer without biases. Weights are
//   reordered on every call, as cuDNN's path copies them: no cache to
//   invalidate when a parameter changes.
// - Layouts: x, y as they are (tnc or ntc), states ldnc, weights `any`.
// - Threads: DnnlThreads holds the sequence's GEMM work's count (gemm_threads,
//   at most usable_threads()) around creation and run; part of the cache key.

namespace {

using detail::RnnArgs;
using detail::RnnMode;
using dnnl::memory;
using Tag = memory::format_tag;

constexpr std::size_t kCacheCapacity = 64;
constexpr std::size_t kAlignBytes = 64;

enum class Pass : std::uint8_t { Inference, Training, Backward };

struct Key {
  Pass pass;
  RnnMode mode;
  bool batch_first, bias;
  int threads;
  std::array<std::int64_t, 4> dims;  // input, hidden, steps, batch
  auto operator<=>(const Key&) const = default;
};

// One layer's primitive and the layouts it wants.
struct Layer {
  dnnl::primitive primitive;
  memory::desc weights_layer, weights_iter, diff_weights_layer, diff_weights_iter, workspace, scratchpad;
};

std::int64_t gates_of(RnnMode m) { return detail::rnn_gates(m); }
// oneDNN's bias gates: lbr_gru has b_hn as a fourth.
std::int64_t bias_gates(RnnMode m) { return m == RnnMode::Gru ? 4 : gates_of(m); }

// The logical descs of one layer's operands (weights `any`).
struct Descs {
  memory::desc src, iter, weights_layer, weights_iter, bias, dst;
};
Descs descs_of(const Key& k) {
  const auto dt = memory::data_type::f32;
  const std::int64_t in = k.dims[0], H = k.dims[1], T = k.dims[2], N = k.dims[3], G = gates_of(k.mode);
  const Tag layer_tag = k.batch_first ? Tag::ntc : Tag::tnc;
  return {memory::desc({T, N, in}, dt, layer_tag),
          memory::desc({1, 1, N, H}, dt, Tag::ldnc),
          memory::desc({1, 1, in, G, H}, dt, Tag::any),
          memory::desc({1, 1, H, G, H}, dt, Tag::any),
          memory::desc({1, 1, bias_gates(k.mode), H}, dt, Tag::ldgo),
          memory::desc({T, N, H}, dt, layer_tag)};
}

dnnl::algorithm activation(RnnMode m) {
  return m == RnnMode::Relu ? dnnl::algorithm::eltwise_relu : dnnl::algorithm::eltwise_tanh;
}

template <typename Pd>
Layer from_forward(const Pd& pd) {
  return {dnnl::primitive(pd), pd.weights_layer_desc(), pd.weights_iter_desc(), {}, {},
          pd.workspace_desc(), pd.scratchpad_desc()};
}
template <typename Pd>
Layer from_backward(const Pd& pd) {
  return {dnnl::primitive(pd),         pd.weights_layer_desc(), pd.weights_iter_desc(), pd.diff_weights_layer_desc(),
          pd.diff_weights_iter_desc(), pd.workspace_desc(),     pd.scratchpad_desc()};
}

// Creates the primitive of `k`. The backward is made with its forward
// (training) as oneDNN's hint.
Layer create(const Key& k) {
  using dnnl::prop_kind;
  const Descs d = descs_of(k);
  const auto dir = dnnl::rnn_direction::unidirectional_left2right;
  const prop_kind fwd_prop = k.pass == Pass::Inference ? prop_kind::forward_inference : prop_kind::forward_training;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::engine& e = dnnl_engine();
  const memory::desc dwl(d.weights_layer.dims(), memory::data_type::f32, Tag::any),
      dwi(d.weights_iter.dims(), memory::data_type::f32, Tag::any);
  switch (k.mode) {
    case RnnMode::Tanh:
    case RnnMode::Relu: {
      using F = dnnl::vanilla_rnn_forward;
      using B = dnnl::vanilla_rnn_backward;
      const F::primitive_desc fwd(F::desc(fwd_prop, activation(k.mode), dir, d.src, d.iter, d.weights_layer,
                                          d.weights_iter, d.bias, d.dst, d.iter),
                                  attr, e);
      if (k.pass != Pass::Backward) return from_forward(fwd);
      return from_backward(B::primitive_desc(
          B::desc(prop_kind::backward, activation(k.mode), dir, d.src, d.iter, d.weights_layer, d.weights_iter, d.bias,
                  d.dst, d.iter, d.src, d.iter, dwl, dwi, d.bias, d.dst, d.iter),
          attr, e, fwd));
    }
    case RnnMode::Gru: {
      using F = dnnl::lbr_gru_forward;
      using B = dnnl::lbr_gru_backward;
      const F::primitive_desc fwd(
          F::desc(fwd_prop, dir, d.src, d.iter, d.weights_layer, d.weights_iter, d.bias, d.dst, d.iter), attr, e);
      if (k.pass != Pass::Backward) return from_forward(fwd);
      return from_backward(
          B::primitive_desc(B::desc(prop_kind::backward, dir, d.src, d.iter, d.weights_layer, d.weights_iter, d.bias,
                                    d.dst, d.iter, d.src, d.iter, dwl, dwi, d.bias, d.dst, d.iter),
                            attr, e, fwd));
    }
    case RnnMode::Lstm:
      break;
  }
  using F = dnnl::lstm_forward;
  using B = dnnl::lstm_backward;
  const F::primitive_desc fwd(
      F::desc(fwd_prop, dir, d.src, d.iter, d.iter, d.weights_layer, d.weights_iter, d.bias, d.dst, d.iter, d.iter),
      attr, e);
  if (k.pass != Pass::Backward) return from_forward(fwd);
  return from_backward(B::primitive_desc(
      B::desc(prop_kind::backward, dir, d.src, d.iter, d.iter, d.weights_layer, d.weights_iter, d.bias, d.dst, d.iter,
              d.iter, d.src, d.iter, d.iter, dwl, dwi, d.bias, d.dst, d.iter, d.iter),
      attr, e, fwd));
}

Layer cached(const Key& k) {
  static DnnlCache<Key, Layer> cache(kCacheCapacity);
  return cache.get(k, [&] { return create(k); });
}

std::int64_t layer_input(const RnnArgs& a, std::int64_t l) { return l == 0 ? a.input_size : a.hidden_size; }

Key key_of(Pass pass, const RnnArgs& a, std::int64_t l, int threads) {
  return {pass, a.mode, a.batch_first, a.has_bias, threads, {layer_input(a, l), a.hidden_size, a.seq_len, a.batch}};
}

// The thread count of one call: that of its GEMMs, the inputs' share over
// the whole sequence and the recurrent one over every step, as one product
// [T*N] x [G*H] x [in + H]. Inside a parallel region oneDNN runs on the
// calling thread alone.
int rnn_threads(const RnnArgs& a) {
  if (omp_in_parallel()) return 1;
  return gemm_threads(a.seq_len * a.batch, gates_of(a.mode) * a.hidden_size,
                      std::max(a.input_size, a.hidden_size) + a.hidden_size, usable_threads());
}

std::size_t align_up(std::size_t n) { return (n + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

// Where each layer's parts lie in the reserve (Note [oneDNN's recurrent layers]).
struct ReservePart {
  std::size_t workspace = 0, y = 0, scale = 0, next = 0;  // byte offsets; y.. only below the last layer
};
struct ReserveLayout {
  std::vector<ReservePart> layers;
  std::size_t total = 0;
};
ReserveLayout reserve_layout(const RnnArgs& a, int threads) {
  ReserveLayout r;
  const std::size_t seq_bytes = align_up(static_cast<std::size_t>(a.seq_len * a.batch * a.hidden_size) * 4);
  std::size_t at = 0;
  for (std::int64_t l = 0; l < a.layers; ++l) {
    ReservePart p;
    p.workspace = at;
    at += align_up(cached(key_of(Pass::Training, a, l, threads)).workspace.get_size());
    if (l + 1 < a.layers) {
      p.y = at;
      at += seq_bytes;
      if (a.dropout > 0.0) {
        p.scale = at;
        p.next = at + seq_bytes;
        at += 2 * seq_bytes;
      }
    }
    r.layers.push_back(p);
  }
  r.total = at;
  return r;
}

float* address(const detail::KernelOperand& o) {
  return o.data == nullptr ? nullptr : static_cast<float*>(o.data) + o.offset;
}
memory wrap(const memory::desc& d, void* data) { return memory(d, dnnl_engine(), data); }
memory zeroed(const memory::desc& d, DnnlTemporaries& temporaries) {
  memory m = temporaries.make(d);
  if (d.get_size() > 0) std::memset(m.get_data_handle(), 0, d.get_size());
  return m;
}

// `from` in the layout `want`: itself when it already is, else a reordered copy.
memory in_layout(memory from, const memory::desc& want, dnnl::stream& s, DnnlTemporaries& temporaries) {
  if (from.get_desc() == want) return from;
  memory to = temporaries.make(want);
  dnnl::reorder(from, to).execute(s, from, to);
  return to;
}

// oneDNN's GRU gate g is PyTorch's gate kGruGate[g] (u = z, r, o = n).
constexpr std::array<std::int64_t, 3> kGruGate{1, 0, 2};

// Layer l's weight_ih (recurrent: weight_hh) as oneDNN's ldgoi, the GRU's
// first two gates swapped into a temporary.
memory user_weight(const RnnArgs& a, std::int64_t l, bool recurrent, DnnlTemporaries& temporaries) {
  const std::int64_t G = gates_of(a.mode), H = a.hidden_size, cols = recurrent ? H : layer_input(a, l);
  const memory::desc d({1, 1, cols, G, H}, memory::data_type::f32, Tag::ldgoi);
  const std::size_t per_layer = a.has_bias ? 4 : 2;
  float* w = address(a.weights[static_cast<std::size_t>(l) * per_layer + (recurrent ? 1 : 0)]);
  if (a.mode != RnnMode::Gru) return wrap(d, w);
  memory m = temporaries.make(d);
  auto* out = static_cast<float*>(m.get_data_handle());
  const std::size_t gate = static_cast<std::size_t>(H * cols);
  for (std::int64_t g = 0; g < G; ++g)
    std::memcpy(out + g * H * cols, w + kGruGate[static_cast<std::size_t>(g)] * H * cols, gate * sizeof(float));
  return m;
}

// Layer l's oneDNN bias (ldgo) from bias_ih and bias_hh.
memory user_bias(const RnnArgs& a, std::int64_t l, DnnlTemporaries& temporaries) {
  const std::int64_t G = gates_of(a.mode), H = a.hidden_size;
  const memory::desc d({1, 1, bias_gates(a.mode), H}, memory::data_type::f32, Tag::ldgo);
  if (!a.has_bias) return zeroed(d, temporaries);
  memory m = temporaries.make(d);
  auto* b = static_cast<float*>(m.get_data_handle());
  const std::size_t base = static_cast<std::size_t>(l) * 4;
  const float* bih = address(a.weights[base + 2]);
  const float* bhh = address(a.weights[base + 3]);
  for (std::int64_t g = 0; g < G; ++g) {
    const std::int64_t src = a.mode == RnnMode::Gru ? kGruGate[static_cast<std::size_t>(g)] : g;
    const bool apart = a.mode == RnnMode::Gru && g == 2;  // b_in alone; b_hn is gate 3
    for (std::int64_t j = 0; j < H; ++j) b[g * H + j] = bih[src * H + j] + (apart ? 0.0f : bhh[src * H + j]);
  }
  if (a.mode == RnnMode::Gru) std::memcpy(b + 3 * H, bhh + 2 * H, static_cast<std::size_t>(H) * sizeof(float));
  return m;
}

// The gradient `work` (in the primitive's layout) into layer l's
// weight_ih (recurrent: weight_hh) gradient.
void store_weight_grad(const RnnArgs& a, std::int64_t l, bool recurrent, memory& work, dnnl::stream& s,
                       DnnlTemporaries& temporaries) {
  const std::int64_t G = gates_of(a.mode), H = a.hidden_size, cols = recurrent ? H : layer_input(a, l);
  const memory::desc d({1, 1, cols, G, H}, memory::data_type::f32, Tag::ldgoi);
  const std::size_t per_layer = a.has_bias ? 4 : 2;
  float* dw = address(a.dweights[static_cast<std::size_t>(l) * per_layer + (recurrent ? 1 : 0)]);
  memory target = a.mode == RnnMode::Gru ? temporaries.make(d) : wrap(d, dw);
  dnnl::reorder(work, target).execute(s, work, target);
  if (a.mode != RnnMode::Gru) return;
  const auto* g_in = static_cast<const float*>(target.get_data_handle());
  const std::size_t gate = static_cast<std::size_t>(H * cols);
  for (std::int64_t g = 0; g < G; ++g)
    std::memcpy(dw + kGruGate[static_cast<std::size_t>(g)] * H * cols, g_in + g * H * cols, gate * sizeof(float));
}

void store_bias_grad(const RnnArgs& a, std::int64_t l, const memory& diff_bias) {
  const std::int64_t G = gates_of(a.mode), H = a.hidden_size;
  const auto* db = static_cast<const float*>(diff_bias.get_data_handle());
  const std::size_t base = static_cast<std::size_t>(l) * 4;
  float* dih = address(a.dweights[base + 2]);
  float* dhh = address(a.dweights[base + 3]);
  for (std::int64_t g = 0; g < G; ++g) {
    const std::int64_t dst = a.mode == RnnMode::Gru ? kGruGate[static_cast<std::size_t>(g)] : g;
    const std::int64_t hh = a.mode == RnnMode::Gru && g == 2 ? 3 : g;
    std::memcpy(dih + dst * H, db + g * H, static_cast<std::size_t>(H) * sizeof(float));
    std::memcpy(dhh + dst * H, db + hh * H, static_cast<std::size_t>(H) * sizeof(float));
  }
}

// Dropout between layers: scale[i] = 0 with probability p, else 1 / (1 - p),
// from a hash of (seed, layer, i); next = y * scale.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
void drop_out(const RnnArgs& a, std::int64_t l, const float* y, float* scale, float* next) {
  const std::int64_t n = a.seq_len * a.batch * a.hidden_size;
  const float keep = static_cast<float>(1.0 / (1.0 - a.dropout));
  const std::uint64_t stream = mix(a.dropout_seed ^ mix(static_cast<std::uint64_t>(l) + 1));
  for (std::int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(mix(stream + static_cast<std::uint64_t>(i)) >> 11) * 0x1.0p-53;
    scale[i] = u < a.dropout ? 0.0f : keep;
    next[i] = y[i] * scale[i];
  }
}

std::string describe(const RnnArgs& a) {
  return detail::cat(detail::name(a.mode), ": oneDNN's recurrent layer failed for ", a.layers, " layers, input [",
                     a.seq_len, ", ", a.batch, ", ", a.input_size, "], hidden size ", a.hidden_size);
}

}  // namespace

bool CpuBackend::supports_fused_rnn(int, const RnnArgs& a) noexcept {
  if (a.dtype != DType::F32) return false;  // oneDNN has no f64 RNN; 16-bit stays on the composite
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  for (std::int64_t v : {a.layers, a.input_size, a.hidden_size, a.seq_len, a.batch})
    if (v <= 0 || v > kMax) return false;
  return a.dropout >= 0.0 && a.dropout < 1.0;
}

std::size_t CpuBackend::rnn_reserve_bytes(int, const RnnArgs& a) {
  try {
    const DnnlThreads threads(rnn_threads(a));
    return reserve_layout(a, threads.threads()).total;
  } catch (const dnnl::error& e) {
    throw BackendError(detail::cat(describe(a), " (status ", static_cast<int>(e.status), ": ", e.what(), ")"));
  }
}

void CpuBackend::rnn_forward(int, const RnnArgs& a) {
  count({});
  try {
    const DnnlThreads threads(rnn_threads(a));
    const ReserveLayout reserve = a.training ? reserve_layout(a, threads.threads()) : ReserveLayout{};
    ANVIL_ASSERT(!a.training || a.reserve_bytes >= reserve.total, detail::name(a.mode), ": reserve of ",
                 a.reserve_bytes, " bytes; expected ", reserve.total);
    auto* rbytes = static_cast<char*>(static_cast<void*>(address(a.reserve)));
    const bool lstm = a.mode == RnnMode::Lstm;
    const std::int64_t state = a.batch * a.hidden_size;
    DnnlTemporaries temporaries(allocator_);
    dnnl::stream s(dnnl_engine());
    const float* in = address(a.x);
    for (std::int64_t l = 0; l < a.layers; ++l) {
      const Key key = key_of(a.training ? Pass::Training : Pass::Inference, a, l, threads.threads());
      const Layer layer = cached(key);
      const Descs d = descs_of(key);
      const bool last = l + 1 == a.layers;
      memory dst = last         ? wrap(d.dst, address(a.y))
                   : a.training ? wrap(d.dst, rbytes + reserve.layers[static_cast<std::size_t>(l)].y)
                                : temporaries.make(d.dst);
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC_LAYER, wrap(d.src, const_cast<float*>(in))},
          {DNNL_ARG_WEIGHTS_LAYER,
           in_layout(user_weight(a, l, false, temporaries), layer.weights_layer, s, temporaries)},
          {DNNL_ARG_WEIGHTS_ITER, in_layout(user_weight(a, l, true, temporaries), layer.weights_iter, s, temporaries)},
          {DNNL_ARG_DST_LAYER, dst},
          {DNNL_ARG_DST_ITER, wrap(d.iter, address(a.hy) + l * state)},
          {DNNL_ARG_SCRATCHPAD, temporaries.make(layer.scratchpad)}};
      args.emplace(DNNL_ARG_SRC_ITER,
                   a.h0.data != nullptr ? wrap(d.iter, address(a.h0) + l * state) : zeroed(d.iter, temporaries));
      if (lstm) {
        args.emplace(DNNL_ARG_SRC_ITER_C,
                     a.c0.data != nullptr ? wrap(d.iter, address(a.c0) + l * state) : zeroed(d.iter, temporaries));
        args.emplace(DNNL_ARG_DST_ITER_C, wrap(d.iter, address(a.cy) + l * state));
      }
      args.emplace(DNNL_ARG_BIAS, user_bias(a, l, temporaries));
      if (a.training)
        args.emplace(DNNL_ARG_WORKSPACE,
                     wrap(layer.workspace, rbytes + reserve.layers[static_cast<std::size_t>(l)].workspace));
      layer.primitive.execute(s, args);
      if (last) break;
      auto* y = static_cast<float*>(dst.get_data_handle());
      if (a.dropout > 0.0) {
        const ReservePart& p = reserve.layers[static_cast<std::size_t>(l)];
        auto* next = reinterpret_cast<float*>(rbytes + p.next);
        drop_out(a, l, y, reinterpret_cast<float*>(rbytes + p.scale), next);
        in = next;
      } else {
        in = y;
      }
    }
    s.wait();
  } catch (const dnnl::error& e) {
    throw BackendError(detail::cat(describe(a), " (status ", static_cast<int>(e.status), ": ", e.what(), ")"));
  }
}

void CpuBackend::rnn_backward(int, const RnnArgs& a) {
  count({});
  try {
    ANVIL_ASSERT(a.training, detail::name(a.mode), ": the backward needs the training forward's reserve");
    const DnnlThreads threads(rnn_threads(a));
    const ReserveLayout reserve = reserve_layout(a, threads.threads());
    ANVIL_ASSERT(a.reserve_bytes >= reserve.total, detail::name(a.mode), ": reserve of ", a.reserve_bytes,
                 " bytes; expected ", reserve.total);
    auto* rbytes = static_cast<char*>(static_cast<void*>(address(a.reserve)));
    const bool lstm = a.mode == RnnMode::Lstm, want_weights = !a.dweights.empty();
    const std::int64_t state = a.batch * a.hidden_size, seq = a.seq_len * state;
    DnnlTemporaries temporaries(allocator_);
    dnnl::stream s(dnnl_engine());
    // The gradient of layer l's output, from above (dy for the last layer).
    float* diff_out = address(a.dy);
    for (std::int64_t l = a.layers - 1; l >= 0; --l) {
      const Key key = key_of(Pass::Backward, a, l, threads.threads());
      const Layer layer = cached(key);
      const Descs d = descs_of(key);
      const bool last = l + 1 == a.layers;
      const auto part = [&](std::int64_t layer_index) { return reserve.layers[static_cast<std::size_t>(layer_index)]; };
      // Layer l's input and output as the forward saw them.
      const float* in = l == 0            ? address(a.x)
                        : a.dropout > 0.0 ? reinterpret_cast<const float*>(rbytes + part(l - 1).next)
                                          : reinterpret_cast<const float*>(rbytes + part(l - 1).y);
      float* out = last ? address(a.y) : reinterpret_cast<float*>(rbytes + part(l).y);
      memory diff_src = l == 0 ? wrap(d.src, address(a.dx)) : temporaries.make(d.src);
      memory diff_wl = zeroed(layer.diff_weights_layer, temporaries),
             diff_wi = zeroed(layer.diff_weights_iter, temporaries);
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC_LAYER, wrap(d.src, const_cast<float*>(in))},
          {DNNL_ARG_WEIGHTS_LAYER,
           in_layout(user_weight(a, l, false, temporaries), layer.weights_layer, s, temporaries)},
          {DNNL_ARG_WEIGHTS_ITER, in_layout(user_weight(a, l, true, temporaries), layer.weights_iter, s, temporaries)},
          {DNNL_ARG_DST_LAYER, wrap(d.dst, out)},
          {DNNL_ARG_DST_ITER, wrap(d.iter, address(a.hy) + l * state)},
          {DNNL_ARG_WORKSPACE, wrap(layer.workspace, rbytes + part(l).workspace)},
          {DNNL_ARG_DIFF_SRC_LAYER, diff_src},
          {DNNL_ARG_DIFF_WEIGHTS_LAYER, diff_wl},
          {DNNL_ARG_DIFF_WEIGHTS_ITER, diff_wi},
          {DNNL_ARG_DIFF_DST_LAYER, wrap(d.dst, diff_out)},
          {DNNL_ARG_SCRATCHPAD, temporaries.make(layer.scratchpad)}};
      const auto given_or = [&](const detail::KernelOperand& o, bool zero) {
        return o.data != nullptr ? wrap(d.iter, address(o) + l * state)
                                 : (zero ? zeroed(d.iter, temporaries) : temporaries.make(d.iter));
      };
      args.emplace(DNNL_ARG_SRC_ITER, given_or(a.h0, true));
      args.emplace(DNNL_ARG_DIFF_DST_ITER, given_or(a.dhy, true));
      args.emplace(DNNL_ARG_DIFF_SRC_ITER, given_or(a.dh0, false));
      if (lstm) {
        args.emplace(DNNL_ARG_SRC_ITER_C, given_or(a.c0, true));
        args.emplace(DNNL_ARG_DST_ITER_C, wrap(d.iter, address(a.cy) + l * state));
        args.emplace(DNNL_ARG_DIFF_DST_ITER_C, given_or(a.dcy, true));
        args.emplace(DNNL_ARG_DIFF_SRC_ITER_C, given_or(a.dc0, false));
      }
      const memory diff_bias = zeroed(d.bias, temporaries);
      args.emplace(DNNL_ARG_BIAS, user_bias(a, l, temporaries));
      args.emplace(DNNL_ARG_DIFF_BIAS, diff_bias);
      layer.primitive.execute(s, args);
      if (want_weights) {
        store_weight_grad(a, l, false, diff_wl, s, temporaries);
        store_weight_grad(a, l, true, diff_wi, s, temporaries);
        if (a.has_bias) store_bias_grad(a, l, diff_bias);
      }
      if (l == 0) break;
      // The gradient of layer l - 1's output: through the dropout's scale.
      auto* dsrc = static_cast<float*>(diff_src.get_data_handle());
      if (a.dropout > 0.0) {
        const auto* scale = reinterpret_cast<const float*>(rbytes + part(l - 1).scale);
        for (std::int64_t i = 0; i < seq; ++i) dsrc[i] *= scale[i];
      }
      diff_out = dsrc;
    }
    s.wait();
  } catch (const dnnl::error& e) {
    throw BackendError(detail::cat(describe(a), " (status ", static_cast<int>(e.status), ": ", e.what(), ")"));
  }
}

}  // namespace anvil::cpu_backend
