// Autocast state (thread-local, per device type) and the cast policy.
#include "ops/autocast.h"

#include "anvil/autocast.h"
#include "anvil/error.h"
#include "ops/op_common.h"

namespace anvil {

namespace {

constexpr int kTypes = 3;  // DeviceType: CPU, CUDA, OpenCL

struct AutocastState {
  bool enabled[kTypes] = {false, false, false};
  // PyTorch's defaults: bf16 on the CPU, f16 on GPUs.
  DType dtype[kTypes] = {DType::BF16, DType::F16, DType::F16};
  int active = 0;          // how many types are enabled: the fast path of every listed op
  bool suspended = false;  // inside a backward pass
};
thread_local AutocastState t_autocast;

int slot(DeviceType type) { return static_cast<int>(type); }

void set_enabled(DeviceType type, bool on) {
  bool& e = t_autocast.enabled[slot(type)];
  t_autocast.active += static_cast<int>(on) - static_cast<int>(e);
  e = on;
}

}  // namespace

namespace amp {

AutocastGuard::AutocastGuard(DeviceType type, DType dtype, bool enabled) : type_(type) {
  ANVIL_CHECK(is_floating(dtype), ValueError,
              "AutocastGuard: the autocast dtype must be floating; expected f16, bf16 or f32, got ", dtype);
  ANVIL_CHECK(dtype != DType::F64, ValueError,
              "AutocastGuard: autocast lowers precision; expected f16, bf16 or f32, got f64");
  prev_enabled_ = t_autocast.enabled[slot(type)];
  prev_dtype_ = t_autocast.dtype[slot(type)];
  set_enabled(type, enabled);
  t_autocast.dtype[slot(type)] = dtype;
}

AutocastGuard::~AutocastGuard() {
  set_enabled(type_, prev_enabled_);
  t_autocast.dtype[slot(type_)] = prev_dtype_;
}

bool is_autocast_enabled(DeviceType type) noexcept { return t_autocast.enabled[slot(type)]; }
DType autocast_dtype(DeviceType type) noexcept { return t_autocast.dtype[slot(type)]; }

}  // namespace amp

namespace detail {

AutocastSuspend::AutocastSuspend() noexcept : prev_(t_autocast.suspended) { t_autocast.suspended = true; }
AutocastSuspend::~AutocastSuspend() { t_autocast.suspended = prev_; }

std::optional<std::vector<Tensor>> autocast_inputs(AutocastList list, std::initializer_list<const Tensor*> inputs) {
  if (t_autocast.active == 0 || t_autocast.suspended) return std::nullopt;
  const Tensor* first = nullptr;
  for (const Tensor* t : inputs)
    if (t->defined()) {
      first = t;
      break;
    }
  if (first == nullptr) return std::nullopt;
  const int s = slot(first->device().type());
  if (!t_autocast.enabled[s]) return std::nullopt;
  const DType target = list == AutocastList::LowerPrecision ? t_autocast.dtype[s] : DType::F32;
  // PyTorch casts only f32 and the 16-bit floats: f64 is asked for on purpose.
  auto eligible = [](DType t) { return t == DType::F32 || is_half(t); };
  bool changed = false;
  for (const Tensor* t : inputs) changed = changed || (t->defined() && eligible(t->dtype()) && t->dtype() != target);
  if (!changed) return std::nullopt;
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor* t : inputs)
    out.push_back(t->defined() && eligible(t->dtype()) && t->dtype() != target ? t->to(target) : *t);
  return out;
}

}  // namespace detail

}  // namespace anvil
