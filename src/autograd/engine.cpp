// The backward engine: grad mode, recording, the graph walk, Tensor's
// autograd members. Gradient rules live in rules_*.cpp.
#include <algorithm>
#include <atomic>
#include <limits>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

#include "anvil/autograd.h"
#include "autograd/graph.h"
#include "core/observer.h"
#include "ops/autocast.h"
#include "ops/op_common.h"

namespace anvil {

namespace {
thread_local bool g_grad_enabled = true;
}  // namespace

bool is_grad_enabled() noexcept { return g_grad_enabled; }
void set_grad_enabled(bool enabled) noexcept { g_grad_enabled = enabled; }
NoGradGuard::NoGradGuard() noexcept : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

namespace detail {

bool grad_mode_enabled() noexcept { return g_grad_enabled; }

std::uint64_t next_sequence_nr() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

BackwardFn Node::take_fn(bool retain_graph) {
  std::lock_guard lock(mutex);
  ANVIL_CHECK(fn != nullptr, ValueError, "backward: ", name,
              " was already used by a backward pass and its saved tensors were freed; expected a live graph, got a "
              "freed one; pass retain_graph = true to the first backward()");
  if (retain_graph) return fn;
  return std::exchange(fn, nullptr);
}

void Node::release() noexcept {
  BackwardFn dead;  // destroyed (its saved tensors freed) outside the lock
  std::lock_guard lock(mutex);
  dead = std::exchange(fn, nullptr);
}

std::vector<Tensor> Node::apply(const Tensor& grad, bool retain_graph) {
  const BackwardFn rule = take_fn(retain_graph);
  std::vector<bool> needs(next.size());
  for (std::size_t i = 0; i < next.size(); ++i) needs[i] = next[i] != nullptr;
  return rule(grad, needs);
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad, bool /*retain_graph*/) {
  AutogradMeta& meta = *leaf->autograd;
  {
    // See Note [Concurrent backward]: another pass may be adding into this leaf.
    std::lock_guard lock(meta.mutex);
    if (!meta.grad.defined()) {
      // Steal the gradient when nothing else holds it (PyTorch does the same);
      // otherwise copy so that later in-place accumulation touches no one else.
      // Either way it is laid out as the leaf is (a channels-last weight's
      // gradient channels-last), which the multi-tensor optimiser step needs.
      const Tensor param(leaf);
      const MemoryFormat format = param.suggest_memory_format();
      const bool sole = grad.impl().use_count() == 1 && grad.impl()->storage().use_count() == 1 &&
                        grad.is_contiguous(format) && grad.offset() == 0;
      meta.grad = sole ? grad.detach() : clone(grad, format);
    } else {
      meta.grad = meta.grad + grad;
    }
  }
  if (meta.post_accumulate_hooks) {
    // Copy under the lock and call outside it, so a hook may register or
    // remove hooks (or the list be changed from another thread) meanwhile.
    std::vector<std::function<void(const Tensor&)>> hooks;
    {
      std::lock_guard lock(meta.post_accumulate_hooks->mutex);
      for (const auto& [id, h] : meta.post_accumulate_hooks->hooks) hooks.push_back(h);
    }
    const Tensor t(leaf);
    for (const auto& h : hooks) h(t);
  }
  return {};
}

namespace {

AutogradMeta& meta_of(const Tensor& t) {
  TensorImpl& impl = t.impl_ref();
  if (!impl.autograd) impl.autograd = std::make_shared<AutogradMeta>();
  return *impl.autograd;
}

std::shared_ptr<Node> edge_to(const Tensor& t) {
  if (!requires_grad(t)) return nullptr;
  AutogradMeta& m = *t.impl()->autograd;
  if (m.grad_fn) return m.grad_fn;
  // Two threads' graphs reaching one leaf must share one AccumulateGrad.
  std::lock_guard lock(m.mutex);
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    auto a = std::make_shared<AccumulateGrad>();
    a->name = "AccumulateGrad";
    a->sequence_nr = std::numeric_limits<std::uint64_t>::max();
    a->leaf = t.impl();
    acc = a;
    m.grad_accumulator = acc;
  }
  return acc;
}

// Sums `g` down to `shape` (the inverse of broadcasting `shape` to g's).
Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int gd = g.dim(), sd = shape.size();
  Shape dims;
  for (int i = 0; i < gd; ++i) {
    const int si = i - (gd - sd);
    if (si < 0 || (shape[si] == 1 && g.shape()[i] != 1)) dims.push_back(i);
  }
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  return r.reshape(shape);
}

}  // namespace

void record(const char* name, const Tensor& out, const std::vector<const Tensor*>& inputs, BackwardFn fn) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->sequence_nr = next_sequence_nr();
  node->fn = std::move(fn);
  node->next.reserve(inputs.size());
  node->inputs.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined()) {
      node->next.push_back(nullptr);
      node->inputs.push_back({});
      continue;
    }
    node->next.push_back(edge_to(*t));
    node->inputs.push_back({t->shape(), t->dtype(), t->device()});
  }
  AutogradMeta& m = meta_of(out);
  m.requires_grad = true;
  m.grad_fn = std::move(node);
}

void record_view(const char* name, const Tensor& out, const Tensor& x, BackwardFn fn,
                 std::function<Tensor(const Tensor&)> place) {
  record(name, out, {&x}, std::move(fn));
  meta_of(out).grad_fn->place = std::move(place);
}

Tensor saved(const Tensor& t) {
  if (!t.defined()) return t;
  return make_view(t, t.shape(), t.strides(), t.offset());
}

void check_inplace(const char* op, const Tensor& self, const Tensor* other, const char* suffix) {
  // Elements sharing memory (expand()'s stride 0) would each be written, in
  // an order that depends on the device's threads: PyTorch's rule, an error.
  if (self.defined())
    for (int d = 0; d < self.dim(); ++d)
      ANVIL_CHECK(self.strides()[d] != 0 || self.size(d) <= 1, ValueError, op, suffix,
                  ": more than one element of the written-to tensor refers to the same memory; expected a tensor "
                  "whose elements are distinct, got shape ",
                  self.shape(), " with strides ", self.strides(), " (as expand() makes); write into a clone() of it");
  if (!grad_mode_enabled()) return;
  ANVIL_CHECK(!requires_grad(self) && !(other && requires_grad(*other)), ValueError, op, suffix,
              ": in-place op on a tensor that requires grad would not be recorded; expected tensors without grad, got ",
              requires_grad(self) ? "the in-place tensor" : "an argument",
              " requiring grad; run it under "
              "anvil::NoGradGuard or use the out-of-place op");
}

namespace {

// Callbacks queued by autograd::queue_callback during the backward pass
// running on this thread; null outside backward.
thread_local std::vector<std::function<void()>>* t_final_callbacks = nullptr;

// A pass of autograd::grad: the gradients reaching these inputs' nodes are
// returned instead of accumulated; only nodes that lead to one of them run.
struct Capture {
  std::unordered_map<Node*, std::vector<std::size_t>> slots;  // node -> indices of the inputs it stands for
  std::vector<Tensor> grads;                                  // one per input
  std::vector<std::shared_ptr<Node>> hold;                    // the inputs' nodes, alive for the pass
};

void run_graph(const char* op, const std::vector<Tensor>& roots, const std::vector<Tensor>& gradients,
               bool retain_graph, Capture* capture);

void run_backward(const char* op, const std::vector<Tensor>& roots, const std::vector<Tensor>& gradients,
                  bool retain_graph, Capture* capture) {
  const detail::OpSpan span(detail::SpanKind::Backward, op, nullptr, {&roots.front()});
  // Gradient rules compute in their forward op's dtypes, not autocast's.
  AutocastSuspend no_autocast;
  std::vector<std::function<void()>> callbacks;
  auto* const outer = t_final_callbacks;
  t_final_callbacks = &callbacks;
  try {
    run_graph(op, roots, gradients, retain_graph, capture);
  } catch (...) {
    t_final_callbacks = outer;
    throw;
  }
  // A callback may queue another (it runs too); none may outlive this pass.
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    try {
      auto fn = std::move(callbacks[i]);
      fn();
    } catch (...) {
      t_final_callbacks = outer;
      throw;
    }
  }
  t_final_callbacks = outer;
}

// The nodes reachable from `starts` from which one of capture's nodes can be
// reached (those nodes included): the only ones autograd::grad runs. Every
// parent of such a node is one too, so skipping the others leaves no
// dependency count of a kept node short.
std::unordered_map<Node*, bool> leads_to_inputs(const std::vector<Node*>& starts, const Capture& capture) {
  std::unordered_map<Node*, bool> leads;             // present: visited; value final once its children are done
  std::vector<std::pair<Node*, std::size_t>> stack;  // node, next child to visit
  for (Node* s : starts) {
    if (leads.contains(s)) continue;
    leads[s] = capture.slots.contains(s);
    stack.emplace_back(s, 0);
    while (!stack.empty()) {
      auto& [n, child] = stack.back();
      if (child == n->next.size()) {
        Node* const done = n;
        stack.pop_back();
        if (!stack.empty() && leads[done]) leads[stack.back().first] = true;
        continue;
      }
      Node* nx = n->next[child++].get();
      if (!nx) continue;
      if (auto it = leads.find(nx); it != leads.end()) {
        if (it->second) leads[n] = true;
        continue;
      }
      leads[nx] = capture.slots.contains(nx);
      stack.emplace_back(nx, 0);
    }
  }
  return leads;
}

void run_graph(const char* op, const std::vector<Tensor>& roots, const std::vector<Tensor>& gradients,
               bool retain_graph, Capture* capture) {
  ANVIL_CHECK(!roots.empty(), ValueError, op, ": expected at least one output, got none");
  ANVIL_CHECK(gradients.empty() || gradients.size() == roots.size(), ValueError, op,
              ": expected one gradient per output; expected ", roots.size(), ", got ", gradients.size());
  std::vector<Node*> starts;
  std::vector<std::shared_ptr<Node>> hold;  // the root nodes, alive for the pass
  std::unordered_map<Node*, Tensor> grads;
  for (std::size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    check_defined(op, root, static_cast<int>(i));
    ANVIL_CHECK(requires_grad(root), ValueError, op,
                ": the tensor does not require grad and has no grad_fn; expected the result of ops on tensors "
                "with requires_grad_(), got a tensor outside any graph");
    Tensor g = gradients.empty() ? Tensor() : gradients[i];
    if (!g.defined()) {
      ANVIL_CHECK(root.numel() == 1, ShapeError, op,
                  ": a gradient can be implied only for one-element outputs; expected 1 element, got shape ",
                  root.shape(), "; pass the gradient: backward(ones_like(y))");
      g = ones_like(root);
    } else {
      ANVIL_CHECK(g.shape() == root.shape(), ShapeError, op, ": gradient has the wrong shape; expected ", root.shape(),
                  ", got ", g.shape());
      check_same_device(op, {&root, &g});
    }
    NoGradGuard no_grad;
    std::shared_ptr<Node> node = edge_to(root);
    Tensor& acc = grads[node.get()];
    acc = acc.defined() ? acc + cast(g, root.dtype()) : cast(g, root.dtype());
    if (std::find(starts.begin(), starts.end(), node.get()) == starts.end()) starts.push_back(node.get());
    hold.push_back(std::move(node));
  }
  NoGradGuard no_grad;
  // Dependencies: how many edges point at each node from nodes reachable from the roots.
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  for (Node* s : starts)
    if (deps.try_emplace(s, 0).second) stack.push_back(s);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& nx : n->next) {
      if (!nx) continue;
      auto [it, inserted] = deps.try_emplace(nx.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(nx.get());
    }
  }
  std::unordered_map<Node*, bool> leads;
  if (capture) leads = leads_to_inputs(starts, *capture);
  // Whether node n runs: always in backward; in autograd::grad when one of
  // its children leads to an input.
  auto runs = [&](const Node* n) {
    if (!capture) return true;
    for (const auto& nx : n->next)
      if (nx && leads[nx.get()]) return true;
    return false;
  };
  // Note [Backward order]
  // Ready nodes run latest-created first (PyTorch's order), and a leaf's
  // AccumulateGrad as soon as it is ready: the gradients of the last layers
  // are final early, which is what lets DDP start their allreduce while the
  // rest of backward runs. (A plain stack would walk one input's whole
  // subgraph before finishing the node's other inputs, so the last layer's
  // bias came last of all.)
  auto later = [](const Node* a, const Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  for (Node* s : starts)
    if (deps[s] == 0) ready.push(s);
  // Note [Gradients of views]
  // A view node's rule would return a zero tensor of its input's shape with
  // the gradient in the view's place. When many views of one tensor get
  // gradients (x[t] for every step of a recurrent layer, the chunks of its
  // gates), that is a fill and an add of the whole input per view:
  // quadratic in the number of steps. Instead the engine keeps one buffer
  // per input and adds each view's gradient into its place, copying the
  // buffer first only when someone else holds it.
  // Whether the engine holds the only reference to a gradient's memory, so
  // it may add into it.
  auto sole = [](const Tensor& acc) { return acc.impl().use_count() == 1 && acc.impl()->storage().use_count() == 1; };
  auto add_into_place = [&](const Node& n, const Tensor& g, Tensor& acc) {
    const InputInfo& info = n.inputs[0];
    const Tensor gi = g.dtype() == info.dtype ? g : cast(g, info.dtype);
    if (!acc.defined()) {
      acc = zeros(info.shape, info.device, info.dtype);
      n.place(acc).copy_(gi);
      return;
    }
    if (!sole(acc)) acc = clone(acc);
    n.place(acc).add_(gi);
  };
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    Tensor gn = std::move(grads[n]);
    grads.erase(n);
    if (capture) {
      if (auto it = capture->slots.find(n); it != capture->slots.end())
        for (std::size_t k : it->second) capture->grads[k] = gn;
      if (!runs(n)) continue;  // its rule stays for a later pass
    }
    if (n->place) {
      (void)n->take_fn(retain_graph);  // checks the graph is live; frees it unless retained
      if (gn.defined() && n->next[0]) add_into_place(*n, gn, grads[n->next[0].get()]);
      if (Node* nx = n->next[0].get(); nx && --deps[nx] == 0) ready.push(nx);
      continue;
    }
    std::vector<Tensor> outs;
    if (gn.defined()) {
      const Device gd = gn.device();
      const detail::OpSpan span(detail::SpanKind::Backward, n->name.c_str(), &gd, {&gn});
      outs = n->apply(gn, retain_graph);
    } else if (!retain_graph) {
      n->release();
    }
    for (std::size_t i = 0; i < n->next.size(); ++i) {
      Node* nx = n->next[i].get();
      if (!nx) continue;
      if (i < outs.size() && outs[i].defined()) {
        const InputInfo& info = n->inputs[i];
        Tensor gi = sum_to(outs[i], info.shape);
        if (gi.dtype() != info.dtype) gi = cast(gi, info.dtype);
        ANVIL_ASSERT(gi.device() == info.device, "backward: ", n->name, " produced a gradient on ", gi.device(),
                     " for an input on ", info.device);
        // A tensor used many times (a recurrent layer's weight, once per
        // step) sums its gradients in one buffer, not a new one per use.
        Tensor& acc = grads[nx];
        if (!acc.defined())
          acc = std::move(gi);
        else if (sole(acc) && is_dense_non_overlapping(acc))  // never an expanded view (stride 0)
          acc.add_(gi);
        else
          acc = acc + gi;
      }
      if (--deps[nx] == 0) ready.push(nx);
    }
  }
}

}  // namespace
}  // namespace detail

namespace autograd {

void HookHandle::remove() {
  auto list = std::static_pointer_cast<detail::GradHookList>(list_.lock());
  if (!list) return;
  std::lock_guard lock(list->mutex);
  std::erase_if(list->hooks, [this](const auto& entry) { return entry.first == id_; });
  list_.reset();
}

bool HookHandle::active() const noexcept {
  auto list = std::static_pointer_cast<detail::GradHookList>(list_.lock());
  if (!list) return false;
  std::lock_guard lock(list->mutex);
  return std::any_of(list->hooks.begin(), list->hooks.end(), [this](const auto& e) { return e.first == id_; });
}

HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  constexpr const char* op = "register_post_accumulate_grad_hook";
  detail::check_defined(op, leaf);
  ANVIL_CHECK(leaf.is_leaf() && detail::requires_grad(leaf), ValueError, op,
              ": expected a leaf tensor that requires grad, got ",
              leaf.is_leaf() ? "a leaf without requires_grad" : "a non-leaf made by " + leaf.grad_fn_name(),
              "; register on the parameter itself");
  ANVIL_CHECK(static_cast<bool>(hook), ValueError, op, ": expected a callable hook, got an empty function");
  detail::AutogradMeta& m = detail::meta_of(leaf);
  if (!m.post_accumulate_hooks) m.post_accumulate_hooks = std::make_shared<detail::GradHookList>();
  HookHandle h;
  {
    std::lock_guard lock(m.post_accumulate_hooks->mutex);
    h.id_ = m.post_accumulate_hooks->next_id++;
    m.post_accumulate_hooks->hooks.emplace_back(h.id_, std::move(hook));
  }
  h.list_ = m.post_accumulate_hooks;
  return h;
}

void queue_callback(std::function<void()> fn) {
  ANVIL_CHECK(detail::t_final_callbacks != nullptr, ValueError,
              "queue_callback: expected to be called during backward (from a hook), got a call outside any backward "
              "pass on this thread");
  ANVIL_CHECK(static_cast<bool>(fn), ValueError, "queue_callback: expected a callable, got an empty function");
  detail::t_final_callbacks->push_back(std::move(fn));
}

void backward(const Tensor& output, const Tensor& gradient, bool retain_graph) {
  detail::run_backward("backward", {output}, {gradient}, retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused) {
  constexpr const char* op = "autograd.grad";
  ANVIL_CHECK(!inputs.empty(), ValueError, op, ": expected at least one input, got none");
  detail::Capture capture;
  capture.grads.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    detail::check_defined(op, inputs[i], static_cast<int>(i));
    ANVIL_CHECK(detail::requires_grad(inputs[i]), ValueError, op, ": input ", i,
                " does not require grad; expected tensors with requires_grad_() or results of ops on them");
    // For a leaf, its AccumulateGrad: the node the graph's edges point at.
    std::shared_ptr<detail::Node> node = detail::edge_to(inputs[i]);
    capture.slots[node.get()].push_back(i);
    capture.hold.push_back(std::move(node));
  }
  detail::run_backward(op, outputs, grad_outputs, retain_graph, &capture);
  for (std::size_t i = 0; i < inputs.size(); ++i)
    ANVIL_CHECK(capture.grads[i].defined() || allow_unused, ValueError, op, ": input ", i,
                " was not used in the graph; expected every input to reach the outputs; pass allow_unused = true "
                "to get an undefined gradient for it");
  return std::move(capture.grads);
}

Tensor make_differentiable(const std::string& name, const Tensor& output, const std::vector<Tensor>& inputs,
                           BackwardFunction fn) {
  detail::check_defined(name.c_str(), output);
  if (!is_grad_enabled()) return output;
  bool any = false;
  for (const Tensor& t : inputs) any = any || detail::requires_grad(t);
  if (!any) return output;
  auto node = std::make_shared<detail::Node>();
  node->name = name;
  node->sequence_nr = detail::next_sequence_nr();
  node->fn = std::move(fn);
  for (const Tensor& t : inputs) {
    node->next.push_back(detail::edge_to(t));
    node->inputs.push_back(t.defined() ? detail::InputInfo{t.shape(), t.dtype(), t.device()} : detail::InputInfo{});
  }
  Tensor out = detail::saved(output);
  detail::AutogradMeta& m = detail::meta_of(out);
  m.requires_grad = true;
  m.grad_fn = std::move(node);
  return out;
}

}  // namespace autograd

// --- Tensor members ----------------------------------------------------------------
bool Tensor::requires_grad() const { return detail::requires_grad(*this); }

Tensor& Tensor::requires_grad_(bool on) {
  detail::check_defined("requires_grad_", *this);
  if (!on) {
    ANVIL_CHECK(is_leaf(), ValueError,
                "requires_grad_: cannot turn off grad of a non-leaf tensor; expected a leaf, got one made by ",
                grad_fn_name(), "; use detach()");
    if (impl()->autograd) impl()->autograd->requires_grad = false;
    return *this;
  }
  ANVIL_CHECK(is_floating(dtype()), DTypeError,
              "requires_grad_: only floating-point tensors can require gradients; expected f32 or f64, got ", dtype());
  detail::meta_of(*this).requires_grad = true;
  return *this;
}

Tensor Tensor::grad() const {
  detail::check_defined("grad", *this);
  detail::AutogradMeta* m = impl()->autograd.get();
  if (!m) return Tensor();
  std::lock_guard lock(m->mutex);  // a backward pass on another thread may be accumulating
  return m->grad;
}

void Tensor::set_grad(const Tensor& g) const {
  detail::check_defined("set_grad", *this);
  if (g.defined()) {
    ANVIL_CHECK(g.shape() == shape(), ShapeError, "set_grad: gradient has the wrong shape; expected ", shape(),
                ", got ", g.shape());
    ANVIL_CHECK(g.dtype() == dtype(), DTypeError, "set_grad: gradient has the wrong dtype; expected ", dtype(),
                ", got ", g.dtype());
    detail::check_same_device("set_grad", {this, &g});
  }
  if (!impl()->autograd && !g.defined()) return;
  detail::AutogradMeta& m = detail::meta_of(*this);
  std::lock_guard lock(m.mutex);
  m.grad = g;
}

void Tensor::zero_grad() const {
  Tensor g = grad();
  if (g.defined()) {
    NoGradGuard no_grad;
    g.zero_();
  }
}

bool Tensor::is_leaf() const {
  detail::check_defined("is_leaf", *this);
  return !impl()->autograd || !impl()->autograd->grad_fn;
}

std::string Tensor::grad_fn_name() const {
  detail::check_defined("grad_fn", *this);
  return impl()->autograd && impl()->autograd->grad_fn ? impl()->autograd->grad_fn->name : std::string();
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  detail::run_backward("backward", {*this}, {gradient}, retain_graph, nullptr);
}

Tensor Tensor::detach() const {
  detail::check_defined("detach", *this);
  return detail::saved(*this);
}

void Tensor::set_data(const Tensor& src) const {
  detail::check_defined("set_data", *this);
  detail::check_defined("set_data", src, 1);
  impl_ref().set_data(src.impl_ref());
}

}  // namespace anvil
