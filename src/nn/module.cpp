// Module: parameters, buffers, children, device moves, state dicts.
#include <algorithm>
#include <ostream>
#include <set>
#include <sstream>

#include "anvil/autograd.h"
#include "anvil/io.h"
#include "anvil/nn.h"

namespace anvil::nn {

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& p : params_) out.push_back(p);
  if (recurse)
    for (const auto& [n, c] : children_)
      for (auto& [cn, t] : c->named_parameters(true)) out.emplace_back(n + "." + cn, t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& p : buffers_) out.push_back(p);
  if (recurse)
    for (const auto& [n, c] : children_)
      for (auto& [cn, t] : c->named_buffers(true)) out.emplace_back(n + "." + cn, t);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

Tensor Module::param(const std::string& pname) const {
  for (const auto& [n, t] : params_)
    if (n == pname) return t;
  throw ValueError(detail::cat("Module: ", name(), " has no parameter '", pname,
                               "'; expected one of its own parameters, got '", pname, "'"));
}

Module& Module::to(Device d) {
  NoGradGuard no_grad;
  auto move = [d](const Tensor& t) {
    if (t.device() == d) return;
    const Tensor g = t.grad();
    t.set_data(t.to(d));
    if (g.defined()) t.set_grad(g.to(d));
  };
  for (const Tensor& t : parameters()) move(t);
  for (const Tensor& t : buffers()) move(t);
  return *this;
}

Module& Module::to(MemoryFormat format) {
  ANVIL_CHECK(format != MemoryFormat::Preserve, ValueError,
              "Module::to: expected MemoryFormat::Contiguous or ChannelsLast, got Preserve");
  NoGradGuard no_grad;
  auto relayout = [format](const Tensor& t) {
    if (t.dim() != 4 || t.is_contiguous(format)) return;
    const Tensor g = t.grad();
    t.set_data(t.contiguous(format));
    if (g.defined()) t.set_grad(g.contiguous(format));
  };
  for (const Tensor& t : parameters()) relayout(t);
  for (const Tensor& t : buffers()) relayout(t);
  return *this;
}

std::vector<Device> Module::devices() const {
  std::vector<Device> out;
  auto add = [&](const Tensor& t) {
    if (std::find(out.begin(), out.end(), t.device()) == out.end()) out.push_back(t.device());
  };
  for (const Tensor& t : parameters()) add(t);
  for (const Tensor& t : buffers()) add(t);
  return out;
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [n, t] : named_parameters()) out[n] = t.detach();
  for (auto& [n, t] : named_buffers()) out[n] = t.detach();
  return out;
}

namespace {
void check_entry(const char* op, const std::string& key, const Tensor& mine, const Tensor& theirs) {
  ANVIL_CHECK(theirs.defined(), ValueError, op, ": '", key, "' is an undefined tensor; expected a tensor of shape ",
              mine.shape());
  ANVIL_CHECK(theirs.shape() == mine.shape(), ShapeError, op, ": '", key, "' has the wrong shape; expected ",
              mine.shape(), ", got ", theirs.shape());
  ANVIL_CHECK(theirs.dtype() == mine.dtype(), DTypeError, op, ": '", key, "' has the wrong dtype; expected ",
              mine.dtype(), ", got ", theirs.dtype());
}

// Every parameter and buffer by name, with strict key checks against `state`.
std::vector<std::pair<std::string, Tensor>> matched(const char* op, const Module& m, const StateDict& state,
                                                    bool strict) {
  std::vector<std::pair<std::string, Tensor>> mine = m.named_parameters();
  for (auto& b : m.named_buffers()) mine.push_back(b);
  std::set<std::string> known;
  for (const auto& [n, t] : mine) {
    known.insert(n);
    ANVIL_CHECK(!strict || state.count(n), ValueError, op, ": missing key '", n, "'; expected every parameter and ",
                "buffer of the module, got none for '", n, "'; pass strict = false to skip it");
  }
  if (strict)
    for (const auto& [n, t] : state)
      ANVIL_CHECK(known.count(n), ValueError, op, ": unexpected key '", n,
                  "'; expected only the module's parameters and buffers, got '", n,
                  "'; pass strict = false to ignore it");
  for (const auto& [n, t] : mine)
    if (auto it = state.find(n); it != state.end()) check_entry(op, n, t, it->second);
  return mine;
}
}  // namespace

void Module::load_state_dict(const StateDict& state, bool strict) {
  const auto mine = matched("load_state_dict", *this, state, strict);
  NoGradGuard no_grad;
  for (const auto& [n, t] : mine)
    if (auto it = state.find(n); it != state.end()) {
      Tensor dst = t;
      dst.copy_(it->second.to(t.device()));
    }
}

void Module::save(const std::string& path) const {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [n, t] : state_dict()) tensors.emplace_back(n, t);
  save_safetensors(path, tensors);
}

void Module::load(const std::string& path, Device device) {
  const StateDict state = load_safetensors(path, device);
  const auto mine = matched("load", *this, state, true);
  NoGradGuard no_grad;
  for (const auto& [n, t] : mine) {
    t.set_data(state.at(n));
    t.set_grad({});
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (const Tensor& t : parameters()) t.set_grad({});
}

Tensor Module::register_parameter(const std::string& pname, Tensor t) {
  ANVIL_CHECK(t.defined(), ValueError, "register_parameter: '", pname, "' is undefined; expected a tensor");
  t.requires_grad_();
  params_.emplace_back(pname, t);
  return t;
}

Tensor Module::register_buffer(const std::string& bname, Tensor t) {
  buffers_.emplace_back(bname, t);
  return t;
}

Tensor& Module::buffer_ref(const std::string& bname) {
  for (auto& [n, t] : buffers_)
    if (n == bname) return t;
  throw ValueError(detail::cat("Module: ", name(), " has no buffer '", bname, "'"));
}

void Module::add_child(const std::string& cname, std::shared_ptr<Module> m) {
  ANVIL_CHECK(m != nullptr, ValueError, "register_module: '", cname, "' is null; expected a module");
  // Names become state_dict keys ("conv1.weight"): an empty name or a '.'
  // would make keys that cannot be told apart or split back.
  ANVIL_CHECK(!cname.empty() && cname.find('.') == std::string::npos, ValueError, "register_module: bad child name '",
              cname, "' in ", name(), "; expected a non-empty name without '.', got '", cname, "'");
  for (const auto& [n, c] : children_)
    ANVIL_CHECK(n != cname, ValueError, "register_module: ", name(), " already has a child '", cname,
                "'; expected a new name, got '", cname, "' again");
  children_.emplace_back(cname, std::move(m));
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
  return *this;
}

namespace {
void print(std::ostream& os, const Module& m, int indent) {
  const auto children = m.named_children();
  if (children.empty()) {
    os << m.name();
    return;
  }
  os << m.name() << "(\n";
  for (const auto& [n, c] : children) {
    os << std::string(indent + 2, ' ') << "(" << n << "): ";
    print(os, *c, indent + 2);
    os << "\n";
  }
  os << std::string(indent, ' ') << ")";
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Module& m) {
  print(os, m, 0);
  return os;
}

}  // namespace anvil::nn
