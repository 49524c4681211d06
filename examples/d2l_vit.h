// The book's Vision Transformer in anvil (Dive into Deep Learning, "Transformers
// for Vision"): patches embedded by a convolution with stride = patch size, a
// learned class token and positional embedding, pre-norm Transformer encoder
// blocks (nn::TransformerEncoderLayer with norm_first and GELU: the book's
// ViTBlock), and a LayerNorm + Linear head on the class token.
//
//   d2l::ViT net({.img_size = 96, .patch_size = 16});   // [N, 1, 96, 96] -> [N, 10]
//
// examples/vit.cpp trains it; benchmarks/train (model `vit`) times one step of
// it against the same network in LibTorch (train_torch.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "anvil/anvil.h"

namespace d2l {

// The example's sizes: smaller than the book's (512 hiddens, 8 heads) so a CPU
// trains it in minutes; 28x28 images in 7x7 patches unless resized.
struct ViTConfig {
  std::int64_t img_size = 28, patch_size = 7, num_hiddens = 64, mlp_hiddens = 128, num_heads = 4, num_blks = 2;
  double dropout = 0.1;
  std::int64_t in_channels = 1, num_classes = 10;
};

class ViT : public anvil::nn::Module {
 public:
  explicit ViT(const ViTConfig& c)
      : patch_embedding_(register_module("patch_embedding",
                                         anvil::nn::Conv2d(c.in_channels, c.num_hiddens, c.patch_size, c.patch_size))),
        dropout_(register_module("dropout", anvil::nn::Dropout(c.dropout))),
        blks_(register_module("blks", anvil::nn::Sequential())),
        head_(register_module("head", anvil::nn::Sequential(anvil::nn::LayerNorm(c.num_hiddens),
                                                            anvil::nn::Linear(c.num_hiddens, c.num_classes)))) {
    ANVIL_CHECK(c.patch_size > 0 && c.img_size % c.patch_size == 0, anvil::ValueError,
                "ViT: the patch size must divide the image size; expected a divisor of ", c.img_size,
                " (img_size), got patch_size ", c.patch_size);
    const std::int64_t patches = (c.img_size / c.patch_size) * (c.img_size / c.patch_size);
    cls_token_ = register_parameter("cls_token", anvil::zeros({1, 1, c.num_hiddens}));
    anvil::Tensor pos = anvil::empty({1, patches + 1, c.num_hiddens});
    anvil::nn::init::normal_(pos, 0.0, 0.02);
    pos_embedding_ = register_parameter("pos_embedding", pos);
    for (std::int64_t i = 0; i < c.num_blks; ++i)
      blks_->push_back(anvil::nn::TransformerEncoderLayer(c.num_hiddens, c.num_heads, c.mlp_hiddens, c.dropout, "gelu",
                                                          1e-5, /*batch_first=*/true, /*norm_first=*/true));
  }
  anvil::Tensor forward(const anvil::Tensor& x) override {
    anvil::Tensor p = (*patch_embedding_)(x).flatten(2).transpose(1, 2);  // [N, patches, hiddens]
    p = anvil::cat({cls_token_.expand({p.size(0), 1, p.size(2)}), p}, 1);
    p = (*dropout_)(p + pos_embedding_);
    p = (*blks_)(p);
    return (*head_)(p.select(1, 0));
  }
  std::string name() const override { return "ViT"; }

 private:
  std::shared_ptr<anvil::nn::Conv2d> patch_embedding_;
  std::shared_ptr<anvil::nn::Dropout> dropout_;
  std::shared_ptr<anvil::nn::Sequential> blks_, head_;
  anvil::Tensor cls_token_, pos_embedding_;
};

}  // namespace d2l
