// benchmarks/train/train_worker.h — the loop every training worker runs.
//
//   int main() { return anvil_train_bench::serve(info_line, make_trainer); }
//
// `bench_train` (train_compare.cpp) starts one worker process per library
// (anvil, LibTorch; why processes: Note [One process per BLAS] in
// benchmarks/CMakeLists.txt) and drives them over stdin/stdout, one request
// and one reply per line:
//
//   info                              -> ok <one line about the library and its threads>
//   setup <model> <seed> <data-dir>   -> ok | error <what>    builds the model and optimiser, loads the data
//   epoch                             -> ok <seconds> <mean train loss> <CPU seconds>   (s/step models: per step;
//                                        CPU seconds: all the process's threads together)
//   eval                              -> ok <test accuracy>
//   quit
//
// <model> is `mlp`, `lenet`, `resnet18`, `gru`, `lstm` or `vit`; <data-dir> holds the
// raw dumps train_compare writes (see Note [Same tensors] there). For `mlp`
// and `lenet` every epoch reshuffles the training set; the clock brackets the
// whole epoch: batching, forward, loss, backward, SGD step. The others
// are timed per step: an "epoch" is kStepsPerRound training steps on a fixed
// batch, reported as seconds per step, and its loss is the last step's.
//   resnet18  the book's ResNet-18 of examples/d2l_resnet.h (28x28 inputs) on
//             the first kResnetBatch training images, SGD lr 0.05; eval scores
//             the first kResnetBatch test images.
//   vit       the ViT of examples/d2l_vit.h at examples/vit.cpp's sizes
//             (28x28 in 7x7 patches, 64 hiddens, 4 heads, MLP 128, 2 blocks,
//             dropout 0.1) on the first kVitBatch training images, SGD lr 0.1;
//             eval scores the first kVitBatch test images.
//   gru       the GRU language model of examples/d2l_rnn.h at
//             examples/rnn_language_model.cpp's sizes (one-hot characters,
//             256 hiddens) on one batch of 32 sequences of 35 characters of
//             The Time Machine (`text-x`, `text-y` [32, 35], vocabulary size
//             in `text-vocab-size`), from a zero state; cross-entropy,
//             gradients clipped to norm 1, SGD lr 1; eval is the next-character
//             accuracy on that batch.
//   lstm      the same with an LSTM (`--cell lstm`).
//
// Workers take `--threads N` (both libraries: intra-op threads; LibTorch also
// `--blas-threads N` for its own pthread OpenBLAS) for the equal-thread rows.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "timing.h"  // tools/bench/timing.h (anvil_bench_timing)

namespace anvil_train_bench {

inline constexpr std::int64_t kBatchSize = 256;
inline constexpr double kLearningRate = 0.1;
inline constexpr std::int64_t kEvalBatchSize = 1024;
inline constexpr std::int64_t kResnetBatch = 32;
inline constexpr double kResnetLearningRate = 0.05;
// examples/vit.cpp's batch and learning rate; its sizes are d2l::ViTConfig's
// defaults (train_anvil.cpp checks that they match these).
inline constexpr std::int64_t kVitBatch = 128;
inline constexpr double kVitLearningRate = 0.1;
inline constexpr std::int64_t kVitImageSize = 28, kVitPatchSize = 7, kVitHiddens = 64, kVitMlpHiddens = 128,
                              kVitHeads = 4, kVitBlocks = 2;
inline constexpr double kVitDropout = 0.1;
// examples/rnn_language_model.cpp's defaults.
inline constexpr std::int64_t kRnnBatch = 32, kRnnSteps = 35, kRnnHiddens = 256;
inline constexpr double kRnnLearningRate = 1.0, kRnnClipNorm = 1.0;

// Training steps in one timed round of the s/step models (resnet18, vit,
// gru, lstm), back to back as a training loop runs them. A lone step after the
// other workers' turns measured what they left in the caches as much as the
// step itself: on the 2-core Zen 4 anvil's ResNet-18 step at 2 threads took
// 0.35-0.42 s in a run of four or six workers against 0.27-0.29 s alone or
// beside one.
inline constexpr int kStepsPerRound = 5;

// One library's model, optimiser and data.
class Trainer {
 public:
  virtual ~Trainer() = default;
  // One epoch over the reshuffled training set (mlp, lenet) or
  // steps_per_epoch() steps on the fixed batch; returns the mean loss, or
  // the last step's.
  virtual double train_epoch() = 0;
  // How many steps train_epoch() takes when its time is reported per step.
  virtual int steps_per_epoch() const { return 1; }
  virtual double test_accuracy() = 0;
};

using MakeTrainer =
    std::function<std::unique_ptr<Trainer>(const std::string& model, std::uint64_t seed, const std::string& data_dir)>;

// The raw dumps: `<name>.bin`, native-endian, C order; sizes in `<name>.shape`.
inline std::vector<std::int64_t> read_shape(const std::string& dir, const std::string& name) {
  std::ifstream in(dir + "/" + name + ".shape");
  if (!in) throw std::runtime_error("cannot open " + dir + "/" + name + ".shape");
  std::vector<std::int64_t> shape;
  for (std::int64_t d; in >> d;) shape.push_back(d);
  return shape;
}

inline std::vector<char> read_bytes(const std::string& dir, const std::string& name, std::size_t expected) {
  std::ifstream in(dir + "/" + name + ".bin", std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + dir + "/" + name + ".bin");
  std::vector<char> bytes(expected);
  in.read(bytes.data(), static_cast<std::streamsize>(expected));
  if (static_cast<std::size_t>(in.gcount()) != expected || in.peek() != std::char_traits<char>::eof())
    throw std::runtime_error(dir + "/" + name + ".bin: expected " + std::to_string(expected) + " bytes");
  return bytes;
}

inline int serve(const std::string& info, const MakeTrainer& make) {
  std::ios::sync_with_stdio(false);
  std::unique_ptr<Trainer> trainer;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string command;
    in >> command;
    if (command == "quit") break;
    try {
      if (command == "info") {
        std::cout << "ok " << info << std::endl;
      } else if (command == "setup") {
        std::string model, dir;
        std::uint64_t seed = 0;
        in >> model >> seed >> dir;
        trainer = nullptr;  // free the previous model and data first
        trainer = make(model, seed, dir);
        std::cout << "ok" << std::endl;
      } else if (command == "epoch" || command == "eval") {
        if (!trainer) throw std::runtime_error(command + " before setup");
        if (command == "eval") {
          std::cout << "ok " << trainer->test_accuracy() << std::endl;
        } else {
          double loss = 0;
          const double cpu_before = anvil::bench::process_cpu_seconds();
          const double seconds = anvil::bench::host_seconds([&] { loss = trainer->train_epoch(); });
          const double cpu = anvil::bench::process_cpu_seconds() - cpu_before;
          const int steps = trainer->steps_per_epoch();
          std::cout << "ok " << seconds / steps << " " << loss << " " << cpu / steps << std::endl;
        }
      } else {
        std::cout << "error unknown command '" << command << "'" << std::endl;
      }
    } catch (const std::exception& e) {
      std::string what = e.what();
      for (auto& c : what)
        if (c == '\n') c = ' ';
      std::cout << "error " << what << std::endl;
    }
  }
  return 0;
}

}  // namespace anvil_train_bench
