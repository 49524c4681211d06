// Module::clone: a deep copy of a module, each layer building its twin with
// its own settings (see Module::clone in anvil/nn.h).
#include <string>

#include "anvil/autograd.h"
#include "anvil/nn.h"
#include "anvil/nn/sequence.h"

namespace anvil::nn {

namespace {

// The training flags of `from`'s tree onto `to`'s, child by child (train()
// would set one flag on the whole subtree).
void copy_training_flags(const Module& from, Module& to) {
  to.train(from.is_training());
  const auto a = from.named_children();
  const auto b = to.named_children();
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) copy_training_flags(*a[i].second, *b[i].second);
}

}  // namespace

std::shared_ptr<Module> Module::clone(std::optional<Device> device) const {
  std::shared_ptr<Module> twin = clone_impl(device);
  ANVIL_CHECK(twin != nullptr && twin.get() != this, ValueError, "clone: ", name(), "'s clone_impl returned ",
              twin ? "the module itself" : "null", "; expected a new module");
  copy_training_flags(*this, *twin);
  return twin;
}

std::shared_ptr<Module> Module::clone_impl(std::optional<Device>) const {
  throw NotSupported(detail::cat("clone: ", name(),
                                 " does not know how to copy itself; expected a module that overrides clone_impl, "
                                 "e.g. `return clone_into(std::make_shared<MyNet>(<its constructor arguments>), "
                                 "device);` (anvil/nn.h), or give nn::DataParallel a function that builds one"));
}

void Module::copy_state_into(Module& fresh, std::optional<Device> device) const {
  auto copy = [&](const char* what, const std::vector<std::pair<std::string, Tensor>>& mine,
                  const std::vector<std::pair<std::string, Tensor>>& theirs) {
    ANVIL_CHECK(mine.size() == theirs.size(), ValueError, "clone: the twin of ", name(), " has ", theirs.size(), " ",
                what, "; expected ", mine.size(), " as the original has");
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const auto& [n, src] = mine[i];
      const auto& [tn, dst] = theirs[i];
      ANVIL_CHECK(n == tn && src.shape() == dst.shape(), ValueError, "clone: the twin of ", name(), " differs at ",
                  what, " ", i, "; expected '", n, "' ", src.shape(), ", got '", tn, "' ", dst.shape());
      // copy_to always allocates: the twin never shares the original's storage.
      dst.set_data(src.detach().copy_to(device.value_or(src.device())));
      dst.set_grad({});
    }
  };
  NoGradGuard no_grad;
  copy("parameters", named_parameters(), fresh.named_parameters());
  copy("buffers", named_buffers(), fresh.named_buffers());
}

// --- the layers' twins: each built by its constructor from its settings ------------------
std::shared_ptr<Module> Linear::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<Linear>(in_, out_, b_.defined()), device);
}

std::shared_ptr<Module> Sequential::clone_impl(std::optional<Device> device) const {
  auto twin = std::make_shared<Sequential>();
  for (const auto& [n, child] : named_children()) twin->add(n, child->clone(device));
  return twin;
}

std::shared_ptr<Module> Softmax::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<Softmax>(dim_), device);
}
std::shared_ptr<Module> Flatten::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<Flatten>(start_, end_), device);
}
std::shared_ptr<Module> Dropout::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<Dropout>(p_), device);
}
std::shared_ptr<Module> Conv2d::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<Conv2d>(in_, out_, k_, stride_, padding_, dilation_, groups_, b_.defined()),
                    device);
}
std::shared_ptr<Module> Conv1d::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<Conv1d>(in_, out_, k_, stride_, padding_, dilation_, groups_, b_.defined()),
                    device);
}
std::shared_ptr<Module> MaxPool2d::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<MaxPool2d>(k_, stride_, padding_), device);
}
std::shared_ptr<Module> AvgPool2d::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<AvgPool2d>(k_, stride_, padding_), device);
}
std::shared_ptr<Module> AdaptiveAvgPool2d::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<AdaptiveAvgPool2d>(size_), device);
}
std::shared_ptr<Module> AdaptiveMaxPool2d::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<AdaptiveMaxPool2d>(size_), device);
}
std::shared_ptr<Module> Upsample::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<Upsample>(options_), device);
}
std::shared_ptr<Module> BatchNorm1d::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<BatchNorm1d>(features_, eps_, momentum_), device);
}
std::shared_ptr<Module> BatchNorm2d::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<BatchNorm2d>(features_, eps_, momentum_, activation_), device);
}

std::shared_ptr<Module> Embedding::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<Embedding>(num_, dim_), device);
}
std::shared_ptr<Module> LayerNorm::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<LayerNorm>(shape_, eps_, w_.defined()), device);
}
std::shared_ptr<Module> RecurrentBase::clone_impl(std::optional<Device> device) const {
  switch (cell_) {
    case Cell::Tanh:
    case Cell::ReLU:
      return clone_into(std::make_shared<RNN>(input_, hidden_, layers_, cell_ == Cell::ReLU ? "relu" : "tanh", bias_,
                                              batch_first_, dropout_),
                        device);
    case Cell::GRU:
      return clone_into(std::make_shared<GRU>(input_, hidden_, layers_, bias_, batch_first_, dropout_), device);
    case Cell::LSTM:
      return clone_into(std::make_shared<LSTM>(input_, hidden_, layers_, bias_, batch_first_, dropout_), device);
  }
  ANVIL_ASSERT(false, "clone: unknown recurrent cell");
  return nullptr;
}
std::shared_ptr<Module> MultiheadAttention::clone_impl(std::optional<Device> device) const {
  return clone_into(std::make_shared<MultiheadAttention>(embed_, heads_, dropout_, in_b_.defined(), batch_first_),
                    device);
}
std::shared_ptr<Module> TransformerEncoderLayer::clone_impl(std::optional<Device> device) const {
  return clone_into(
      std::make_shared<TransformerEncoderLayer>(d_model_, nhead_, ff_, dropout_->p(), gelu_ ? "gelu" : "relu",
                                                norm1_->eps(), self_attn_->batch_first(), norm_first_),
      device);
}

}  // namespace anvil::nn
