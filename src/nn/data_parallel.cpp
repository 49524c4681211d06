// nn::DataParallel: one replica per device, one host thread per device.
#include <algorithm>
#include <exception>
#include <map>
#include <sstream>
#include <thread>

#include "anvil/nn/parallel.h"
#include "anvil/ops.h"
#include "core/thread_state.h"

namespace anvil::nn {

namespace {

constexpr const char* kOp = "DataParallel";

// Parameters, then buffers: what a replica copies from the master.
std::vector<Tensor> state_tensors(const Module& m) {
  std::vector<Tensor> out = m.parameters();
  for (const Tensor& b : m.buffers()) out.push_back(b);
  return out;
}

// Chunk sizes along dim 0 as torch.chunk makes them: ceil(B/n) each, the last
// smaller, fewer chunks when B is small.
std::vector<std::int64_t> chunk_sizes(std::int64_t batch, std::size_t devices) {
  const auto n = static_cast<std::int64_t>(devices);
  const std::int64_t per = (batch + n - 1) / n;
  std::vector<std::int64_t> sizes;
  for (std::int64_t start = 0; start < batch; start += per) sizes.push_back(std::min(per, batch - start));
  return sizes;
}

// Runs fn(i) for i in [0, n) in one host thread each (inline for one) and
// rethrows the first error in index order once all have finished. Each
// thread runs with the caller's grad mode, autocast, SyncGuard mode and
// default device (Note [Thread-local state]).
template <typename Fn>
void run_parallel(std::size_t n, Fn fn) {
  if (n == 1) {
    fn(std::size_t{0});
    return;
  }
  const anvil::detail::ThreadLocalState caller;
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        const anvil::detail::ThreadLocalStateGuard as_caller(caller);
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Sets this thread's grad mode for a scope (run_parallel runs one chunk on
// the calling thread, whose mode must survive the step).
class GradModeScope {
 public:
  explicit GradModeScope(bool on) noexcept : previous_(is_grad_enabled()) { set_grad_enabled(on); }
  ~GradModeScope() { set_grad_enabled(previous_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

}  // namespace

DataParallel::DataParallel(ModuleFactory factory, std::vector<Device> devices) : devices_(std::move(devices)) {
  ANVIL_CHECK(static_cast<bool>(factory), ValueError, kOp, ": expected a module factory, got an empty function");
  ANVIL_CHECK(!devices_.empty(), ValueError, kOp, ": expected at least one device, got none");
  for (std::size_t i = 0; i < devices_.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      ANVIL_CHECK(devices_[i] != devices_[j], ValueError, kOp, ": each device may appear once; got ", devices_[i],
                  " at positions ", j, " and ", i);
  for (Device d : devices_) {
    std::shared_ptr<Module> m = factory();
    ANVIL_CHECK(m != nullptr, ValueError, kOp, ": the factory returned a null module; expected a module");
    ANVIL_CHECK(replicas_.empty() || m.get() != replicas_.front().get(), ValueError, kOp,
                ": the factory returned the same module twice; expected a new module per call");
    m->to(d);
    if (!replicas_.empty()) {
      const auto want = replicas_.front()->named_parameters();
      const auto got = m->named_parameters();
      ANVIL_CHECK(want.size() == got.size(), ValueError, kOp, ": the factory's modules differ; expected ", want.size(),
                  " parameters, got ", got.size());
      for (std::size_t k = 0; k < want.size(); ++k)
        ANVIL_CHECK(want[k].first == got[k].first && want[k].second.shape() == got[k].second.shape(), ValueError, kOp,
                    ": the factory's modules differ at parameter ", k, "; expected '", want[k].first, "' ",
                    want[k].second.shape(), ", got '", got[k].first, "' ", got[k].second.shape());
    }
    replicas_.push_back(std::move(m));
  }
  // The master is the child, so parameters(), state_dict(), train() and
  // eval() are the master's ("module.<name>", as in PyTorch).
  register_module("module", replicas_.front());
  sync_replicas();
}

Module& DataParallel::replica(std::size_t i) const {
  ANVIL_CHECK(i < replicas_.size(), IndexError, kOp, ": replica index out of range; expected [0, ", replicas_.size(),
              "), got ", i);
  return *replicas_[i];
}

std::string DataParallel::name() const {
  std::ostringstream os;
  os << "DataParallel(devices=[";
  for (std::size_t i = 0; i < devices_.size(); ++i) os << (i ? ", " : "") << devices_[i];
  os << "])";
  return os.str();
}

void DataParallel::sync_replicas() {
  NoGradGuard no_grad;
  const Module& master = *replicas_.front();
  const std::vector<Tensor> src = state_tensors(master);
  // One flat buffer per dtype, so each replica receives one copy per dtype
  // rather than one per tensor.
  std::map<DType, std::vector<std::size_t>> by_dtype;
  for (std::size_t k = 0; k < src.size(); ++k) by_dtype[src[k].dtype()].push_back(k);
  std::map<DType, Tensor> flat;
  for (const auto& [dt, idx] : by_dtype) {
    std::vector<Tensor> parts;
    for (std::size_t k : idx) parts.push_back(src[k].reshape({-1}));
    flat[dt] = parts.size() == 1 ? parts[0] : cat(parts, 0);
  }
  for (std::size_t r = 1; r < replicas_.size(); ++r) {
    Module& m = *replicas_[r];
    m.train(master.is_training());
    const std::vector<Tensor> dst = state_tensors(m);
    for (const auto& [dt, idx] : by_dtype) {
      const Tensor here = flat[dt].to(devices_[r]);
      std::int64_t offset = 0;
      for (std::size_t k : idx) {
        Tensor d = dst[k];
        const std::int64_t n = d.numel();
        d.copy_(here.narrow(0, offset, n).reshape(d.shape()));
        offset += n;
      }
    }
  }
}

DataParallel::StepResult DataParallel::train_step(const Tensor& x, const Tensor& y, const LossFunction& loss) {
  ANVIL_CHECK(x.defined() && y.defined(), ValueError, kOp, ": train_step: expected defined inputs and targets");
  ANVIL_CHECK(static_cast<bool>(loss), ValueError, kOp, ": train_step: expected a loss function, got an empty one");
  ANVIL_CHECK(x.dim() >= 1 && y.dim() >= 1 && x.size(0) == y.size(0), ShapeError, kOp,
              ": train_step: inputs and targets must have the same first (batch) dim; got ", x.shape(), " and ",
              y.shape());
  const std::int64_t batch = x.size(0);
  ANVIL_CHECK(batch > 0, ShapeError, kOp, ": train_step: expected a non-empty batch, got ", x.shape());
  sync_replicas();
  const std::vector<std::int64_t> sizes = chunk_sizes(batch, devices_.size());
  const std::size_t n = sizes.size();
  std::vector<std::int64_t> starts(n, 0);
  for (std::size_t i = 1; i < n; ++i) starts[i] = starts[i - 1] + sizes[i - 1];
  const std::vector<Tensor> master_params = replicas_.front()->parameters();
  // A replica other than the master starts from no gradient, so what it
  // produces is this step's alone; the master accumulates like backward().
  for (std::size_t r = 1; r < replicas_.size(); ++r) replicas_[r]->zero_grad();

  std::vector<Tensor> losses(n), outputs(n), flat_grads(n);
  run_parallel(n, [&](std::size_t i) {
    const Device d = devices_[i];
    Module& m = *replicas_[i];
    Tensor xi = x.narrow(0, starts[i], sizes[i]).to(d);
    Tensor yi = y.narrow(0, starts[i], sizes[i]).to(d);
    GradModeScope grad_on(true);  // a training step records whatever the caller's mode
    Tensor out = m(xi);
    // The chunk's mean loss weighted by its share: the weighted sum over
    // chunks is the whole batch's mean, and so are the summed gradients.
    Tensor li = loss(out, yi) * (static_cast<double>(sizes[i]) / static_cast<double>(batch));
    li.backward();
    NoGradGuard no_grad;
    std::vector<Tensor> parts;
    for (const Tensor& p : m.parameters()) {
      const Tensor g = p.grad();
      parts.push_back(g.defined() ? g.reshape({-1}) : zeros({p.numel()}, d, p.dtype()));
    }
    // One copy per replica to the master's device, queued from this thread.
    Tensor flat = parts.size() == 1 ? parts[0].contiguous() : cat(parts, 0);
    flat_grads[i] = flat.to(devices_[0]);
    losses[i] = li.detach().to(devices_[0]);
    outputs[i] = out.detach().to(devices_[0]);
  });

  NoGradGuard no_grad;
  Tensor total = flat_grads[0];
  for (std::size_t i = 1; i < n; ++i) total = total + flat_grads[i];
  if (n > 1) {
    std::int64_t offset = 0;
    for (const Tensor& p : master_params) {
      const std::int64_t k = p.numel();
      p.set_grad(total.narrow(0, offset, k).reshape(p.shape()));
      offset += k;
    }
  }
  Tensor total_loss = losses[0];
  for (std::size_t i = 1; i < n; ++i) total_loss = total_loss + losses[i];
  return StepResult{total_loss, n == 1 ? outputs[0] : cat(outputs, 0)};
}

Tensor DataParallel::forward(const Tensor& x) {
  ANVIL_CHECK(x.defined() && x.dim() >= 1 && x.size(0) > 0, ShapeError, kOp,
              ": forward: expected a non-empty batch along dim 0, got ", x.defined() ? x.shape() : Shape{});
  sync_replicas();
  const std::vector<std::int64_t> sizes = chunk_sizes(x.size(0), devices_.size());
  const std::size_t n = sizes.size();
  std::vector<Tensor> outputs(n);
  std::int64_t start = 0;
  std::vector<std::int64_t> starts;
  for (std::int64_t s : sizes) {
    starts.push_back(start);
    start += s;
  }
  run_parallel(n, [&](std::size_t i) {
    NoGradGuard no_grad;
    outputs[i] = (*replicas_[i])(x.narrow(0, starts[i], sizes[i]).to(devices_[i])).to(devices_[0]);
  });
  return n == 1 ? outputs[0] : cat(outputs, 0);
}

}  // namespace anvil::nn
