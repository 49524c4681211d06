#include <numeric>

#include "anvil/autograd.h"
#include "anvil/data.h"
#include "anvil/error.h"
#include "anvil/ops.h"
#include "data/shuffle.h"

namespace anvil {

namespace {

constexpr std::string_view kOp = "DataLoader";

}  // namespace

DataLoader::DataLoader(const Tensor& inputs, const Tensor& targets, DataLoaderOptions options) : options_(options) {
  ANVIL_CHECK(inputs.defined() && targets.defined(), ValueError, kOp,
              ": inputs and targets must be defined tensors; got an undefined ",
              inputs.defined() ? "targets" : "inputs");
  ANVIL_CHECK(inputs.dim() >= 1 && targets.dim() >= 1, ShapeError, kOp,
              ": inputs and targets need a first (sample) dimension; expected at least 1-D, got ", inputs.shape(),
              " and ", targets.shape());
  ANVIL_CHECK(inputs.size(0) == targets.size(0), ShapeError, kOp,
              ": inputs and targets must hold the same number of samples; expected equal first dims, got ",
              inputs.shape(), " and ", targets.shape());
  ANVIL_CHECK(options.batch_size >= 1, ValueError, kOp, ": batch_size must be positive; expected >= 1, got ",
              options.batch_size);
  if (options_.sampler) {
    ANVIL_CHECK(!options_.shuffle, ValueError, kOp,
                ": a sampler and shuffle = true are exclusive; expected shuffle = false with a sampler (it shuffles), "
                "got both; set shuffle in DistributedSamplerOptions");
    ANVIL_CHECK(options_.sampler->dataset_size() == inputs.size(0), ValueError, kOp,
                ": the sampler was made for another dataset size; expected ", inputs.size(0), " samples, got ",
                options_.sampler->dataset_size());
  }
  // Batches are gathered on the host: keep dense host copies (none when the
  // tensors already are).
  inputs_ = inputs.contiguous().cpu().contiguous();
  targets_ = targets.contiguous().cpu().contiguous();
}

std::int64_t DataLoader::num_samples() const noexcept {
  return options_.sampler ? options_.sampler->num_samples() : inputs_.shape()[0];
}

std::int64_t DataLoader::size() const noexcept {
  const std::int64_t n = num_samples();
  const std::int64_t b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::set_epoch(std::int64_t epoch) {
  ANVIL_CHECK(epoch >= 0, ValueError, kOp, ": set_epoch: expected a non-negative epoch, got ", epoch);
  epoch_ = epoch;
}

std::vector<std::int64_t> DataLoader::order(std::int64_t epoch) const {
  if (options_.sampler) return options_.sampler->indices(epoch);
  std::vector<std::int64_t> order(static_cast<std::size_t>(num_samples()));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!options_.shuffle) return order;
  detail::shuffle_for_epoch(order, options_.seed, epoch);
  return order;
}

Tensor DataLoader::gather(const Tensor& host, const std::int64_t* indices, std::int64_t count) const {
  // The CPU backend's index_select copies dense rows block by block, on two
  // threads from 128 KiB (scattered rows wait on memory latency).
  NoGradGuard no_grad;
  return index_select(host, 0, from_host(indices, Shape({count}), i64, cpu()));
}

Batch DataLoader::batch(const std::vector<std::int64_t>& order, std::int64_t index) const {
  ANVIL_CHECK(static_cast<std::int64_t>(order.size()) == num_samples(), ValueError, kOp,
              ": batch: the order must list every sample of the epoch; expected ", num_samples(), " indices, got ",
              order.size());
  ANVIL_CHECK(index >= 0 && index < size(), IndexError, kOp, ": batch index out of range; expected [0, ", size(),
              "), got ", index);
  const std::int64_t start = index * options_.batch_size;
  const std::int64_t count = std::min(options_.batch_size, num_samples() - start);
  const std::int64_t* indices = order.data() + start;
  // One host→device copy per tensor per batch.
  return Batch{gather(inputs_, indices, count).to(options_.device),
               gather(targets_, indices, count).to(options_.device)};
}

DataLoader::Iterator DataLoader::begin() {
  auto order = std::make_shared<const std::vector<std::int64_t>>(this->order(epoch_));
  ++epoch_;
  return Iterator(this, std::move(order));
}

DataLoader::Iterator::Iterator(const DataLoader* loader, std::shared_ptr<const std::vector<std::int64_t>> order)
    : loader_(loader), order_(std::move(order)), count_(loader->size()) {
  if (count_ == 0) return;
  current_ = loader_->batch(*order_, 0);
  if (loader_->options_.prefetch && !loader_->options_.device.is_cpu() && count_ > 1) {
    next_ = loader_->batch(*order_, 1);
    has_next_ = true;
  }
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ANVIL_CHECK(loader_ != nullptr && index_ < count_, IndexError, kOp,
              ": iterator advanced past the end of the epoch; expected index < ", count_, ", got ", index_);
  ++index_;
  if (index_ >= count_) {
    current_ = Batch{};
    next_ = Batch{};
    has_next_ = false;
    return *this;
  }
  if (has_next_) {
    current_ = std::move(next_);
    next_ = Batch{};
    has_next_ = false;
  } else {
    current_ = loader_->batch(*order_, index_);
  }
  // See DataLoaderOptions::prefetch: queue the next copy before this batch is used.
  if (loader_->options_.prefetch && !loader_->options_.device.is_cpu() && index_ + 1 < count_) {
    next_ = loader_->batch(*order_, index_ + 1);
    has_next_ = true;
  }
  return *this;
}

}  // namespace anvil

namespace anvil {

// --- DistributedSampler --------------------------------------------------------------------

DistributedSampler::DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank,
                                       DistributedSamplerOptions options)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  constexpr std::string_view op = "DistributedSampler";
  ANVIL_CHECK(num_replicas >= 1, ValueError, op, ": expected num_replicas >= 1, got ", num_replicas);
  ANVIL_CHECK(rank >= 0 && rank < num_replicas, ValueError, op, ": rank out of range; expected [0, ", num_replicas,
              "), got ", rank);
  ANVIL_CHECK(dataset_size >= 0, ValueError, op, ": expected a dataset size >= 0, got ", dataset_size);
}

std::int64_t DistributedSampler::num_samples() const noexcept {
  const std::int64_t r = num_replicas_;
  return options_.drop_last ? dataset_size_ / r : (dataset_size_ + r - 1) / r;
}

std::vector<std::int64_t> DistributedSampler::indices(std::int64_t epoch) const {
  ANVIL_CHECK(epoch >= 0, ValueError, "DistributedSampler: indices: expected an epoch >= 0, got ", epoch);
  std::vector<std::int64_t> order(static_cast<std::size_t>(dataset_size_));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (options_.shuffle) detail::shuffle_for_epoch(order, options_.seed, epoch);
  const auto total = static_cast<std::size_t>(total_size());
  if (order.size() > total) {
    order.resize(total);  // drop_last: the tail that does not divide evenly
  } else {
    // Pad by repeating the order from its start (again and again when N < R).
    for (std::size_t i = 0; order.size() < total; ++i) order.push_back(order[i]);
  }
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(num_samples()));
  for (std::size_t i = static_cast<std::size_t>(rank_); i < total; i += static_cast<std::size_t>(num_replicas_))
    mine.push_back(order[i]);
  return mine;
}

}  // namespace anvil
