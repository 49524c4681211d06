// anvil/autograd.h — reverse-mode automatic differentiation (DESIGN §5).
//
//   auto w = anvil::randn({3, 2}).requires_grad_();
//   auto loss = anvil::matmul(x, w).relu().sum();
//   loss.backward();                 // w.grad() now holds d loss / d w, on w's device
//   { anvil::NoGradGuard no_grad;    // updates are not recorded
//     w -= w.grad() * 0.1; }
//
// Define-by-run: every differentiable op records a node when grad mode is on
// and one of its inputs requires grad; `backward()` walks the recorded graph
// once and frees it (unless retain_graph). Gradients of leaves accumulate
// into `.grad()` until cleared (`set_grad({})` or `zero_grad()`).
// Grad mode is per thread. In-place ops on tensors that require grad are
// rejected while grad mode is on (run them under NoGradGuard).
//
// Threads: several threads may run backward() at once, over graphs that
// share leaves (one model trained from many threads) or nodes (with
// retain_graph): each leaf's accumulation into .grad() is atomic, so no
// contribution is lost, though the order of the additions (and so the last
// bits of a float sum) is the threads'. grad() returns a snapshot. Without
// retain_graph, the first pass through a shared node frees it and a second
// one fails with ValueError. Writing one tensor from two threads is the
// caller's race, as in PyTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "anvil/tensor.h"

namespace anvil {

bool is_grad_enabled() noexcept;
void set_grad_enabled(bool enabled) noexcept;

// Disables recording for its scope (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() noexcept;
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

namespace autograd {

// d(sum(outputs[i] * grads[i])) / d(leaves), accumulated into the leaves'
// .grad(). A scalar output may leave its gradient undefined (1 is used).
void backward(const Tensor& output, const Tensor& gradient = {}, bool retain_graph = false);

// torch.autograd.grad: d(sum(outputs[i] * grad_outputs[i])) / d(inputs[j]),
// returned, one per input (its shape, dtype and device), rather than
// accumulated: no .grad() is read or written, no post-accumulate hook runs,
// and only the part of the graph that leads to `inputs` runs (the rest stays
// for a later pass). `grad_outputs` is empty or one per output (undefined
// for a one-element output: 1). Inputs may be leaves or intermediate
// results; each must require grad. An input the outputs do not depend on
// is a ValueError unless allow_unused, which returns an undefined tensor.
//
//   Tensor gx = autograd::grad({y.sum()}, {x})[0];   // x.grad() untouched
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false);

// A callback run during backward() right after a leaf's gradient has been
// accumulated into its .grad() (PyTorch's register_post_accumulate_grad_hook);
// `leaf.grad()` holds the new value. It runs on the thread running backward,
// once per backward pass in which the leaf receives a gradient, in
// registration order. Distributed data parallel starts a bucket's allreduce
// from here, while the rest of backward goes on.
//
//   auto h = autograd::register_post_accumulate_grad_hook(w, [](const Tensor& w) { ... });
//   loss.backward();   // the hook ran once w.grad() was final
//   h.remove();        // or let the handle go: hooks stay until remove()
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;
class HookHandle {
 public:
  HookHandle() = default;
  // Unregisters the hook; a no-op when already removed or when the leaf is gone.
  void remove();
  bool active() const noexcept;

 private:
  friend HookHandle register_post_accumulate_grad_hook(const Tensor&, PostAccumulateGradHook);
  std::weak_ptr<void> list_;
  std::uint64_t id_ = 0;
};
// `leaf` must be a leaf tensor that requires grad (ValueError otherwise).
HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);

// Runs `fn` once the backward pass running on this thread has finished
// (after every gradient was accumulated); from a hook only (ValueError
// outside backward). Callbacks run in the order queued; an exception from one
// propagates out of backward().
void queue_callback(std::function<void()> fn);

// A differentiable op written by hand (torch.autograd.Function): `output`
// was computed from `inputs` with grad mode off; `fn(grad_output, needs)`
// returns one gradient per input (undefined for none). Returns `output`
// recorded under `name` (shown as grad_fn=<name>) when an input requires
// grad, else `output` unchanged.
using BackwardFunction =
    std::function<std::vector<Tensor>(const Tensor& grad_output, const std::vector<bool>& needs_input_grad)>;
Tensor make_differentiable(const std::string& name, const Tensor& output, const std::vector<Tensor>& inputs,
                           BackwardFunction fn);

// Finite-difference gradient check (float64 central differences, like
// torch.autograd.gradcheck). `fn` maps the inputs to one tensor; every input
// that requires grad is checked element by element against
// d(sum(fn(inputs) * r)) / d(input) for a fixed random r. Inputs must be f64.
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};
struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch: input, element, analytic vs numeric
  explicit operator bool() const noexcept { return ok; }
};
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace autograd
}  // namespace anvil
