// The command line that the data-parallel Fashion-MNIST programs share
// (examples/train_distributed.cpp, benchmarks/train/ddp_anvil.cpp): the
// model, the epochs, the global batch and a subset of the training set.
//
//   d2l::DdpArgs a{.model = "lenet", .epochs = 2};   // the program's defaults
//   d2l::Flags flags("train_distributed");
//   d2l::add_ddp_flags(flags, a).add("--lr", lr);
//   flags.parse(argc, argv);
//   d2l::check_ddp_args(a);
#pragma once

#include <cstdint>
#include <string>

#include "anvil/error.h"
#include "d2l_flags.h"

namespace d2l {

struct DdpArgs {
  std::string model = "lenet";  // mlp | lenet
  int epochs = 2;
  std::int64_t batch_size = 256;  // the global batch: each of R ranks takes batch_size / R of it
  std::int64_t train_subset = 0;  // the first N training samples; 0: all
};

// --model, --epochs, --batch-size and --train-subset, into `a`.
inline Flags& add_ddp_flags(Flags& flags, DdpArgs& a) {
  return flags.add("--model", a.model, "mlp|lenet")
      .add("--epochs", a.epochs)
      .add("--batch-size", a.batch_size)
      .add("--train-subset", a.train_subset, "N");
}

// After parsing: ValueError unless --model names one of the two models.
inline void check_ddp_args(const DdpArgs& a) {
  if (a.model != "mlp" && a.model != "lenet")
    throw anvil::ValueError("--model must be mlp or lenet; got '" + a.model + "'");
}

}  // namespace d2l
