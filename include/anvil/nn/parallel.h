// anvil/nn/parallel.h — training one model on several devices or processes (DESIGN §8).
//
//   // One process, several devices: one replica per device, one host thread each.
//   auto make = [] { return std::make_shared<anvil::nn::Sequential>(lenet()); };
//   anvil::nn::DataParallel dp(make, anvil::try_all_gpus());
//   anvil::optim::SGD opt(dp.parameters(), {.lr = 0.1});     // the master's (first device's) parameters
//   for (const auto& [x, y] : loader) {                       // batches anywhere; split along dim 0
//     opt.zero_grad();
//     dp.train_step(x, y, anvil::nn::cross_entropy);          // forward + backward on every device at once
//     opt.step();                                             // gradients were summed onto the master
//   }
//
//   // Several processes (mpirun -np 2 ./train): one replica per rank.
//   auto& world = anvil::dist::init();
//   auto net = make();  net->to(anvil::dist::device());
//   anvil::nn::DistributedDataParallel ddp(net, world);       // rank 0's weights everywhere
//   anvil::optim::SGD opt(ddp.parameters(), {.lr = 0.1});
//   loss = anvil::nn::cross_entropy(ddp(x), y);  loss.backward();  // gradients averaged over ranks
//   opt.step();
//
// Both give the same parameters as one device training on the whole batch
// (within float rounding) when the loss is a mean over the batch's samples.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "anvil/autograd.h"
#include "anvil/device.h"
#include "anvil/nn.h"
#include "anvil/optim.h"
#include "anvil/tensor.h"

namespace anvil::dist {
class ProcessGroup;
class Work;
}  // namespace anvil::dist

namespace anvil::nn {

// A loss over a batch: the mean over its samples (cross_entropy, mse_loss).
using LossFunction = std::function<Tensor(const Tensor& output, const Tensor& target)>;
// Builds a fresh module of the architecture to replicate.
using ModuleFactory = std::function<std::shared_ptr<Module>()>;

// --- DataParallel: one process, several devices ---------------------------------------
//
// Replicas are made by calling `factory` once per device (C++ has no generic
// deep copy of a module with its own forward), moving each onto its device;
// the first replica is the master: parameters() and state_dict() are its, and
// the others copy its parameters and buffers at the start of every
// train_step() and forward(), so every replica is identical whenever it
// computes (PyTorch's DataParallel replicates the same way). An optimiser is
// built on parameters() and steps only the master.
//
// train_step(x, y, loss) splits the batch along dim 0 into one chunk per
// device (sizes ceil(B/n) like torch.chunk; fewer chunks when B < n), and on
// each device, in its own host thread, runs forward, the loss weighted by the
// chunk's share of the batch, and backward; it then sums the gradients into
// the master's .grad() (accumulating, like backward()), so they equal one
// device's gradient of the whole batch's mean loss. Grad mode is per thread
// and each replica has its own leaves, so the threads share nothing but the
// devices' queues. BatchNorm running statistics are the master's (updated
// from its chunk), copied to the replicas like parameters.
class DataParallel : public Module {
 public:
  // ValueError for no devices, a repeated device or an empty factory result;
  // the factory's modules must have the same parameter names and shapes.
  DataParallel(ModuleFactory factory, std::vector<Device> devices);

  struct StepResult {
    Tensor loss;    // the whole batch's loss (0-d, detached, on the first device)
    Tensor output;  // the replicas' outputs in batch order (detached, on the first device)
  };
  // x and y are split along dim 0 (ShapeError when their first dims differ or
  // the batch is empty) and moved to each device.
  StepResult train_step(const Tensor& x, const Tensor& y, const LossFunction& loss);

  // The outputs, gathered on the first device, computed in parallel without
  // recording (for evaluation; train with train_step).
  Tensor forward(const Tensor& x) override;
  std::string name() const override;

  const std::vector<Device>& devices_used() const noexcept { return devices_; }
  Module& module() const { return *replicas_.front(); }  // the master
  Module& replica(std::size_t i) const;                  // IndexError when out of range
  std::size_t num_replicas() const noexcept { return replicas_.size(); }
  // Copies the master's parameters and buffers into every other replica.
  void sync_replicas();

 private:
  std::vector<Device> devices_;
  std::vector<std::shared_ptr<Module>> replicas_;
};

// --- DistributedDataParallel: several processes ----------------------------------------
//
// Wraps the rank's own replica (already on its device). At construction it
// checks that every rank holds the same parameter names, shapes and dtypes
// (ValueError on every rank naming the first difference and the ranks) and
// broadcasts rank 0's parameters and buffers. During backward, gradients are
// packed into buckets (the last parameters first, since their gradients are
// ready first: the first bucket holds up to first_bucket_bytes, the others
// up to bucket_bytes) and each bucket is averaged across ranks asynchronously
// as soon as all of its gradients are in, in a fixed bucket order, so
// communication overlaps the rest of backward. backward() returns once every
// bucket is reduced and written back into .grad(). A parameter that got no
// gradient in a pass contributes zeros. With broadcast_buffers, buffers
// (BatchNorm statistics) are broadcast from rank 0 before each training
// forward. All ranks must run the same sequence of forward/backward calls.
struct DDPOptions {
  std::int64_t bucket_bytes = 25 << 20;
  std::int64_t first_bucket_bytes = 1 << 20;
  bool broadcast_buffers = true;
};

class DistributedDataParallel : public Module {
 public:
  DistributedDataParallel(std::shared_ptr<Module> module, dist::ProcessGroup& group, DDPOptions options = {});
  ~DistributedDataParallel() override;
  DistributedDataParallel(DistributedDataParallel&&) = delete;

  Tensor forward(const Tensor& x) override;
  std::string name() const override;
  Module& module() const { return *module_; }
  dist::ProcessGroup& group() const noexcept { return *group_; }

  // While alive, backward() accumulates gradients locally without any
  // communication (gradient accumulation); the first backward after it
  // averages the accumulated gradients.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) noexcept;
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // Buckets as lists of parameter indices (into parameters()), in reduction order.
  std::vector<std::vector<std::size_t>> bucket_indices() const;
  // How many buckets of the backward pass running now have been handed to
  // the group so far (0 outside backward): shows the overlap from a hook.
  std::size_t buckets_launched() const noexcept;
  // Timing of the last synchronised backward, for the overlap benchmark:
  // seconds the end-of-backward wait for outstanding allreduces took.
  double last_wait_seconds() const noexcept;

 private:
  struct State;
  void launch(std::size_t bucket);
  void finish_pass();
  std::shared_ptr<Module> module_;
  dist::ProcessGroup* group_;
  DDPOptions options_;
  std::unique_ptr<State> state_;
};

// --- Checkpoints in a distributed run --------------------------------------------------
//
// One safetensors file holds the model's state_dict ("model.<name>"), the
// optimiser's state ("optim.<key>") and the training position
// ("meta.epoch", "meta.step"). In a group, rank 0 writes (atomically) and
// the others wait until the file is complete; when rank 0 cannot write it,
// every rank raises the same IOError ("save_checkpoint: rank 0 could not
// write '<path>': <rank 0's error>") at once. Every rank loads it onto its
// own device. Since the file holds one replica and no rank
// count, a run resumed with a different number of ranks continues from the
// same state.
struct TrainingPosition {
  std::int64_t epoch = 0;
  std::int64_t step = 0;
};
void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer& optimizer,
                     TrainingPosition position, dist::ProcessGroup* group = nullptr);
// Loads into `model` and `optimizer` (whose parameters live on their device)
// and returns the position; IOError / ValueError naming the key on a mismatch.
TrainingPosition load_checkpoint(const std::string& path, Module& model, optim::Optimizer& optimizer);

}  // namespace anvil::nn
