// anvil/nn/parallel.h — training one model on several devices or processes (DESIGN §8).
//
//   // One process, several devices (the book's nn.DataParallel): one replica per device.
//   auto net = std::make_shared<anvil::nn::Sequential>(lenet());
//   anvil::nn::DataParallel dp(net, anvil::try_all_gpus());   // net moves to the first device; clones elsewhere
//   anvil::optim::SGD opt(dp.parameters(), {.lr = 0.1});      // the master's (net's) parameters
//   for (const auto& [x, y] : loader) {                        // batches anywhere; split along dim 0
//     opt.zero_grad();
//     auto l = anvil::nn::cross_entropy(dp(x), y.to(dp.devices_used()[0]));
//     l.backward();                                            // replicas' gradients summed onto net's
//     opt.step();
//   }
//   // The same step, faster (each device runs its own backward in its own thread):
//   dp.train_step(x, y, anvil::nn::cross_entropy);
//
//   // Several processes (mpirun -np 2 ./train): one replica per rank.
//   auto& world = anvil::dist::init();
//   auto net = make();  net->to(anvil::dist::device());
//   anvil::nn::DistributedDataParallel ddp(net, world);       // rank 0's weights everywhere
//   anvil::optim::SGD opt(ddp.parameters(), {.lr = 0.1});
//   loss = anvil::nn::cross_entropy(ddp(x), y);  loss.backward();  // gradients averaged over ranks
//   opt.step();
//
// All give the same parameters as one device training on the whole batch
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
// One replica per device: the given module (moved to the first device) is
// the master, and the others are its clones (Module::clone), or modules the
// factory builds (the factory form, for modules that cannot clone). The
// master is the child "module": parameters(), state_dict(), train() and
// eval() are its, and an optimiser built on parameters() steps it alone.
//
// forward(x) is PyTorch's DataParallel.forward, differentiable: it copies
// the master's parameters and buffers into the other replicas, splits x
// along dim 0 into one chunk per device (sizes ceil(B/n) as torch.chunk;
// fewer chunks when B < n) and runs each replica on its chunk in its own
// host thread, then concatenates the outputs on the first device. When grad
// mode is on it records: the chunks' gradients gather back to x, and each
// replica's parameters are broadcasts of the master's, so backward sums
// every replica's gradient into the master's .grad() (Note [Replica
// parameters are broadcasts]); loss(dp(x), y).backward() then gives the
// gradient one device gives for the whole batch. Between that forward and
// its backward, do not step the optimiser (as in PyTorch).
//
// BatchNorm running statistics (as PyTorch's DataParallel): the master runs
// the first chunk and updates its own statistics from it; the other
// replicas' updates are overwritten by the next copy from the master. So the
// running statistics are those of the first chunk of each batch.
//
// train_step(x, y, loss) is the fast path for the same step: on each device,
// in its own thread, forward, the loss weighted by the chunk's share of the
// batch, and backward, then the gradients summed into the master's .grad()
// (accumulating, like backward()). Grad mode is per thread; each replica's
// thread runs under the caller's.
class DataParallel : public Module {
 public:
  // `module`: the master, moved to devices[0] (it keeps its identity); the
  // other replicas are module->clone(device). ValueError for no devices, a
  // repeated device or a null module; NotSupported when it cannot clone
  // (use the factory form).
  DataParallel(std::shared_ptr<Module> module, std::vector<Device> devices);
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

  // The outputs, gathered on the first device (see above); ShapeError for
  // an empty batch.
  Tensor forward(const Tensor& x) override;
  std::string name() const override;

  const std::vector<Device>& devices_used() const noexcept { return devices_; }
  Module& module() const { return *replicas_.front(); }  // the master
  Module& replica(std::size_t i) const;                  // IndexError when out of range
  std::size_t num_replicas() const noexcept { return replicas_.size(); }
  // Copies the master's parameters and buffers into every other replica.
  void sync_replicas();

 private:
  void check_replicas();
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
