// benchmarks/train/ddp_anvil.cpp — anvil's side of the DDP benchmark
// (benchmarks/train/ddp_compare.sh; ddp_torch.py is PyTorch's). Run under
// `mpirun -np 2`: every rank trains the model with DistributedDataParallel
// on its device (ANVIL_DIST_DEVICE, cpu in the comparison) with a
// DistributedSampler, global batch 256, SGD lr 0.1, --threads threads per
// rank. Rank 0 prints one line per figure, `key value`:
//   epoch_s        median seconds per epoch of epochs 2..N (epoch 1 warms up)
//   acc            test accuracy after the last epoch
//   step_s         a DDP step (forward, backward with its allreduces, SGD step), median
//   compute_s      the same step under no_sync (no communication), median
//   comm_s         the step's allreduces alone (same bucket sizes, same order), median
//   hidden         (compute_s + comm_s - step_s) / comm_s: the share of the
//                  communication hidden behind backward (1 = all of it)
//   wait_s         how long the end of backward waited for outstanding allreduces, median
//   steps          steps per epoch on each rank
//   loader_s       seconds per epoch spent outside the steps (the DataLoader
//                  making batches, the epoch's closing barrier), median
//   cpu_s          CPU seconds per epoch of all threads of all ranks, median:
//                  with perfect scaling the same for 1 and 2 ranks, whatever
//                  else runs on the machine (wall clock is not)
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "../../examples/d2l_ddp.h"
#include "../../examples/d2l_models.h"
#include "anvil/anvil.h"
#include "anvil/dist.h"
#include "anvil/nn/parallel.h"
#include "timing.h"

using namespace anvil;

namespace {

using anvil::bench::host_seconds;
using anvil::bench::median;
using anvil::bench::process_cpu_seconds;

std::shared_ptr<nn::Module> make_model(const std::string& name) {
  return std::make_shared<nn::Sequential>(name == "mlp" ? d2l::mlp() : d2l::lenet());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    d2l::DdpArgs args{.model = "mlp", .epochs = 3};
    int threads = 1, overlap_steps = 30, local_only = 0;
    std::int64_t bucket_kb = 0;
    d2l::Flags flags("ddp_anvil");
    d2l::add_ddp_flags(flags, args)
        .add("--threads", threads)
        .add("--overlap-steps", overlap_steps)
        .add("--bucket-kb", bucket_kb, "KB")     // 0: DDP's defaults (25 MiB, first 1 MiB)
        .add("--local-only", local_only, "0|1")  // context: epochs without communication
        .parse(argc, argv);
    d2l::check_ddp_args(args);
    const std::string& model = args.model;
    const int epochs = args.epochs;
    const std::int64_t subset = args.train_subset, batch = args.batch_size;
    set_num_threads(threads);
    auto& world = dist::init();
    const Device device = dist::device();
    const int rank = world.rank(), ranks = world.size();
    const FashionMNIST train_set(FashionMNIST::Split::Train);
    const FashionMNIST test_set(FashionMNIST::Split::Test);
    const Tensor x = subset > 0 ? train_set.images().narrow(0, 0, subset) : train_set.images();
    const Tensor y = subset > 0 ? train_set.labels().narrow(0, 0, subset) : train_set.labels();

    manual_seed(0);
    auto net = make_model(model);
    net->to(device);
    nn::DDPOptions ddp_options;
    if (bucket_kb > 0) ddp_options.bucket_bytes = ddp_options.first_bucket_bytes = bucket_kb << 10;
    nn::DistributedDataParallel ddp(net, world, ddp_options);
    optim::SGD opt(ddp.module().parameters(), {.lr = 0.1});
    DataLoader loader(x, y,
                      {.batch_size = batch / ranks,
                       .device = device,
                       .sampler = DistributedSampler(x.size(0), ranks, rank, {.seed = 0})});
    auto step = [&](const Batch& b) {
      std::optional<nn::DistributedDataParallel::NoSyncGuard> guard;
      if (local_only) guard.emplace(ddp);
      opt.zero_grad();
      nn::cross_entropy(ddp(b.inputs), b.targets).backward();
      opt.step();
    };

    std::vector<double> epoch_s, loader_s, cpu_s;
    for (int e = 0; e < epochs; ++e) {
      world.barrier().wait();
      double stepping = 0;
      const double cpu0 = process_cpu_seconds();
      epoch_s.push_back(host_seconds([&] {
        for (const Batch& b : loader) stepping += host_seconds([&] { step(b); });
        synchronize(device);
        world.barrier().wait();
      }));
      // Summed over ranks; the allreduce comes after the epoch's clock stopped.
      Tensor cpu_all = tensor(std::vector<double>{process_cpu_seconds() - cpu0}, cpu());
      world.allreduce(cpu_all, dist::ReduceOp::Sum).wait();
      cpu_s.push_back(cpu_all.item<double>());
      loader_s.push_back(epoch_s.back() - stepping);
    }
    if (epoch_s.size() > 1) {
      epoch_s.erase(epoch_s.begin());
      loader_s.erase(loader_s.begin());
      cpu_s.erase(cpu_s.begin());
    }

    // Accuracy on the whole test set, on every rank's identical weights.
    double acc = 0;
    {
      NoGradGuard no_grad;
      ddp.eval();
      std::int64_t correct = 0;
      DataLoader test(test_set.images(), test_set.labels(), {.batch_size = 1000, .device = device});
      for (const Batch& b : test) correct += sum(argmax(ddp.module()(b.inputs), 1) == b.targets).item<std::int64_t>();
      acc = static_cast<double>(correct) / static_cast<double>(test_set.size());
      ddp.train();
    }

    // Overlap: the same batch, stepped with and without communication, and
    // the communication alone.
    const Batch b = loader.batch(loader.order(0), 0);
    std::vector<double> full, compute, comm, waits;
    for (int k = 0; k < overlap_steps; ++k) {
      world.barrier().wait();
      full.push_back(host_seconds([&] {
        step(b);
        synchronize(device);
      }));
      waits.push_back(ddp.last_wait_seconds());
      world.barrier().wait();
      compute.push_back(host_seconds([&] {
        {
          auto guard = ddp.no_sync();
          step(b);
        }
        synchronize(device);
      }));
    }
    std::vector<Tensor> buckets;
    for (const auto& idx : ddp.bucket_indices()) {
      std::int64_t n = 0;
      for (std::size_t i : idx) n += ddp.module().parameters()[i].numel();
      buckets.push_back(zeros({n}, device));
    }
    for (int k = 0; k < overlap_steps; ++k) {
      world.barrier().wait();
      comm.push_back(host_seconds([&] {
        std::vector<dist::Work> works;
        for (Tensor& t : buckets) works.push_back(world.allreduce(t, dist::ReduceOp::Avg));
        for (auto& w : works) w.wait();
        synchronize(device);
      }));
    }
    if (rank == 0) {
      const double s = median(full), c = median(compute), m = median(comm);
      std::printf("model %s\nranks %d\nthreads %d\ndevice %s\nbuckets %zu\n", model.c_str(), ranks, threads,
                  device.str().c_str(), buckets.size());
      std::printf("epoch_s %.4f\nacc %.4f\nstep_s %.6f\ncompute_s %.6f\ncomm_s %.6f\nhidden %.3f\nwait_s %.6f\n",
                  median(epoch_s), acc, s, c, m, m > 0 ? (c + m - s) / m : 0.0, median(waits));
      std::printf("steps %lld\nloader_s %.4f\ncpu_s %.4f\n", static_cast<long long>(loader.size()), median(loader_s),
                  median(cpu_s));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_anvil: %s\n", e.what());
    return 1;
  }
}
