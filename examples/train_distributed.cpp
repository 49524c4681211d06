// Distributed data-parallel training on Fashion-MNIST: one process per
// device, launched by Open MPI, each on dist::device() (its local rank's
// accelerator), with DistributedDataParallel and a DistributedSampler.
// The same binary runs alone as a world of one.
//
//   mpirun -np 2 --bind-to none train_distributed --epochs 2 --train-subset 12000
//   train_distributed --model mlp                        # one process
//   mpirun -np 2 train_distributed --checkpoint ckpt.safetensors   # saves each epoch, resumes when present
//
// --batch-size is the global batch: each rank takes batch/ranks samples of
// it, so the run follows the same trajectory for any number of ranks.
// Rank 0 prints test accuracy and seconds per epoch.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "anvil/anvil.h"
#include "anvil/dist.h"
#include "anvil/nn/parallel.h"
#include "d2l_ddp.h"
#include "d2l_models.h"
#include "d2l_train.h"

using namespace anvil;

namespace {

struct Args : d2l::DdpArgs {
  double lr = 0.1;
  std::int64_t test_subset = 0;
  std::string checkpoint;
};

Args parse(int argc, char** argv) {
  Args a;
  d2l::Flags flags("train_distributed");
  d2l::add_ddp_flags(flags, a)
      .add("--lr", a.lr)
      .add("--test-subset", a.test_subset, "N")
      .add("--checkpoint", a.checkpoint, "PATH")
      .parse(argc, argv);
  d2l::check_ddp_args(a);
  return a;
}

// The book's MLP and LeNet (d2l_models.h), as train_fashion_mnist trains them.
std::shared_ptr<nn::Module> make_model(const std::string& name) {
  return std::make_shared<nn::Sequential>(name == "mlp" ? d2l::mlp() : d2l::lenet());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    auto& world = dist::init();
    const Device device = dist::device();
    const int rank = world.rank(), ranks = world.size();
    if (args.batch_size % ranks != 0)
      throw ValueError("--batch-size must be a multiple of the number of ranks; got " +
                       std::to_string(args.batch_size) + " for " + std::to_string(ranks) + " ranks");
    std::printf("rank %d of %d on %s (engine %s)\n", rank, ranks, device.str().c_str(), world.engine().c_str());
    std::fflush(stdout);

    const FashionMNIST train_set(FashionMNIST::Split::Train);
    const FashionMNIST test_set(FashionMNIST::Split::Test);
    const Tensor train_x = d2l::first(train_set.images(), args.train_subset);
    const Tensor train_y = d2l::first(train_set.labels(), args.train_subset);

    manual_seed(0);  // rank 0's initial weights are broadcast anyway
    auto net = make_model(args.model);
    net->to(device);
    nn::DistributedDataParallel ddp(net, world);
    optim::SGD opt(ddp.module().parameters(), {.lr = args.lr});
    nn::TrainingPosition start;
    if (!args.checkpoint.empty() && std::filesystem::exists(args.checkpoint)) {
      start = nn::load_checkpoint(args.checkpoint, ddp.module(), opt);
      if (rank == 0)
        std::printf("resumed from %s at epoch %lld\n", args.checkpoint.c_str(), static_cast<long long>(start.epoch));
    }
    DataLoader loader(train_x, train_y,
                      {.batch_size = args.batch_size / ranks,
                       .device = device,
                       .sampler = DistributedSampler(train_x.size(0), ranks, rank, {.seed = 0})});
    loader.set_epoch(start.epoch);
    const Tensor test_x = d2l::first(test_set.images(), args.test_subset);
    const Tensor test_y = d2l::first(test_set.labels(), args.test_subset);
    // Every rank evaluates its share of the test set; the counts are summed.
    DataLoader test_loader(
        test_x, test_y,
        {.batch_size = 1024,
         .device = device,
         .sampler = DistributedSampler(test_x.size(0), ranks, rank, {.shuffle = false, .drop_last = false})});
    double total = 0;
    int epochs_run = 0;
    for (std::int64_t epoch = start.epoch; epoch < args.epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      Tensor loss_sum = zeros({}, device);
      for (const Batch& b : loader) {
        opt.zero_grad();
        const Tensor loss = nn::cross_entropy(ddp(b.inputs), b.targets);
        loss.backward();
        opt.step();
        NoGradGuard no_grad;
        loss_sum += loss.detach();
      }
      synchronize(device);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      total += secs;
      ++epochs_run;
      Tensor counts = zeros({2}, cpu(), i64);  // correct, seen (padding repeats a few test images)
      {
        NoGradGuard no_grad;
        ddp.eval();
        std::int64_t correct = 0, seen = 0;
        for (const Batch& b : test_loader) {
          correct += sum(argmax(ddp(b.inputs), 1) == b.targets).item<std::int64_t>();
          seen += b.targets.size(0);
        }
        ddp.train();
        counts = tensor(std::vector<std::int64_t>{correct, seen}, cpu());
      }
      world.allreduce(counts).wait();
      const auto c = counts.to_vector<std::int64_t>();
      const double train_loss = loss_sum.item<double>() / static_cast<double>(loader.size());
      if (rank == 0)
        std::printf("epoch %lld: loss %.4f (rank 0), test acc %.3f, %.2f s\n", static_cast<long long>(epoch + 1),
                    train_loss, static_cast<double>(c[0]) / static_cast<double>(c[1]), secs);
      if (!args.checkpoint.empty()) nn::save_checkpoint(args.checkpoint, ddp.module(), opt, {epoch + 1, 0}, &world);
    }
    if (rank == 0 && epochs_run > 0)
      std::printf("%.1f sec/epoch on %d rank(s), global batch %lld\n", total / epochs_run, ranks,
                  static_cast<long long>(args.batch_size));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_distributed: " << e.what() << "\n";
    return 1;
  }
}
