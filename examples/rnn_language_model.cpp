// The book's character-level language model ("Concise Implementation of
// Recurrent Neural Networks" and "Gated Recurrent Units", D2L §8.6/§9.1):
// a GRU over one-hot characters of H. G. Wells' The Time Machine, trained on
// try_gpu() unless --device says otherwise, with SGD (lr 1) and gradient
// clipping at norm 1, minibatches of 32 sequences of 35 steps. Prints the
// perplexity and tokens/s per epoch, samples text after "time traveller",
// and writes the curve to rnn_lm_curve.csv (and .png with gnuplot).
//
//   rnn_language_model                           # GRU, 500 epochs as the book
//   rnn_language_model --cell lstm               # the same with an LSTM (or rnn: tanh)
//   rnn_language_model --epochs 20 --device cpu --random-iter
//   rnn_language_model --max-tokens 10000 --epochs 30 --expect-perplexity 8   # a quick check (ctest)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "d2l_curves.h"
#include "d2l_flags.h"
#include "d2l_rnn.h"
#include "d2l_train.h"

using namespace anvil;

namespace {

struct Args {
  int epochs = 500;
  std::string device, cell = "gru";
  std::int64_t num_hiddens = 256, batch_size = 32, num_steps = 35, max_tokens = -1;
  double lr = 1.0;
  bool random_iter = false;
  std::uint64_t seed = 0;
  double expect_perplexity = 0;  // > 0: exit 1 unless the last epoch reaches it
  std::string data = ANVIL_EXAMPLES_DIR "/data/timemachine.txt", out_dir = ".";
};

Args parse(int argc, char** argv) {
  Args a;
  d2l::Flags("rnn_language_model")
      .add("--epochs", a.epochs)
      .add("--device", a.device, "cpu|opencl:0|cuda:0")
      .add("--cell", a.cell, "gru|lstm|rnn")
      .add("--num-hiddens", a.num_hiddens)
      .add("--lr", a.lr)
      .add("--batch-size", a.batch_size)
      .add("--num-steps", a.num_steps)
      .add("--max-tokens", a.max_tokens, "N")
      .add("--random-iter", a.random_iter)
      .add("--seed", a.seed)
      .add("--expect-perplexity", a.expect_perplexity, "P")
      .add("--data", a.data, "PATH")
      .add("--out-dir", a.out_dir)
      .parse(argc, argv);
  return a;
}

std::string predict(const std::string& prefix, int num_preds, d2l::RNNModel& net, const d2l::Corpus& c, Device d) {
  NoGradGuard no_grad;
  std::vector<std::int64_t> out{c.index.at(prefix[0])};
  std::vector<Tensor> state;
  auto step = [&](std::int64_t token) {
    d2l::RNNModel::Output r = net.forward(tensor(std::vector<std::int64_t>{token}, Shape{1, 1}, d), state);
    state = r.state;
    return r.logits;
  };
  for (std::size_t i = 1; i < prefix.size(); ++i) {  // warm-up: feed the prefix
    step(out.back());
    out.push_back(c.index.at(prefix[i]));
  }
  for (int i = 0; i < num_preds; ++i) out.push_back(argmax(step(out.back()), 1).item<std::int64_t>());
  std::string s;
  for (std::int64_t t : out) s += c.chars[static_cast<std::size_t>(t)];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    const Device device = d2l::device_from_flag(args.device);
    const d2l::Corpus corpus = d2l::load_corpus(args.data, args.max_tokens);
    const auto vocab = static_cast<std::int64_t>(corpus.chars.size());
    std::cout << "device: " << device << "\ncorpus: " << corpus.tokens.size() << " tokens, vocabulary " << vocab
              << "\n";
    manual_seed(args.seed);
    d2l::RNNModel net(vocab, args.num_hiddens, args.cell);
    net.to(device);
    std::cout << net << "\n";
    optim::SGD opt(net.parameters(), {.lr = args.lr});
    std::mt19937_64 rng(args.seed);
    std::vector<std::vector<double>> rows;
    double ppl = 0;
    for (int epoch = 1; epoch <= args.epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      Tensor loss_sum = zeros({}, device);
      std::vector<Tensor> state;
      std::int64_t tokens = 0;
      for (const auto& [xs, ys] : d2l::batches(corpus.tokens, args.batch_size, args.num_steps, args.random_iter, rng)) {
        const Tensor x = tensor(xs, Shape{args.batch_size, args.num_steps}, device);
        const Tensor y = tensor(ys, Shape{args.batch_size, args.num_steps}, device);
        // Sequential batches continue the previous ones: keep the state but
        // not its graph. Random batches start from zeros.
        if (args.random_iter) state.clear();
        for (Tensor& s : state) s = s.detach();
        opt.zero_grad();
        const d2l::RNNModel::Output r = net.forward(x, state);
        state = r.state;
        const Tensor l = cross_entropy(r.logits, y.t().reshape({-1}));
        l.backward();
        d2l::grad_clipping(net.parameters(), 1.0);
        opt.step();
        NoGradGuard no_grad;
        loss_sum += l.detach() * static_cast<double>(y.numel());
        tokens += y.numel();
      }
      if (tokens == 0) throw ValueError("the corpus is shorter than one minibatch");
      ppl = std::exp(loss_sum.item<double>() / static_cast<double>(tokens));
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rows.push_back({static_cast<double>(epoch), ppl, static_cast<double>(tokens) / secs});
      if (epoch == 1 || epoch % 10 == 0 || epoch == args.epochs) {
        std::printf("epoch %d: perplexity %.2f, %.0f tokens/s on %s\n", epoch, ppl, static_cast<double>(tokens) / secs,
                    device.str().c_str());
        std::cout << "  " << predict("time traveller", 50, net, corpus, device) << "\n";
        std::fflush(stdout);
      }
    }
    std::cout << "perplexity " << ppl << "\n";
    std::cout << predict("time traveller", 50, net, corpus, device) << "\n";
    std::cout << predict("traveller", 50, net, corpus, device) << "\n";
    const std::string csv = args.out_dir + "/rnn_lm_curve.csv";
    d2l::write_csv(csv, "epoch,perplexity,tokens_per_s", rows);
    d2l::plot(csv, args.out_dir + "/rnn_lm_curve.png",
              args.cell + " language model on The Time Machine (" + device.str() + ")", "epoch", {{2, "perplexity"}});
    if (args.expect_perplexity > 0 && !(ppl <= args.expect_perplexity)) {
      std::cerr << "rnn_language_model: perplexity " << ppl << " after " << args.epochs
                << " epochs; expected <= " << args.expect_perplexity << "\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "rnn_language_model: " << e.what() << "\n";
    return 1;
  }
}
