// cuDNN's TF32 switch set for a scope and restored after: tests that hold
// CUDA's convolutions or recurrent layers to strict f32 (or to TF32's own
// tolerance) whatever the switch was.
#pragma once

#include "anvil/backends.h"

namespace anvil::testing {

class CudnnTf32Guard {
 public:
  explicit CudnnTf32Guard(bool on) : saved_(backends::cudnn::allow_tf32()) { backends::cudnn::set_allow_tf32(on); }
  ~CudnnTf32Guard() { backends::cudnn::set_allow_tf32(saved_); }
  CudnnTf32Guard(const CudnnTf32Guard&) = delete;
  CudnnTf32Guard& operator=(const CudnnTf32Guard&) = delete;

 private:
  bool saved_;
};

}  // namespace anvil::testing
