// anvil/data.h — datasets and batching.
//
//   anvil::FashionMNIST train(anvil::FashionMNIST::Split::Train);   // Debian's dataset-fashion-mnist
//   anvil::DataLoader loader(train.images(), train.labels(),
//                            {.batch_size = 256, .shuffle = true, .seed = 42, .device = anvil::try_gpu()});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const auto& [x, y] : loader) {   // a new order every epoch
//       // x: f32 [256, 1, 28, 28] and y: i64 [256], both on loader's device
//     }
//
// Datasets live on the host. A DataLoader gathers each batch on the host
// (row copies from the shuffled indices) and moves it to its device with one
// host→device copy per tensor per batch; with `prefetch` the copy of the next
// batch is already queued while the current one is being used.
//
// Files are untrusted input: a truncated or corrupt gzip, a wrong magic
// number, bad dimensions or a short file throw IOError naming the file and
// what was expected versus found. Nothing here aborts.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/device.h"
#include "anvil/tensor.h"

namespace anvil {

// --- IDX files (the MNIST format) ---------------------------------------------------
// Magic 0x00 0x00 <type> <ndims>, then ndims big-endian uint32 sizes, then the
// data in big-endian C order. Types: 0x08 → u8, 0x0C → i32, 0x0D → f32,
// 0x0E → f64 (0x09 int8 and 0x0B int16 are IOError: anvil has no such dtype).
// Gzip-compressed input (as MNIST ships) is recognised by its magic bytes and
// decompressed on the fly; the decompressed size must match the header exactly.

// A CPU tensor with the file's dims and dtype.
Tensor read_idx(const std::string& path);
// The same from bytes in memory (gzip or raw). `source` names them in errors.
Tensor decode_idx(std::span<const std::uint8_t> bytes, std::string_view source = "<memory>");

// --- Fashion-MNIST -------------------------------------------------------------------------
// Zalando's 70,000 28×28 grey-scale images of clothing in 10 classes: 60,000
// to train and 10,000 to test, read from `root`:
//   {train,t10k}-images-idx3-ubyte.gz, {train,t10k}-labels-idx1-ubyte.gz
// (Debian: apt-get install dataset-fashion-mnist).
class FashionMNIST {
 public:
  enum class Split { Train, Test };
  static constexpr std::int64_t kImageSize = 28;
  static constexpr std::int64_t kNumClasses = 10;
  // D2L's names, by label.
  static constexpr std::array<std::string_view, 10> kClassNames{
      "t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot"};

  // $ANVIL_FASHION_MNIST_DIR when set, else /usr/share/datasets/fashion-mnist.
  static std::string default_root();

  // Reads and validates both files of `split` (IOError naming the file on any
  // problem). `flatten` gives images as [N, 784] instead of [N, 1, 28, 28].
  explicit FashionMNIST(Split split, const std::string& root = default_root(), bool flatten = false);

  // f32 in [0, 1] (pixel / 255), [N, 1, 28, 28] or [N, 784]; on the CPU.
  const Tensor& images() const noexcept { return images_; }
  // i64 class indices in [0, 10), [N]; on the CPU.
  const Tensor& labels() const noexcept { return labels_; }
  std::int64_t size() const { return labels_.size(0); }
  Split split() const noexcept { return split_; }

 private:
  Split split_;
  Tensor images_;
  Tensor labels_;
};

// --- DistributedSampler --------------------------------------------------------------------
// This rank's share of a dataset of `dataset_size` samples in a run of
// `num_replicas` ranks (torch.utils.data.DistributedSampler):
//
//   anvil::DistributedSampler sampler(train.size(), dist::world_size(), dist::rank(), {.seed = 42});
//   anvil::DataLoader loader(train.images(), train.labels(), {.batch_size = 128, .sampler = sampler});
//
// Every rank draws the same permutation of [0, N) for a given (seed, epoch)
// (the DataLoader's portable shuffle: one replica gives exactly the order of
// a DataLoader with shuffle and the same seed), then takes every
// num_replicas-th index starting at its rank, so the shards are disjoint and
// together are the epoch's order. When N is not a multiple of num_replicas,
// the order is padded by repeating its first indices (every rank gets
// ceil(N/R)), or with drop_last its tail is dropped (floor(N/R) each). The
// epoch is an argument of indices(): a DataLoader passes its own epoch
// counter (which advances every begin(); set_epoch() to resume), so no run
// silently repeats one order.
struct DistributedSamplerOptions {
  bool shuffle = true;
  std::uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  // ValueError for num_replicas < 1, a rank outside [0, num_replicas) or a
  // negative size.
  DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank, DistributedSamplerOptions options = {});

  // This rank's sample indices in epoch `epoch` (>= 0), num_samples() of them.
  std::vector<std::int64_t> indices(std::int64_t epoch) const;
  std::int64_t num_samples() const noexcept;  // per rank and epoch
  std::int64_t total_size() const noexcept { return num_samples() * num_replicas_; }
  std::int64_t dataset_size() const noexcept { return dataset_size_; }
  int num_replicas() const noexcept { return num_replicas_; }
  int rank() const noexcept { return rank_; }
  const DistributedSamplerOptions& options() const noexcept { return options_; }

 private:
  std::int64_t dataset_size_;
  int num_replicas_, rank_;
  DistributedSamplerOptions options_;
};

// --- DataLoader ------------------------------------------------------------------------

struct DataLoaderOptions {
  std::int64_t batch_size = 1;
  // Reshuffle every epoch; the order of epoch e depends only on (seed, e), on
  // every machine and standard library.
  bool shuffle = false;
  std::uint64_t seed = 0;
  // Drop the last batch when it is smaller than batch_size.
  bool drop_last = false;
  // Where batches are delivered.
  Device device = cpu();
  // Queue the copy of the next batch to `device` before handing out the
  // current one, so the transfer overlaps the work on the current batch. On
  // the CPU there is no copy to overlap and batches are gathered on demand.
  bool prefetch = true;
  // Draw each epoch's samples from this rank's shard (then `shuffle` must be
  // false: the sampler shuffles). Its dataset size must be the loader's N.
  std::optional<DistributedSampler> sampler;
};

struct Batch {
  Tensor inputs;   // [b, ...inputs.shape[1:]]
  Tensor targets;  // [b, ...targets.shape[1:]]
};

// Batches of (inputs[i], targets[i]) pairs over the first dimension of two
// tensors. Each begin() starts the next epoch (0, 1, 2, …; see set_epoch).
// The loader keeps host copies of both tensors (no copy when they already are
// contiguous CPU tensors); do not modify those while iterating.
// Not thread-safe: one loader is iterated by one thread at a time.
class DataLoader {
 public:
  DataLoader(const Tensor& inputs, const Tensor& targets, DataLoaderOptions options = {});

  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    const Batch& operator*() const noexcept { return current_; }
    const Batch* operator->() const noexcept { return &current_; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    std::int64_t index() const noexcept { return index_; }  // of the current batch in its epoch
    friend bool operator==(const Iterator& it, std::default_sentinel_t) noexcept { return it.index_ >= it.count_; }

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, std::shared_ptr<const std::vector<std::int64_t>> order);
    const DataLoader* loader_ = nullptr;
    std::shared_ptr<const std::vector<std::int64_t>> order_;
    std::int64_t index_ = 0;
    std::int64_t count_ = 0;
    Batch current_;
    Batch next_;
    bool has_next_ = false;
  };

  Iterator begin();
  std::default_sentinel_t end() const noexcept { return {}; }

  std::int64_t size() const noexcept;                     // batches per epoch
  std::int64_t num_samples() const noexcept;              // per epoch: N, or the sampler's share
  std::int64_t epoch() const noexcept { return epoch_; }  // what the next begin() starts
  void set_epoch(std::int64_t epoch);
  const DataLoaderOptions& options() const noexcept { return options_; }

  // The sample order of `epoch`: a permutation of [0, N) (the identity
  // without shuffle), or the sampler's indices for `epoch`.
  std::vector<std::int64_t> order(std::int64_t epoch) const;
  // Batch `index` (0-based) of an epoch's order, on the loader's device.
  Batch batch(const std::vector<std::int64_t>& order, std::int64_t index) const;

 private:
  Tensor gather(const Tensor& host, const std::int64_t* indices, std::int64_t count) const;

  Tensor inputs_;   // contiguous, CPU
  Tensor targets_;  // contiguous, CPU
  DataLoaderOptions options_;
  std::int64_t epoch_ = 0;
};

}  // namespace anvil
