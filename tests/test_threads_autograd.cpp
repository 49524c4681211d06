// Threads (DESIGN §4.13): several threads running backward into one model's
// shared parameters lose no gradient; autograd::grad from threads sharing
// inputs touches no .grad; grad mode, autocast, SyncGuard and the default
// device are per thread and carried into DataParallel's replica threads;
// set_num_threads holds for threads started later. Threads meet at barriers
// and latches, never at sleeps. The suite's name starts with test_threads so
// the ThreadSanitizer run selects it with `ctest -R ^test_threads`.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "anvil/anvil.h"
#include "backends/cpu/threads.h"
#include "device_test.h"
#include "threads_test_support.h"

namespace {

using namespace anvil;
using anvil::testing::ints;
using anvil::testing::on_threads;

class ThreadsAutograd : public anvil::testing::DeviceTest {};

constexpr int kThreads = 4;
constexpr int kSteps = 6;

// A convolution, a ReLU and a linear layer on integer weights.
struct Model {
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::Linear> fc;
  explicit Model(Device d)
      : conv(std::make_shared<nn::Conv2d>(1, 2, 3)), fc(std::make_shared<nn::Linear>(2 * 3 * 3, 3)) {
    conv->to(d);
    fc->to(d);
    NoGradGuard no_grad;
    int salt = 11;
    for (Tensor p : params()) p.copy_(ints(p.shape(), salt++, d));
  }
  std::vector<Tensor> params() const { return {conv->weight(), conv->bias(), fc->weight(), fc->bias()}; }
  // One sample's loss: integer-valued, and so is its gradient.
  Tensor loss(int thread, int step, Device d) const {
    const Tensor x = ints({2, 1, 5, 5}, 100 * thread + step, d);
    const Tensor h = relu((*conv)(x)).reshape({2, 2 * 3 * 3});
    return ((*fc)(h)*ints({2, 3}, 7 * thread + step + 1, d)).sum();
  }
  void clear() const {
    for (const Tensor& p : params()) p.set_grad({});
  }
};

std::vector<std::vector<float>> grads_of(const Model& m) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : m.params()) {
    const Tensor g = p.grad();
    out.push_back(g.defined() ? g.to_vector<float>() : std::vector<float>{});
  }
  return out;
}

// The single-threaded sum of every (thread, step) contribution.
std::vector<std::vector<float>> serial_sum(const Model& m, Device d) {
  m.clear();
  for (int t = 0; t < kThreads; ++t)
    for (int s = 0; s < kSteps; ++s) m.loss(t, s, d).backward();
  auto sum = grads_of(m);
  m.clear();
  return sum;
}

// Hogwild: one model, no lock, every thread's backward adds into the same
// .grad. Before the per-leaf accumulator lock this lost contributions or
// crashed in AccumulateGrad::apply.
TEST_P(ThreadsAutograd, HogwildBackwardLosesNoGradient) {
  const Device d = device();
  const Model m(d);
  const auto want = serial_sum(m, d);
  ASSERT_FALSE(want[0].empty());
  on_threads(kThreads, [&](int t) {
    for (int s = 0; s < kSteps; ++s) m.loss(t, s, d).backward();
  });
  EXPECT_EQ(grads_of(m), want);
}

// Graphs that share nodes: one forward, then every thread's own head and
// backward through the shared part (retain_graph keeps it for the others).
TEST_P(ThreadsAutograd, BackwardThroughASharedGraph) {
  const Device d = device();
  const Model m(d);
  const Tensor x = ints({2, 1, 5, 5}, 3, d);
  const Tensor h = relu((*m.conv)(x)).reshape({2, 2 * 3 * 3});
  std::vector<Tensor> heads;
  for (int t = 0; t < kThreads; ++t) heads.push_back(ints({2, 18}, t, d));
  for (const Tensor& c : heads) (h * c).sum().backward({}, /*retain_graph=*/true);
  const auto want = grads_of(m);
  m.clear();
  on_threads(kThreads, [&](int t) {
    for (int s = 0; s < 2; ++s) (h * heads[t]).sum().backward({}, /*retain_graph=*/true);
  });
  auto got = grads_of(m);
  for (auto& g : got)
    for (float& v : g) v /= 2;  // two steps each
  EXPECT_EQ(got, want);
}

// Without retain_graph the first pass through the shared node frees it: the
// other thread gets the ValueError a second backward() gets, never a freed rule.
TEST_P(ThreadsAutograd, FreedSharedGraphFailsTheSecondPass) {
  const Device d = device();
  const Model m(d);
  const Tensor h = relu((*m.conv)(ints({2, 1, 5, 5}, 3, d)));
  std::atomic<int> ok{0}, freed{0};
  on_threads(2, [&](int t) {
    try {
      (h * static_cast<double>(t + 1)).sum().backward();
      ++ok;
    } catch (const ValueError&) {
      ++freed;
    }
  });
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(freed.load(), 1);
}

// autograd::grad returns gradients and leaves every .grad alone, so threads
// sharing inputs (and a thread running backward into them) see only their own.
TEST_P(ThreadsAutograd, GradFromThreadsSharingInputs) {
  const Device d = device();
  const Model m(d);
  const Tensor x = ints({2, 1, 5, 5}, 5, d).requires_grad_();
  auto f = [&](int t) { return ((*m.fc)(relu((*m.conv)(x)).reshape({2, 18})) * double(t + 1)).sum(); };
  // Single-threaded references: d f_t / d (x, conv weight) is (t + 1) times f_0's.
  const std::vector<Tensor> base = autograd::grad({f(0)}, {x, m.conv->weight()});
  const std::vector<float> gx = base[0].to_vector<float>(), gw = base[1].to_vector<float>();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(m.fc->weight().grad().defined()) << "autograd::grad wrote a parameter's .grad";
  f(0).backward();  // what the backward thread below adds, per step
  const std::vector<float> one_step = m.conv->weight().grad().to_vector<float>();
  m.clear();
  x.set_grad({});

  std::atomic<int> mismatches{0};
  on_threads(kThreads + 1, [&](int t) {
    for (int s = 0; s < kSteps; ++s) {
      if (t == kThreads) {
        f(0).backward();
        continue;
      }
      const std::vector<Tensor> g = autograd::grad({f(t)}, {x, m.conv->weight()});
      std::vector<float> want_x = gx, want_w = gw;
      for (float& v : want_x) v *= static_cast<float>(t + 1);
      for (float& v : want_w) v *= static_cast<float>(t + 1);
      if (g[0].to_vector<float>() != want_x || g[1].to_vector<float>() != want_w) ++mismatches;
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
  std::vector<float> want = one_step;
  for (float& v : want) v *= kSteps;
  EXPECT_EQ(m.conv->weight().grad().to_vector<float>(), want) << "only the backward thread's steps accumulate";
}

// Grad mode, autocast, SyncGuard and DeviceScope on one thread are invisible
// to another, and each thread's guards restore its own values.
TEST_P(ThreadsAutograd, ModesArePerThread) {
  const Device d = device();
  const Tensor w = ints({3, 3}, 1, d).requires_grad_();
  std::barrier step(2);
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  auto expect = [&](bool cond, const char* what) {
    if (cond) return;
    std::lock_guard lock(failures_mutex);
    failures.emplace_back(what);
  };
  auto plain = [&](const char* who) {
    expect(sync_debug_mode() == SyncDebugMode::Off, who);
    expect(is_grad_enabled(), who);
    expect(!amp::is_autocast_enabled(d.type()), who);
    expect(default_device() == cpu(), who);
    const Tensor y = matmul(w, w);
    expect(y.requires_grad() && y.dtype() == DType::F32, who);
  };
  std::thread a([&] {
    {
      const SyncGuard sync(SyncDebugMode::Error);
      const NoGradGuard no_grad;
      const amp::AutocastGuard autocast(d.type(), DType::BF16);
      const DeviceScope scope(d);
      step.arrive_and_wait();  // 1: a's guards are alive
      step.arrive_and_wait();  // 2: b checked and entered its own guards
      expect(sync_debug_mode() == SyncDebugMode::Error, "a: its SyncGuard");
      expect(!is_grad_enabled(), "a: its NoGradGuard");
      expect(amp::is_autocast_enabled(d.type()) && amp::autocast_dtype(d.type()) == DType::BF16, "a: its autocast");
      expect(default_device() == d, "a: its DeviceScope");
      const Tensor y = matmul(w, w);
      expect(!y.requires_grad() && y.dtype() == DType::BF16, "a: no record, bf16");
    }                        // a's guards end while b's are alive
    step.arrive_and_wait();  // 3
    plain("a: after its guards");
    step.arrive_and_wait();  // 4: b's guards ended too
    plain("a: at the end");
  });
  std::thread b([&] {
    step.arrive_and_wait();  // 1
    plain("b: a's guards leaked into b");
    {
      const SyncGuard sync(SyncDebugMode::Warn);
      const amp::AutocastGuard autocast(d.type(), DType::F16, /*enabled=*/false);
      step.arrive_and_wait();  // 2
      step.arrive_and_wait();  // 3: a's guards are gone
      expect(sync_debug_mode() == SyncDebugMode::Warn, "b: its SyncGuard after a's ended");
      expect(amp::autocast_dtype(d.type()) == DType::F16, "b: its autocast dtype after a's ended");
    }
    step.arrive_and_wait();  // 4
    plain("b: at the end");
  });
  a.join();
  b.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(sync_debug_mode(), SyncDebugMode::Off);
}

// A thread inside no SyncGuard follows the process-wide default.
TEST(ThreadsSyncDefault, ThreadsWithoutAGuardFollowTheDefault) {
  set_sync_debug_mode(SyncDebugMode::Warn);
  SyncDebugMode seen = SyncDebugMode::Off, guarded = SyncDebugMode::Off;
  std::thread([&] {
    seen = sync_debug_mode();
    const SyncGuard g(SyncDebugMode::Error);
    guarded = sync_debug_mode();
  }).join();
  const SyncDebugMode main_mode = sync_debug_mode();
  set_sync_debug_mode(SyncDebugMode::Off);
  EXPECT_EQ(seen, SyncDebugMode::Warn);
  EXPECT_EQ(guarded, SyncDebugMode::Error);
  EXPECT_EQ(main_mode, SyncDebugMode::Warn);
  EXPECT_EQ(default_sync_debug_mode(), SyncDebugMode::Off);
}

// set_num_threads is the process's budget (torch.set_num_threads): a thread
// started later runs at it, and a bound set there holds on this thread.
// Team sizes follow the budget and the work's size only here (no load
// bound, the reference wake cost), as in test_core_threads.
TEST(ThreadsBudget, SetNumThreadsHoldsForThreadsStartedLater) {
  const int before = num_threads();
  cpu_backend::set_load_bound(false);
  cpu_backend::set_parallel_wake_us(cpu_backend::kReferenceWakeUs);
  const Tensor big = ones({4 << 20});
  set_num_threads(1);
  int seen = 0;
  cpu_backend::ParallelStats stats;
  std::thread([&] {
    seen = num_threads();
    cpu_backend::reset_parallel_stats();
    (void)(big + big);
    stats = cpu_backend::parallel_stats();
    set_num_threads(2);
  }).join();
  const int back_here = num_threads();
  cpu_backend::reset_parallel_stats();
  (void)(big + big);
  const cpu_backend::ParallelStats here = cpu_backend::parallel_stats();
  set_num_threads(before);
  cpu_backend::set_parallel_wake_us(0);
  cpu_backend::set_load_bound(true);
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(stats.regions, 0u) << "the new thread woke the pool under a budget of one";
  EXPECT_EQ(back_here, 2);
  EXPECT_GE(here.regions, 1u);
  EXPECT_EQ(here.region_threads, 2u * here.regions) << "a bound set on another thread holds here";
  EXPECT_EQ(num_threads(), before);
}

// What a replica's forward saw, on whichever thread ran it.
struct Seen {
  bool grad = true, autocast = false;
  SyncDebugMode sync = SyncDebugMode::Off;
  Device scope;
};

class Probe : public nn::Module {
 public:
  Probe(std::shared_ptr<std::mutex> mutex, std::shared_ptr<std::vector<Seen>> seen)
      : mutex_(std::move(mutex)), seen_(std::move(seen)) {
    fc_ = register_module("fc", nn::Linear(4, 3));
  }
  Tensor forward(const Tensor& x) override {
    {
      std::lock_guard lock(*mutex_);
      seen_->push_back(
          {is_grad_enabled(), amp::is_autocast_enabled(x.device().type()), sync_debug_mode(), default_device()});
    }
    return (*fc_)(x);
  }
  std::string name() const override { return "Probe"; }

 private:
  std::shared_ptr<nn::Linear> fc_;
  std::shared_ptr<std::mutex> mutex_;
  std::shared_ptr<std::vector<Seen>> seen_;
};

// The caller's autocast, grad mode, SyncGuard and DeviceScope reach every
// replica's thread (PyTorch's DataParallel carries autocast and grad mode).
TEST_P(ThreadsAutograd, DataParallelReplicasTakeTheCallersModes) {
  const Device d = device();
  std::vector<Device> devices{d};
  for (Device o : anvil::testing::test_devices())
    if (o != d && devices.size() < 2) devices.push_back(o);
  auto mutex = std::make_shared<std::mutex>();
  auto seen = std::make_shared<std::vector<Seen>>();
  nn::DataParallel dp([&] { return std::make_shared<Probe>(mutex, seen); }, devices);
  const Tensor x = ints({4, 4}, 9, d);
  {
    std::vector<std::unique_ptr<amp::AutocastGuard>> autocast;
    for (Device dev : devices) autocast.push_back(std::make_unique<amp::AutocastGuard>(dev.type(), DType::BF16));
    const NoGradGuard no_grad;
    const SyncGuard sync(SyncDebugMode::Warn);
    const DeviceScope scope(d);
    const Tensor y = dp(x);
    EXPECT_EQ(y.dtype(), DType::BF16) << "replicas computed outside the caller's autocast";
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.grad_fn_name().empty());
  }
  ASSERT_EQ(seen->size(), devices.size());
  for (const Seen& s : *seen) {
    EXPECT_FALSE(s.grad);
    EXPECT_TRUE(s.autocast);
    EXPECT_EQ(s.sync, SyncDebugMode::Warn);
    EXPECT_EQ(s.scope, d);
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(ThreadsAutograd);

}  // namespace
