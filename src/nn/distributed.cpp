// nn::DistributedDataParallel: bucketed gradient allreduce overlapped with
// backward, through the dist::ProcessGroup interface only.
#include <chrono>
#include <sstream>

#include "anvil/dist.h"
#include "anvil/nn/parallel.h"
#include "anvil/ops.h"

namespace anvil::nn {

namespace {

constexpr const char* kOp = "DistributedDataParallel";

// One line per parameter, then per buffer: what must agree across ranks.
std::vector<std::string> signature(const Module& m) {
  std::vector<std::string> lines;
  auto add = [&](const char* kind, const std::string& name, const Tensor& t) {
    std::ostringstream os;
    os << kind << " '" << name << "' " << t.shape() << " " << t.dtype();
    lines.push_back(os.str());
  };
  for (const auto& [n, t] : m.named_parameters()) add("parameter", n, t);
  for (const auto& [n, t] : m.named_buffers()) add("buffer", n, t);
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// FNV-1a: the same value for the same text on every rank and machine.
std::int64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return static_cast<std::int64_t>(h);
}

std::vector<std::int64_t> allgather_i64(dist::ProcessGroup& g, const std::vector<std::int64_t>& mine) {
  const auto n = static_cast<std::int64_t>(mine.size());
  Tensor in = tensor(mine, cpu());
  std::vector<Tensor> out;
  for (int r = 0; r < g.size(); ++r) out.push_back(empty({n}, cpu(), i64));
  g.allgather(out, in).wait();
  std::vector<std::int64_t> all;
  for (const Tensor& t : out)
    for (auto v : t.to_vector<std::int64_t>()) all.push_back(v);
  return all;
}

// Every rank must hold the same parameters and buffers: compare a hash
// first (one small allgather), and only on a mismatch gather the texts to
// name the first difference. Every rank raises the same error.
void check_same_model(dist::ProcessGroup& g, const Module& m) {
  const std::vector<std::string> lines = signature(m);
  const std::string text = joined(lines);
  const std::vector<std::int64_t> hashes = allgather_i64(g, {fnv1a(text)});
  bool same = true;
  for (auto h : hashes) same = same && h == hashes[0];
  if (same) return;
  const std::vector<std::int64_t> lengths = allgather_i64(g, {static_cast<std::int64_t>(text.size())});
  std::int64_t longest = 0;
  for (auto l : lengths) longest = std::max(longest, l);
  std::vector<std::int64_t> bytes(static_cast<std::size_t>(longest), 0);
  for (std::size_t i = 0; i < text.size(); ++i) bytes[i] = static_cast<unsigned char>(text[i]);
  const std::vector<std::int64_t> all = allgather_i64(g, bytes);
  auto text_of = [&](int r) {
    std::string s;
    for (std::int64_t i = 0; i < lengths[static_cast<std::size_t>(r)]; ++i)
      s.push_back(static_cast<char>(all[static_cast<std::size_t>(r * longest + i)]));
    std::vector<std::string> out;
    std::istringstream is(s);
    for (std::string l; std::getline(is, l);) out.push_back(l);
    return out;
  };
  const std::vector<std::string> base = text_of(0);
  for (int r = 1; r < g.size(); ++r) {
    const std::vector<std::string> other = text_of(r);
    for (std::size_t k = 0; k < std::max(base.size(), other.size()); ++k) {
      const std::string a = k < base.size() ? base[k] : "nothing";
      const std::string b = k < other.size() ? other[k] : "nothing";
      if (a == b) continue;
      throw ValueError(detail::cat(kOp, ": the ranks hold different models; at entry ", k, " rank 0 has ", a, ", rank ",
                                   r, " has ", b,
                                   "; expected the same parameter names, shapes and dtypes on every rank"));
    }
  }
  throw ValueError(detail::cat(kOp, ": the ranks' model hashes differ but their descriptions agree; expected the ",
                               "same model on every rank"));
}

}  // namespace

// Note [DDP buckets]
// Gradients become ready roughly in reverse parameter order, so buckets are
// filled from the last parameter backwards (PyTorch's order). A bucket is
// launched when its last gradient arrives *and* every earlier bucket has
// been, so every rank issues the same allreduces in the same order whatever
// order its hooks fire in. At the end of backward the remaining buckets are
// launched, all are waited for, and each gradient becomes a view of its
// bucket's averaged buffer. The average is PyTorch's reducer's: each gradient
// is scaled by 1 / world size as it is copied into its bucket, which is then
// allreduced as a sum: one pass fewer than dividing after (packing the MLP of
// bench_train: 15 against 19 us a step). With a power-of-two world size both
// give the same bits, barring subnormals.
struct DistributedDataParallel::State {
  struct Bucket {
    std::vector<std::size_t> params;
    Tensor inverse_size;  // 1 / world size, in the bucket's dtype on its device
    int pending = 0;
    Tensor flat;
    dist::Work work;
    bool launched = false;
  };
  std::vector<Tensor> params;
  std::vector<Bucket> buckets;
  std::vector<std::size_t> bucket_of;
  std::vector<bool> ready;
  std::size_t next_launch = 0;
  bool in_pass = false;
  bool sync = true;
  double last_wait = 0;
  std::vector<autograd::HookHandle> hooks;

  void reset() {
    for (Bucket& b : buckets) {
      b.pending = static_cast<int>(b.params.size());
      b.flat = Tensor();
      b.work = dist::Work();
      b.launched = false;
    }
    std::fill(ready.begin(), ready.end(), false);
    next_launch = 0;
    in_pass = false;
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, dist::ProcessGroup& group,
                                                 DDPOptions options)
    : module_(std::move(module)), group_(&group), options_(options), state_(std::make_unique<State>()) {
  ANVIL_CHECK(module_ != nullptr, ValueError, kOp, ": expected a module, got a null pointer");
  ANVIL_CHECK(options.bucket_bytes > 0 && options.first_bucket_bytes > 0, ValueError, kOp,
              ": bucket sizes must be positive; got bucket_bytes ", options.bucket_bytes, ", first_bucket_bytes ",
              options.first_bucket_bytes);
  const std::vector<Device> devices = module_->devices();
  ANVIL_CHECK(devices.size() <= 1, ValueError, kOp, ": expected the module on one device (this rank's), got ",
              devices.size(), " devices; move it with .to(dist::device())");
  register_module("module", module_);
  check_same_model(group, *module_);
  {
    // Rank 0's weights everywhere: through detached handles sharing storage.
    NoGradGuard no_grad;
    std::vector<dist::Work> works;
    for (const Tensor& p : module_->parameters()) {
      Tensor t = p.detach();
      works.push_back(group.broadcast(t, 0));
    }
    for (const Tensor& b : module_->buffers()) {
      Tensor t = b.detach();
      works.push_back(group.broadcast(t, 0));
    }
    for (dist::Work& w : works) w.wait();
  }

  State& s = *state_;
  s.params = module_->parameters();
  s.bucket_of.assign(s.params.size(), 0);
  s.ready.assign(s.params.size(), false);
  // See Note [DDP buckets]: from the last parameter backwards.
  std::int64_t bytes = 0;
  for (std::size_t k = s.params.size(); k-- > 0;) {
    const Tensor& p = s.params[k];
    const auto size = static_cast<std::int64_t>(p.nbytes());
    // The bucket being filled is the first (smaller cap) while there is one bucket.
    const std::int64_t cap = s.buckets.size() == 1 ? options.first_bucket_bytes : options.bucket_bytes;
    const bool start_new =
        s.buckets.empty() || bytes + size > cap || s.params[s.buckets.back().params.front()].dtype() != p.dtype();
    if (start_new) {
      s.buckets.emplace_back();
      bytes = 0;
    }
    s.buckets.back().params.push_back(k);
    s.bucket_of[k] = s.buckets.size() - 1;
    bytes += size;
  }
  for (State::Bucket& b : s.buckets) {
    const Tensor& p = s.params[b.params.front()];
    b.inverse_size = scalar_tensor(1.0 / group.size(), p.device(), p.dtype());
  }
  s.reset();

  for (std::size_t k = 0; k < s.params.size(); ++k) {
    s.hooks.push_back(autograd::register_post_accumulate_grad_hook(s.params[k], [this, k](const Tensor&) {
      State& st = *state_;
      if (!st.sync || st.ready[k]) return;
      st.ready[k] = true;
      if (!st.in_pass) {
        st.in_pass = true;
        autograd::queue_callback([this] { finish_pass(); });
      }
      --st.buckets[st.bucket_of[k]].pending;
      while (st.next_launch < st.buckets.size() && st.buckets[st.next_launch].pending == 0) launch(st.next_launch++);
    }));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (auto& h : state_->hooks) h.remove();
  // Outstanding allreduces are waited for by their Work (errors swallowed).
}

void DistributedDataParallel::launch(std::size_t b) {
  State::Bucket& bucket = state_->buckets[b];
  NoGradGuard no_grad;
  // Note [DDP buckets]: each gradient is divided by the world size on its
  // way into the bucket, so the bucket is summed, not averaged.
  const Tensor& first = state_->params[bucket.params.front()];
  std::int64_t total = 0;
  for (std::size_t k : bucket.params) total += state_->params[k].numel();
  bucket.flat = empty({total}, first.device(), first.dtype());
  std::int64_t offset = 0;
  for (std::size_t k : bucket.params) {
    const Tensor& p = state_->params[k];
    Tensor slot = bucket.flat.narrow(0, offset, p.numel()).view(p.shape());
    const Tensor g = p.grad();
    // A parameter without a gradient in this pass contributes zeros.
    if (g.defined())
      mul_out(slot, g, bucket.inverse_size);
    else
      slot.zero_();
    offset += p.numel();
  }
  bucket.work = group_->allreduce(bucket.flat, dist::ReduceOp::Sum);
  bucket.launched = true;
}

void DistributedDataParallel::finish_pass() {
  State& s = *state_;
  while (s.next_launch < s.buckets.size()) launch(s.next_launch++);
  const auto t0 = std::chrono::steady_clock::now();
  NoGradGuard no_grad;
  for (State::Bucket& bucket : s.buckets) {
    bucket.work.wait();
    std::int64_t offset = 0;
    for (std::size_t k : bucket.params) {
      const Tensor& p = s.params[k];
      const std::int64_t n = p.numel();
      p.set_grad(bucket.flat.narrow(0, offset, n).reshape(p.shape()));
      offset += n;
    }
  }
  s.last_wait = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.reset();
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  State& s = *state_;
  if (s.in_pass) s.reset();  // a backward that failed midway left a pass open
  if (options_.broadcast_buffers && module_->is_training() && group_->size() > 1) {
    // BatchNorm statistics follow rank 0.
    NoGradGuard no_grad;
    std::vector<dist::Work> works;
    for (const Tensor& b : module_->buffers()) {
      Tensor t = b.detach();
      works.push_back(group_->broadcast(t, 0));
    }
    for (dist::Work& w : works) w.wait();
  }
  return module_->forward(x);
}

std::string DistributedDataParallel::name() const {
  std::ostringstream os;
  os << "DistributedDataParallel(rank=" << group_->rank() << ", world_size=" << group_->size()
     << ", buckets=" << state_->buckets.size() << ")";
  return os.str();
}

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_indices() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : state_->buckets) out.push_back(b.params);
  return out;
}

double DistributedDataParallel::last_wait_seconds() const noexcept { return state_->last_wait; }

std::size_t DistributedDataParallel::buckets_launched() const noexcept { return state_->next_launch; }

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp) noexcept
    : ddp_(ddp), previous_(ddp.state_->sync) {
  ddp.state_->sync = false;
}
DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.state_->sync = previous_; }

}  // namespace anvil::nn
