// nn::DistributedDataParallel and distributed checkpoints.
//
// The DDP.* cases run in every process of a world: alone (a world of one)
// and, as ctest's test_ddp_mpi_{devices,cpu} (tests/CMakeLists.txt), under
// `mpirun -np 2` on the ranks' own devices (dist::device(): opencl:0 and
// opencl:1 here) and on the CPU. Every rank
// computes the one-process reference itself (the whole global batch on one
// model), so each rank checks the equivalence on its own; the parameters are
// also compared bitwise across ranks after every step.
// Checkpoint.ResumeAcrossRankCounts needs runs with different rank counts
// one after another, so it starts its two-rank halves itself through mpirun
// (phases chosen by ANVIL_TEST_CKPT_PHASE, the same Open MPI environment as
// tests/CMakeLists.txt) and compares the results in the launching process.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "anvil/anvil.h"
#include "anvil/dist.h"
#include "anvil/nn/parallel.h"

namespace {

using namespace anvil;

constexpr std::int64_t kSamples = 48;
constexpr std::int64_t kGlobalBatch = 8;

std::shared_ptr<nn::Module> make_mlp(std::int64_t hidden = 16) {
  return std::make_shared<nn::Sequential>(nn::Linear(12, hidden), nn::ReLU(), nn::Linear(hidden, 5));
}
std::shared_ptr<nn::Module> make_convnet() {
  return std::make_shared<nn::Sequential>(nn::Conv2d(1, 4, 3, 1, 1), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                                          nn::Linear(4 * 4 * 4, 5));
}

// The same synthetic data set on every rank.
struct Data {
  Tensor x, y;
};
Data synthetic(const Shape& sample_shape) {
  manual_seed(2024);
  Shape s = sample_shape;
  s.insert(0, kSamples);
  return {randn(s), randint(0, 5, {kSamples})};
}

dist::ProcessGroup& world() { return dist::init(); }

// Every parameter, flattened and concatenated, on the CPU.
Tensor flat_params(const nn::Module& m) {
  std::vector<Tensor> parts;
  for (const Tensor& p : m.parameters()) parts.push_back(p.detach().cpu().reshape({-1}));
  return cat(parts, 0);
}

// Rank r's copy of `t` (CPU), for comparing ranks.
std::vector<Tensor> gather_from_ranks(const Tensor& t) {
  std::vector<Tensor> out;
  for (int r = 0; r < world().size(); ++r) out.push_back(empty(t.shape(), cpu(), t.dtype()));
  world().allgather(out, t.contiguous()).wait();
  return out;
}

// Whether every rank trains on the same device type. With fewer GPUs than
// ranks, try_gpu() puts the rest on the CPU (cuda:0 and cpu on a one-GPU
// machine), where the same update may round differently (the CPU's loops
// contract a*b+c into an FMA), so such ranks agree within a tolerance only.
bool ranks_share_a_device_type() {
  const Tensor mine = full({1}, static_cast<std::int64_t>(dist::device().type()), cpu());
  for (const Tensor& theirs : gather_from_ranks(mine))
    if (!equal(theirs, mine)) return false;
  return true;
}

void expect_same_on_every_rank(const Tensor& t, const std::string& what) {
  const auto all = gather_from_ranks(t);
  const bool bitwise = ranks_share_a_device_type();
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (bitwise)
      EXPECT_TRUE(equal(all[r], all[0])) << what << ": rank " << r << " differs from rank 0 (bitwise)";
    else
      EXPECT_TRUE(allclose(all[r], all[0], 1e-5, 1e-6))
          << what << ": rank " << r << " (on another device type) differs from rank 0 beyond 1e-5";
  }
}

// DDP over the world, each rank on its share of every global batch, against
// one model trained on the whole global batch.
void expect_ddp_matches_one_process(const nn::ModuleFactory& factory, const Shape& sample_shape) {
  auto& g = world();
  const Device d = dist::device();
  const Data data = synthetic(sample_shape);

  manual_seed(1);
  auto ref = factory();                                   // the one-process run, on the CPU
  manual_seed(1 + static_cast<std::uint64_t>(g.rank()));  // different weights per rank: DDP must broadcast rank 0's
  auto local = factory();
  if (g.rank() == 0) {
    manual_seed(1);
    local = factory();
  }
  local->to(d);
  nn::DistributedDataParallel ddp(local, g, {.bucket_bytes = 1024, .first_bucket_bytes = 256});
  EXPECT_GT(ddp.bucket_indices().size(), 1u) << "small caps give several buckets";
  EXPECT_TRUE(equal(flat_params(ddp.module()), flat_params(*ref))) << "construction broadcasts rank 0's weights";

  optim::SGD ref_opt(ref->parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD opt(ddp.parameters(), {.lr = 0.05, .momentum = 0.9});
  DataLoader global(data.x, data.y, {.batch_size = kGlobalBatch, .shuffle = true, .seed = 5});
  DataLoader mine(data.x, data.y,
                  {.batch_size = kGlobalBatch / g.size(),
                   .device = d,
                   .sampler = DistributedSampler(kSamples, g.size(), g.rank(), {.seed = 5})});
  ASSERT_EQ(global.size(), mine.size());
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto it = mine.begin();
    int step = 0;
    for (const auto& [gx, gy] : global) {
      const auto& [x, y] = *it;
      ref_opt.zero_grad();
      nn::cross_entropy((*ref)(gx), gy).backward();
      ref_opt.step();

      opt.zero_grad();
      nn::cross_entropy(ddp(x), y).backward();
      opt.step();
      expect_same_on_every_rank(flat_params(ddp.module()),
                                "epoch " + std::to_string(epoch) + " step " + std::to_string(step));
      ++it;
      ++step;
    }
  }
  const Tensor got = flat_params(ddp.module()), want = flat_params(*ref);
  EXPECT_TRUE(allclose(got, want, 1e-5, 1e-6))
      << "after " << 2 * global.size() << " steps the largest difference is " << (got - want).abs().max().item<float>();
}

TEST(DDP, MatchesOneProcessOnAnMLP) {
  expect_ddp_matches_one_process([] { return make_mlp(); }, {12});
}

TEST(DDP, MatchesOneProcessOnAConvNet) { expect_ddp_matches_one_process(make_convnet, {1, 8, 8}); }

TEST(DDP, BucketsStartDuringBackwardInReverseOrder) {
  auto& g = world();
  const Device d = dist::device();
  manual_seed(6);
  auto net = make_mlp();  // 4 parameters
  net->to(d);
  // Caps that put each parameter in its own bucket: 2.bias (last) first.
  nn::DistributedDataParallel ddp(net, g, {.bucket_bytes = 1, .first_bucket_bytes = 1});
  const auto buckets = ddp.bucket_indices();
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(buckets.front(), std::vector<std::size_t>{3});
  EXPECT_EQ(buckets.back(), std::vector<std::size_t>{0});
  // The first layer's gradients are the last ones backward produces (see
  // Note [Backward order] in src/autograd/engine.cpp): by the time the first
  // weight's arrives, the buckets of the last layer are in flight.
  Ledger scope;
  std::size_t issued_before_last = 0;
  auto h = autograd::register_post_accumulate_grad_hook(
      net->parameters()[0], [&](const Tensor&) { issued_before_last = ddp.buckets_launched(); });
  manual_seed(7);
  nn::cross_entropy(ddp(randn({4, 12}).to(d)), randint(0, 5, {4}).to(d)).backward();
  h.remove();
  EXPECT_EQ(ddp.buckets_launched(), 0u) << "the pass is over";
  EXPECT_GE(issued_before_last, 2u) << "allreduces start during backward, not after it";
  EXPECT_EQ(scope.report().collective_count(d), 4u) << "one allreduce per bucket";
}

TEST(DDP, NoSyncAccumulatesLocallyThenAveragesTheSum) {
  auto& g = world();
  const Device d = dist::device();
  manual_seed(3);
  auto net = make_mlp();
  net->to(d);
  nn::DistributedDataParallel ddp(net, g);
  // Micro-batches differ per rank.
  manual_seed(100 + static_cast<std::uint64_t>(g.rank()));
  std::vector<Tensor> xs, ys;
  for (int k = 0; k < 3; ++k) {
    xs.push_back(randn({4, 12}).to(d));
    ys.push_back(randint(0, 5, {4}).to(d));
  }
  // The local sum of the three micro-batches' gradients, without DDP.
  manual_seed(3);
  auto plain = make_mlp();
  plain->to(d);
  for (int k = 0; k < 3; ++k) nn::cross_entropy((*plain)(xs[k]), ys[k]).backward();

  {
    auto guard = ddp.no_sync();
    for (int k = 0; k < 2; ++k) nn::cross_entropy(ddp(xs[k]), ys[k]).backward();
  }
  if (g.size() > 1) {
    // Nothing was exchanged: rank 1's gradient is its own.
    const Tensor local = ddp.parameters()[0].grad().cpu();
    const auto all = gather_from_ranks(local);
    EXPECT_FALSE(equal(all[0], all[1])) << "under no_sync the ranks keep their own gradients";
  }
  nn::cross_entropy(ddp(xs[2]), ys[2]).backward();  // synchronised: averages the accumulated sums
  const auto mine = ddp.parameters();
  const auto theirs = plain->parameters();
  for (std::size_t k = 0; k < mine.size(); ++k) {
    const Tensor local_sum = theirs[k].grad().cpu();
    Tensor avg = zeros_like(local_sum);
    for (const Tensor& t : gather_from_ranks(local_sum)) avg = avg + t;
    avg = avg / static_cast<double>(g.size());
    EXPECT_TRUE(allclose(mine[k].grad().cpu(), avg, 1e-5, 1e-6)) << "parameter " << k;
    expect_same_on_every_rank(mine[k].grad().cpu(), "gradient " + std::to_string(k));
  }
}

// A model with a branch its forward does not use in this pass.
class TwoHeads : public nn::Module {
 public:
  TwoHeads() {
    used_ = register_module("used", nn::Linear(12, 5));
    unused_ = register_module("unused", nn::Linear(12, 3));
  }
  Tensor forward(const Tensor& x) override { return (*used_)(x); }
  std::string name() const override { return "TwoHeads"; }

 private:
  std::shared_ptr<nn::Linear> used_, unused_;
};

TEST(DDP, ParameterWithoutGradientContributesZeros) {
  auto& g = world();
  const Device d = dist::device();
  manual_seed(4);
  auto net = std::make_shared<TwoHeads>();
  net->to(d);
  // One bucket holds both heads, so the unused head shares its allreduce with the used one.
  nn::DistributedDataParallel ddp(net, g);
  ASSERT_EQ(ddp.bucket_indices().size(), 1u);
  manual_seed(200 + static_cast<std::uint64_t>(g.rank()));
  const Tensor x = randn({4, 12}).to(d), y = randint(0, 5, {4}).to(d);
  manual_seed(4);
  TwoHeads plain;
  plain.to(d);
  nn::cross_entropy(plain(x), y).backward();
  nn::cross_entropy(ddp(x), y).backward();

  const auto named = ddp.module().named_parameters();
  const auto theirs = plain.parameters();
  for (std::size_t k = 0; k < named.size(); ++k) {
    const auto& [name, p] = named[k];
    ASSERT_TRUE(p.grad().defined()) << name << ": DDP gives every parameter a gradient";
    const Tensor got = p.grad().cpu();
    if (name.rfind("unused", 0) == 0) {
      EXPECT_TRUE(equal(got, zeros_like(got))) << name << ": no rank computed it, so its average is zero";
      continue;
    }
    Tensor avg = zeros_like(got);
    for (const Tensor& t : gather_from_ranks(theirs[k].grad().cpu())) avg = avg + t;
    avg = avg / static_cast<double>(g.size());
    EXPECT_TRUE(allclose(got, avg, 1e-5, 1e-6)) << name;
  }
}

TEST(DDP, BuffersFollowRankZero) {
  auto& g = world();
  const Device d = dist::device();
  manual_seed(4);
  auto net = std::make_shared<nn::Sequential>(nn::Linear(3, 4), nn::BatchNorm1d(4));
  net->to(d);
  nn::DistributedDataParallel ddp(net, g);
  {
    // Make the ranks' statistics differ after construction.
    NoGradGuard no_grad;
    Tensor rm = net->buffers()[0];
    rm.fill_(static_cast<double>(g.rank() + 1));
  }
  manual_seed(8);
  const Tensor x = randn({6, 3}).to(d);
  ddp(x);  // broadcasts rank 0's statistics, then updates them with the same batch everywhere
  const Tensor rm = net->buffers()[0].cpu();
  expect_same_on_every_rank(rm, "running_mean");
  // 0.9 * rank 0's value (1) + 0.1 * the batch mean.
  const Tensor h = net->named_children()[0].second->forward(x).detach();
  EXPECT_TRUE(allclose(rm, (h.mean({0}) * 0.1f + 0.9f).cpu(), 1e-5, 1e-6));
}

TEST(DDP, DifferentModelsAcrossRanksNameTheFirstDifference) {
  auto& g = world();
  auto net = make_mlp(g.rank() == 1 ? 17 : 16);
  net->to(dist::device());
  if (g.size() == 1) {
    EXPECT_NO_THROW(nn::DistributedDataParallel(net, g));
    return;
  }
  try {
    nn::DistributedDataParallel ddp(net, g);
    ADD_FAILURE() << "expected ValueError on rank " << g.rank();
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("rank 0 has parameter '0.weight' [16, 12] f32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 1 has parameter '0.weight' [17, 12] f32"), std::string::npos) << msg;
  }
  // The group is still usable: both ranks left the check together.
  expect_same_on_every_rank(tensor({1.f}), "a tensor after the error");
}

TEST(DDP, TypedErrors) {
  auto& g = world();
  EXPECT_THROW(nn::DistributedDataParallel(nullptr, g), ValueError);
  EXPECT_THROW(nn::DistributedDataParallel(make_mlp(), g, {.bucket_bytes = 0}), ValueError);
  // A module with its first layer on an accelerator and the rest on the CPU.
  const std::vector<Device> devices = all_devices();
  const auto accelerator = std::find_if(devices.begin(), devices.end(), [](Device d) { return d != cpu(); });
  if (accelerator != devices.end()) {
    auto net = make_mlp();
    net->named_children()[0].second->to(*accelerator);
    EXPECT_THROW(nn::DistributedDataParallel(net, g), ValueError) << "a module on two devices";
  }
}

// Rank 0 cannot write the checkpoint (its folder does not exist): every rank
// raises the same IOError at once, instead of the others waiting at the
// barrier until the watchdog (ANVIL_DIST_TIMEOUT, 60 s under ctest).
TEST(DDP, CheckpointWriteFailureIsAnErrorOnEveryRankAtOnce) {
  auto& g = world();
  manual_seed(12);
  auto net = make_mlp();
  net->to(dist::device());
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  const std::string path = "/nonexistent-anvil-test-folder/ckpt.safetensors";
  ASSERT_FALSE(std::filesystem::exists(std::filesystem::path(path).parent_path()));
  const auto start = std::chrono::steady_clock::now();
  try {
    nn::save_checkpoint(path, *net, opt, {0, 1}, &g);
    ADD_FAILURE() << "expected IOError on rank " << g.rank();
  } catch (const IOError& e) {
    const std::string msg = e.what();
    if (g.size() > 1) {
      EXPECT_NE(msg.find("save_checkpoint: rank 0 could not write '" + path + "': "), std::string::npos) << msg;
    }
    EXPECT_NE(msg.find("cannot create a temporary file"), std::string::npos)
        << "rank 0's own error, on rank " << g.rank() << ": " << msg;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10) << "rank " << g.rank() << " waited for the watchdog";
  // Every rank left save_checkpoint together: the group is still in step.
  expect_same_on_every_rank(tensor({1.f}), "a tensor after the failed save");
}

// ---- launching ranks ------------------------------------------------------------------

std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

bool under_launcher() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

// Runs this binary's `filter` under mpirun -np `ranks` with `env` added; its exit status.
int run_ranks(int ranks, const std::string& filter, const std::string& env = "") {
  // What Open MPI needs as root in a container (tests run as root in CI).
  const std::string cmd =
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_btl_vader_single_copy_mechanism=none ANVIL_DIST_TIMEOUT=60 " +
      env + " mpirun -np " + std::to_string(ranks) + " --bind-to none --oversubscribe " + self_exe() +
      " --gtest_filter='" + filter + "' --gtest_brief=1";
  return std::system(cmd.c_str());
}

// ---- checkpoints across rank counts ----------------------------------------------------

// Trains `steps` global steps from `start` (global batch kGlobalBatch split
// over the world) and saves/loads as the phase says.
void checkpoint_phase(const std::string& phase, const std::string& dir) {
  auto& g = world();
  const Device d = dist::device();
  const Data data = synthetic({12});
  manual_seed(1);
  auto net = make_mlp();
  net->to(d);
  nn::DistributedDataParallel ddp(net, g);
  optim::Adam opt(ddp.module().parameters(), {.lr = 0.01});
  nn::TrainingPosition pos;
  if (phase == "resume") pos = nn::load_checkpoint(dir + "/ckpt.safetensors", ddp.module(), opt);
  DataLoader loader(data.x, data.y,
                    {.batch_size = kGlobalBatch / g.size(),
                     .device = d,
                     .sampler = DistributedSampler(kSamples, g.size(), g.rank(), {.seed = 5})});
  // 4 steps each: saved in the middle of epoch 0 (6 steps per epoch), so
  // the resumed run must continue from the saved step and cross into epoch 1.
  for (int k = 0; k < (phase == "straight" ? 8 : 4); ++k) {
    if (pos.step == loader.size()) pos = {pos.epoch + 1, 0};
    const Batch b = loader.batch(loader.order(pos.epoch), pos.step);
    opt.zero_grad();
    nn::cross_entropy(ddp(b.inputs), b.targets).backward();
    opt.step();
    ++pos.step;
  }
  if (phase == "save") {
    nn::save_checkpoint(dir + "/ckpt.safetensors", ddp.module(), opt, pos, &g);
  } else if (g.rank() == 0) {
    save_safetensors(dir + "/final.safetensors", {{"params", flat_params(ddp.module())}});
  }
  if (g.size() > 1) g.barrier().wait();
}

TEST(CheckpointPhase, RunIfLaunched) {
  const char* phase = std::getenv("ANVIL_TEST_CKPT_PHASE");
  const char* dir = std::getenv("ANVIL_TEST_CKPT_DIR");
  if (phase == nullptr || dir == nullptr) return;  // only a launched phase; see ResumeAcrossRankCounts
  checkpoint_phase(phase, dir);
}

// Phases: save (4 steps), then resume (4 more) with `save_ranks` and
// `resume_ranks` processes; a world of one runs in this process (on
// dist::device()), more through mpirun (each rank on its own device).
Tensor run_save_then_resume(int save_ranks, int resume_ranks, const std::string& dir) {
  auto run = [&](int ranks, const char* phase) {
    if (ranks == 1) return checkpoint_phase(phase, dir);
    const std::string env = std::string("ANVIL_TEST_CKPT_PHASE=") + phase + " ANVIL_TEST_CKPT_DIR=" + dir;
    EXPECT_EQ(run_ranks(ranks, "CheckpointPhase.RunIfLaunched", env), 0) << phase << " with " << ranks << " ranks";
  };
  run(save_ranks, "save");
  run(resume_ranks, "resume");
  return load_safetensors(dir + "/final.safetensors").at("params");
}

TEST(Checkpoint, ResumeAcrossRankCounts) {
  ASSERT_FALSE(under_launcher());
  const auto base = std::filesystem::temp_directory_path() / ("anvil_ddp_ckpt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(base);
  // The reference: 8 steps in one process without a checkpoint.
  const auto straight = base / "straight";
  std::filesystem::create_directories(straight);
  checkpoint_phase("straight", straight.string());
  const Tensor want = load_safetensors((straight / "final.safetensors").string()).at("params");
  std::vector<Tensor> results;
  for (auto [s, r] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}}) {
    const auto dir = base / (std::to_string(s) + "_" + std::to_string(r));
    std::filesystem::create_directories(dir);
    results.push_back(run_save_then_resume(s, r, dir.string()));
    // The checkpoint holds the position.
    const auto meta = read_safetensors_header((dir / "ckpt.safetensors").string()).metadata;
    EXPECT_EQ(meta.at("epoch"), "0");
    EXPECT_EQ(meta.at("step"), "4");
  }
  for (std::size_t k = 0; k < results.size(); ++k)
    EXPECT_TRUE(allclose(results[k], want, 1e-5, 1e-6))
        << "run " << k << " differs from the uninterrupted run by " << (results[k] - want).abs().max().item<float>();
  std::filesystem::remove_all(base);
}

TEST(Checkpoint, OneProcessRoundTripAndErrors) {
  const auto path = std::filesystem::temp_directory_path() / ("anvil_ckpt_" + std::to_string(::getpid()) + ".st");
  manual_seed(9);
  auto net = make_mlp();
  optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  nn::cross_entropy((*net)(randn({4, 12})), randint(0, 5, {4})).backward();
  opt.step();
  nn::save_checkpoint(path.string(), *net, opt, {2, 7});
  manual_seed(10);
  auto other = make_mlp();
  optim::SGD other_opt(other->parameters(), {.lr = 0.1, .momentum = 0.9});
  const auto pos = nn::load_checkpoint(path.string(), *other, other_opt);
  EXPECT_EQ(pos.epoch, 2);
  EXPECT_EQ(pos.step, 7);
  EXPECT_TRUE(equal(flat_params(*other), flat_params(*net)));
  EXPECT_TRUE(equal(other_opt.state_dict().at("momentum.0"), opt.state_dict().at("momentum.0")));
  optim::Adam adam(other->parameters());
  EXPECT_THROW(nn::load_checkpoint(path.string(), *other, adam), ValueError) << "SGD state into Adam";
  auto wrong = make_mlp(15);
  optim::SGD wrong_opt(wrong->parameters(), {.lr = 0.1});
  EXPECT_THROW(nn::load_checkpoint(path.string(), *wrong, wrong_opt), ShapeError);
  save_safetensors(path.string(), {{"w", zeros({2})}});
  EXPECT_THROW(nn::load_checkpoint(path.string(), *other, other_opt), IOError);
  std::filesystem::remove(path);
}

}  // namespace
