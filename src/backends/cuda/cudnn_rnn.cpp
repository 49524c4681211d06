// The recurrent layers through cuDNN's v8 RNN API (Note [Fused recurrent
// layers] in core/backend.h): the whole multi-layer RNN, GRU or LSTM over a
// sequence is one cudnnRNNForward, and its gradient one
// cudnnRNNBackwardData_v8 and (where a parameter wants it) one
// cudnnRNNBackwardWeights_v8, where the composite launches a dozen kernels
// per layer and time step.
//
// Note [cuDNN's recurrent layers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// anvil's parameters are PyTorch's (weight_ih_l<l> [G*H, in], weight_hh_l<l>
// [G*H, H], the two biases; gates r, z, n and i, f, g, o), and cuDNN's cells
// compute the same functions in the same gate order (linLayerID g < G: gate g
// of weight_ih, G + g: of weight_hh; its GRU candidate is PyTorch's). So each
// gate's rows are copied as they are to where cudnnGetRNNWeightParams says,
// adjacent copies merged. The weights are packed into a weight space on every
// call, not cached: a step changes every parameter anyway, and a copy per call
// needs no invalidation; the backward packs them again from what its rule
// saved. Per device (Queue::dnn_rnn_state): a Plan of descriptors and sizes
// per shape, and a dropout descriptor per probability, seeded once from
// RnnArgs::dropout_seed. Workspaces come from the caching allocator per call;
// the reserve is the frontend's tensor, kept by the autograd node.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_map>
#include <vector>

#include "anvil/error.h"
#include "backends/common/scratch.h"
#include "backends/cuda/runtime.h"
#include "core/backend_settings.h"

namespace anvil::cuda {

namespace {

using detail::RnnArgs;
using detail::RnnMode;
using device_common::Scratch;

// Plans kept per device before the cache starts again (a new sequence
// length or batch size is a new plan; a training loop uses one or two).
constexpr std::size_t kMaxPlans = 64;

cudnnRNNMode_t cell(RnnMode m) noexcept {
  switch (m) {
    case RnnMode::Tanh:
      return CUDNN_RNN_TANH;
    case RnnMode::Relu:
      return CUDNN_RNN_RELU;
    case RnnMode::Gru:
      return CUDNN_GRU;
    case RnnMode::Lstm:
      break;
  }
  return CUDNN_LSTM;
}

// torch.backends.cudnn.allow_tf32 covers the recurrent layers too (as in
// PyTorch): f32 may use TF32 tensor cores unless it is off.
cudnnMathType_t math_type(DType t) noexcept {
  if (t == DType::F32 && detail::vendor_settings().cudnn_allow_tf32.load(std::memory_order_relaxed))
    return CUDNN_DEFAULT_MATH;
  return CUDNN_FMA_MATH;
}

struct PlanKey {
  RnnMode mode;
  DType dtype;
  std::int64_t layers, input, hidden, steps, batch;
  bool batch_first, bias, training;
  double dropout;
  cudnnMathType_t math;
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const noexcept {
    std::size_t h = static_cast<std::size_t>(k.mode) * 31 + static_cast<std::size_t>(k.dtype);
    for (std::int64_t v : {k.layers, k.input, k.hidden, k.steps, k.batch})
      h = h * 1000003u ^ static_cast<std::size_t>(v);
    h = h * 31 + (k.batch_first ? 1 : 0) + (k.bias ? 2 : 0) + (k.training ? 4 : 0) +
        static_cast<std::size_t>(k.math) * 8;
    return h ^ std::hash<double>()(k.dropout);
  }
};
PlanKey key_of(const RnnArgs& a) {
  return {a.mode,  a.dtype,       a.layers,   a.input_size, a.hidden_size, a.seq_len,
          a.batch, a.batch_first, a.has_bias, a.training,   a.dropout,     math_type(a.dtype)};
}

// Bytes copied between one of RnnArgs::weights and cuDNN's weight space.
struct Piece {
  std::size_t param = 0, param_byte = 0, space_byte = 0, bytes = 0;
};

// Descriptors and sizes of one shape. Device memory (the sequence lengths)
// is returned to the allocator by RnnState::clear_plans only: at exit the
// allocator is gone before the queue that owns this.
struct Plan {
  const CudnnApi* api = nullptr;
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t h = nullptr;
  std::size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  std::vector<Piece> pieces;
  std::vector<std::int32_t> seq_lengths;  // the host copy (cudnnSetRNNDataDescriptor)
  void* dev_seq_lengths = nullptr;        // the device copy (cudnnRNNForward and the backward)
  std::size_t dev_seq_bytes = 0;

  explicit Plan(const CudnnApi* a) : api(a) {}
  ~Plan() {
    if (h != nullptr) api->cudnnDestroyTensorDescriptor(h);
    if (y != nullptr) api->cudnnDestroyRNNDataDescriptor(y);
    if (x != nullptr) api->cudnnDestroyRNNDataDescriptor(x);
    if (rnn != nullptr) api->cudnnDestroyRNNDescriptor(rnn);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
};

struct DropoutState {
  cudnnDropoutDescriptor_t desc = nullptr;
  void* states = nullptr;  // kept for the process (the generator's state)
  std::size_t bytes = 0;
};

// One device's cuDNN RNN state (Queue::dnn_rnn_state).
struct RnnState {
  const CudnnApi* api = nullptr;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  std::unordered_map<double, DropoutState> dropouts;

  explicit RnnState(const CudnnApi* a) : api(a) {}
  ~RnnState() {
    plans.clear();  // before the dropout descriptors their RNN descriptors name
    for (auto& [p, d] : dropouts) api->cudnnDestroyDropoutDescriptor(d.desc);
  }
  RnnState(const RnnState&) = delete;
  RnnState& operator=(const RnnState&) = delete;

  void clear_plans(detail::CachingAllocator& allocator) {
    for (auto& [k, p] : plans)
      if (p->dev_seq_lengths != nullptr) allocator.deallocate(p->dev_seq_lengths, p->dev_seq_bytes);
    plans.clear();
  }
};

// The address of an operand's first element; null for an absent one.
void* address(const detail::KernelOperand& o) noexcept {
  if (o.data == nullptr) return nullptr;
  return static_cast<char*>(o.data) + o.offset * static_cast<std::int64_t>(element_size(o.dtype));
}

const CudnnApi& api_or_throw() {
  const CudnnApi* api = cudnn_if_enabled();
  if (api == nullptr) {
    std::string why;
    (void)load_cudnn(&why);
    throw BackendError(detail::cat(current_op(), ": cuDNN's recurrent layers are not available (",
                                   why.empty() ? std::string("switched off") : why,
                                   "); expected the frontend to run the composite where rnn_dnn_takes() is false"));
  }
  return *api;
}

RnnState& state_of(Slot& s, const CudnnApi& api) {
  if (!s.queue.dnn_rnn_state) s.queue.dnn_rnn_state = std::make_shared<RnnState>(&api);
  return *static_cast<RnnState*>(s.queue.dnn_rnn_state.get());
}

cudnnDropoutDescriptor_t dropout_of(Slot& s, RnnState& st, cudnnHandle_t h, double p, std::uint64_t seed) {
  auto it = st.dropouts.find(p);
  if (it != st.dropouts.end()) return it->second.desc;
  const CudnnApi& api = *st.api;
  const std::string& label = s.label();
  DropoutState d;
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateDropoutDescriptor(&d.desc));
  try {
    if (p > 0.0) {
      ANVIL_CUDNN_CHECK(label, api.cudnnDropoutGetStatesSize(h, &d.bytes));
      if (d.bytes > 0) d.states = s.allocator.allocate(d.bytes);
    }
    // Without dropout cuDNN needs no generator: no states, no kernel.
    ANVIL_CUDNN_CHECK(label, api.cudnnSetDropoutDescriptor(d.desc, h, static_cast<float>(p), d.states, d.bytes,
                                                           static_cast<unsigned long long>(seed)));
  } catch (...) {
    api.cudnnDestroyDropoutDescriptor(d.desc);
    if (d.states != nullptr) s.allocator.deallocate(d.states, d.bytes);
    throw;
  }
  st.dropouts.emplace(p, d);
  return d.desc;
}

// Where each gate of each parameter lies in the weight space (Note [cuDNN's
// recurrent layers]), asked of cuDNN with a real weight space of the plan's size.
std::vector<Piece> weight_pieces(Slot& s, const CudnnApi& api, cudnnHandle_t h, const Plan& p, const RnnArgs& a) {
  const std::string& label = s.label();
  const std::int64_t G = detail::rnn_gates(a.mode), H = a.hidden_size;
  const std::size_t esize = element_size(a.dtype), per_layer = a.has_bias ? 4 : 2;
  Scratch space(s.allocator, p.weight_bytes);
  cudnnTensorDescriptor_t mdesc = nullptr, bdesc = nullptr;
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateTensorDescriptor(&mdesc));
  std::vector<Piece> pieces;
  try {
    ANVIL_CUDNN_CHECK(label, api.cudnnCreateTensorDescriptor(&bdesc));
    for (std::int64_t l = 0; l < a.layers; ++l) {
      const std::int64_t in_l = l == 0 ? a.input_size : H;
      for (std::int64_t id = 0; id < 2 * G; ++id) {
        void* m = nullptr;
        void* b = nullptr;
        ANVIL_CUDNN_CHECK(
            label, api.cudnnGetRNNWeightParams(h, p.rnn, static_cast<std::int32_t>(l), p.weight_bytes, space.get(),
                                               static_cast<std::int32_t>(id), mdesc, &m, bdesc, &b));
        const bool recurrent = id >= G;
        const std::int64_t gate = id % G, cols = recurrent ? H : in_l;
        auto add = [&](void* at, std::size_t param, std::size_t param_byte, std::size_t bytes) {
          const std::ptrdiff_t off = static_cast<char*>(at) - space.as<char>();
          ANVIL_CHECK(at != nullptr && off >= 0 && static_cast<std::size_t>(off) + bytes <= p.weight_bytes,
                      BackendError, current_op(), ": cudnnGetRNNWeightParams gave layer ", l, " matrix ", id,
                      " outside the weight space on ", label, "; expected ", bytes, " bytes within ", p.weight_bytes,
                      ", got offset ", at == nullptr ? std::ptrdiff_t{-1} : off);
          pieces.push_back({param, param_byte, static_cast<std::size_t>(off), bytes});
        };
        const std::size_t base = static_cast<std::size_t>(l) * per_layer;
        add(m, base + (recurrent ? 1 : 0), static_cast<std::size_t>(gate * H * cols) * esize,
            static_cast<std::size_t>(H * cols) * esize);
        if (a.has_bias)
          add(b, base + (recurrent ? 3 : 2), static_cast<std::size_t>(gate * H) * esize,
              static_cast<std::size_t>(H) * esize);
      }
    }
  } catch (...) {
    api.cudnnDestroyTensorDescriptor(mdesc);
    if (bdesc != nullptr) api.cudnnDestroyTensorDescriptor(bdesc);
    throw;
  }
  api.cudnnDestroyTensorDescriptor(mdesc);
  api.cudnnDestroyTensorDescriptor(bdesc);
  // One copy where a parameter's gates lie one after the other in the space too.
  std::sort(pieces.begin(), pieces.end(), [](const Piece& x, const Piece& y) {
    return x.param != y.param ? x.param < y.param : x.param_byte < y.param_byte;
  });
  std::vector<Piece> merged;
  for (const Piece& q : pieces) {
    if (!merged.empty()) {
      Piece& last = merged.back();
      if (last.param == q.param && last.param_byte + last.bytes == q.param_byte &&
          last.space_byte + last.bytes == q.space_byte) {
        last.bytes += q.bytes;
        continue;
      }
    }
    merged.push_back(q);
  }
  return merged;
}

Plan& plan_of(Slot& s, const CudnnApi& api, cudnnHandle_t h, const RnnArgs& a) {
  RnnState& st = state_of(s, api);
  const PlanKey key = key_of(a);
  auto it = st.plans.find(key);
  if (it != st.plans.end()) [[likely]]
    return *it->second;
  if (st.plans.size() >= kMaxPlans) st.clear_plans(s.allocator);

  const std::string& label = s.label();
  auto p = std::make_unique<Plan>(&api);
  const cudnnDataType_t dt = cudnn_data_type(a.dtype);
  const auto i32 = [](std::int64_t v) { return static_cast<std::int32_t>(v); };
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateRNNDescriptor(&p->rnn));
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateRNNDataDescriptor(&p->x));
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateRNNDataDescriptor(&p->y));
  ANVIL_CUDNN_CHECK(label, api.cudnnCreateTensorDescriptor(&p->h));
  const cudnnDropoutDescriptor_t drop = dropout_of(s, st, h, a.dropout, a.dropout_seed);
  // Padded I/O: the unpacked layouts, batch-first among them; every
  // sequence has the full length, so nothing is padded.
  ANVIL_CUDNN_CHECK(
      label, api.cudnnSetRNNDescriptor_v8(p->rnn, CUDNN_RNN_ALGO_STANDARD, cell(a.mode),
                                          a.has_bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS, CUDNN_UNIDIRECTIONAL,
                                          CUDNN_LINEAR_INPUT, dt, dt, key.math, i32(a.input_size), i32(a.hidden_size),
                                          i32(a.hidden_size), i32(a.layers), drop, CUDNN_RNN_PADDED_IO_ENABLED));
  p->seq_lengths.assign(static_cast<std::size_t>(a.batch), i32(a.seq_len));
  const cudnnRNNDataLayout_t layout =
      a.batch_first ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
  ANVIL_CUDNN_CHECK(label, api.cudnnSetRNNDataDescriptor(p->x, dt, layout, i32(a.seq_len), i32(a.batch),
                                                         i32(a.input_size), p->seq_lengths.data(), nullptr));
  ANVIL_CUDNN_CHECK(label, api.cudnnSetRNNDataDescriptor(p->y, dt, layout, i32(a.seq_len), i32(a.batch),
                                                         i32(a.hidden_size), p->seq_lengths.data(), nullptr));
  const int dims[3] = {i32(a.layers), i32(a.batch), i32(a.hidden_size)};
  const int strides[3] = {i32(a.batch * a.hidden_size), i32(a.hidden_size), 1};
  ANVIL_CUDNN_CHECK(label, api.cudnnSetTensorNdDescriptor(p->h, dt, 3, dims, strides));
  ANVIL_CUDNN_CHECK(label, api.cudnnGetRNNWeightSpaceSize(h, p->rnn, &p->weight_bytes));
  ANVIL_CUDNN_CHECK(
      label, api.cudnnGetRNNTempSpaceSizes(h, p->rnn, a.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                           p->x, &p->work_bytes, &p->reserve_bytes));
  p->pieces = weight_pieces(s, api, h, *p, a);
  // The device copy of the lengths, read by cuDNN's kernels after the call
  // returns: the pinned staging copy leaves the host vector free at once,
  // and the vector lives as long as the plan anyway.
  p->dev_seq_bytes = p->seq_lengths.size() * sizeof(std::int32_t);
  p->dev_seq_lengths = s.allocator.allocate(p->dev_seq_bytes);
  try {
    if (s.queue.copy_from_host(p->dev_seq_lengths, 0, p->seq_lengths.data(), p->dev_seq_bytes))
      ANVIL_CUDA_CHECK(label, cudaStreamSynchronize(s.queue.stream));
  } catch (...) {
    s.allocator.deallocate(p->dev_seq_lengths, p->dev_seq_bytes);
    throw;
  }
  Plan& ref = *p;
  st.plans.emplace(key, std::move(p));
  return ref;
}

// Each parameter's gates into the weight space (forward: to_space) or the
// weight gradients out of the gradient space.
void copy_weights(Slot& s, const Plan& p, const std::vector<detail::KernelOperand>& params, char* space,
                  bool to_space) {
  for (const Piece& q : p.pieces) {
    char* param = static_cast<char*>(address(params[q.param])) + q.param_byte;
    char* in_space = space + q.space_byte;
    ANVIL_CUDA_CHECK(s.label(), cudaMemcpyAsync(to_space ? in_space : param, to_space ? param : in_space, q.bytes,
                                                cudaMemcpyDeviceToDevice, s.queue.stream));
  }
}

void check_weights(const RnnArgs& a, const std::vector<detail::KernelOperand>& w, const char* what) {
  const std::size_t want = static_cast<std::size_t>(a.layers) * (a.has_bias ? 4 : 2);
  ANVIL_ASSERT(w.size() == want, current_op(), ": ", what, " holds ", w.size(), " operands; expected ", want);
}

}  // namespace

bool Runtime::rnn_dnn_takes(const DeviceEntry&, const detail::RnnArgs& a) noexcept {
  if (cudnn_if_enabled() == nullptr) return false;
  if (a.dtype != DType::F32 && a.dtype != DType::F64) return false;
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  for (std::int64_t v : {a.layers, a.input_size, a.hidden_size, a.seq_len, a.batch})
    if (v <= 0 || v > kMax) return false;
  // The state descriptors' strides are int too.
  return a.batch * a.hidden_size <= kMax && a.dropout >= 0.0 && a.dropout < 1.0;
}

std::size_t Runtime::rnn_dnn_reserve_bytes(Slot& s, const detail::RnnArgs& a) {
  const CudnnApi& api = api_or_throw();
  const cudnnHandle_t h = s.queue.dnn(api, s.allocator);
  return plan_of(s, api, h, a).reserve_bytes;
}

void Runtime::rnn_dnn_forward(Slot& s, const detail::RnnArgs& a) {
  const CudnnApi& api = api_or_throw();
  const cudnnHandle_t h = s.queue.dnn(api, s.allocator);
  const Plan& p = plan_of(s, api, h, a);
  check_weights(a, a.weights, "weights");
  ANVIL_ASSERT(!a.training || a.reserve_bytes >= p.reserve_bytes, current_op(), ": reserve of ", a.reserve_bytes,
               " bytes; expected ", p.reserve_bytes);
  Scratch weights(s.allocator, p.weight_bytes), work(s.allocator, p.work_bytes);
  copy_weights(s, p, a.weights, weights.as<char>(), true);
  ANVIL_CUDNN_CHECK(
      s.label(), api.cudnnRNNForward(h, p.rnn, a.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                     static_cast<const std::int32_t*>(p.dev_seq_lengths), p.x, address(a.x), p.y,
                                     address(a.y), p.h, address(a.h0), address(a.hy), p.h, address(a.c0), address(a.cy),
                                     p.weight_bytes, weights.get(), p.work_bytes, work.get(),
                                     a.training ? p.reserve_bytes : 0, a.training ? address(a.reserve) : nullptr));
}

void Runtime::rnn_dnn_backward(Slot& s, const detail::RnnArgs& a) {
  const CudnnApi& api = api_or_throw();
  const cudnnHandle_t h = s.queue.dnn(api, s.allocator);
  ANVIL_ASSERT(a.training, current_op(), ": the backward needs the training forward's plan");
  const Plan& p = plan_of(s, api, h, a);
  check_weights(a, a.weights, "weights");
  ANVIL_ASSERT(a.reserve_bytes >= p.reserve_bytes, current_op(), ": reserve of ", a.reserve_bytes, " bytes; expected ",
               p.reserve_bytes);
  Scratch weights(s.allocator, p.weight_bytes), work(s.allocator, p.work_bytes);
  copy_weights(s, p, a.weights, weights.as<char>(), true);
  const auto* lengths = static_cast<const std::int32_t*>(p.dev_seq_lengths);
  // dx always (cuDNN computes it and the weights' gradient needs this call
  // first); dh0 and dc0 where asked; dhy and dcy null mean zero.
  ANVIL_CUDNN_CHECK(s.label(),
                    api.cudnnRNNBackwardData_v8(h, p.rnn, lengths, p.y, address(a.y), address(a.dy), p.x, address(a.dx),
                                                p.h, address(a.h0), address(a.dhy), address(a.dh0), p.h, address(a.c0),
                                                address(a.dcy), address(a.dc0), p.weight_bytes, weights.get(),
                                                p.work_bytes, work.get(), p.reserve_bytes, address(a.reserve)));
  if (a.dweights.empty()) return;
  check_weights(a, a.dweights, "dweights");
  Scratch grads(s.allocator, p.weight_bytes);
  ANVIL_CUDA_CHECK(s.label(), cudaMemsetAsync(grads.get(), 0, p.weight_bytes, s.queue.stream));
  ANVIL_CUDNN_CHECK(s.label(),
                    api.cudnnRNNBackwardWeights_v8(h, p.rnn, CUDNN_WGRAD_MODE_ADD, lengths, p.x, address(a.x), p.h,
                                                   address(a.h0), p.y, address(a.y), p.weight_bytes, grads.get(),
                                                   p.work_bytes, work.get(), p.reserve_bytes, address(a.reserve)));
  copy_weights(s, p, a.dweights, grads.as<char>(), false);
}

// The shared backend sends the recurrent layers here only if this holds.
static_assert(device_common::DnnRnnRuntime<Runtime>, "cuda::Runtime must supply the recurrent layers' hooks");

}  // namespace anvil::cuda
