// The book's character-level language model pieces in anvil (Dive into Deep
// Learning, "Text Sequences", "Concise Implementation of Recurrent Neural
// Networks", "Gated Recurrent Units"): The Time Machine's corpus and vocabulary,
// its minibatches, the RNNModel over one-hot characters, and gradient clipping.
//
//   const d2l::Corpus c = d2l::load_corpus("examples/data/timemachine.txt", -1);
//   d2l::RNNModel net(static_cast<std::int64_t>(c.chars.size()), 256);   // a GRU; "lstm", "rnn": the others
//
// examples/rnn_language_model.cpp trains it; benchmarks/train (model `gru`)
// times one step of it against the same network in LibTorch (train_torch.cpp).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "anvil/anvil.h"

namespace d2l {

// The book's preprocessing: every run of non-letters becomes one space, each
// line is trimmed and lowercased, and the corpus is the lines' characters.
// The vocabulary is '<unk>' then the characters by falling frequency (ties
// in character order), as d2l.Vocab.
struct Corpus {
  std::vector<std::int64_t> tokens;
  std::vector<char> chars;  // index -> character; 0 is '<unk>'
  std::map<char, std::int64_t> index;
};

inline Corpus load_corpus(const std::string& path, std::int64_t max_tokens) {
  std::ifstream f(path);
  if (!f) throw anvil::IOError("load_corpus: cannot read '" + path + "'; expected The Time Machine's text");
  std::string line, text;
  while (std::getline(f, line)) {
    std::string clean;
    for (char c : line) {
      const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      if (letter)
        clean += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      else if (clean.empty() || clean.back() != ' ')
        clean += ' ';
    }
    const auto b = clean.find_first_not_of(' '), e = clean.find_last_not_of(' ');
    if (b != std::string::npos) text += clean.substr(b, e - b + 1);
  }
  std::map<char, std::int64_t> freq;
  for (char c : text) ++freq[c];
  std::vector<std::pair<char, std::int64_t>> by_freq(freq.begin(), freq.end());
  std::stable_sort(by_freq.begin(), by_freq.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  Corpus c;
  c.chars.push_back('?');
  for (const auto& [ch, n] : by_freq) {
    c.index[ch] = static_cast<std::int64_t>(c.chars.size());
    c.chars.push_back(ch);
  }
  for (char ch : text) c.tokens.push_back(c.index.at(ch));
  if (max_tokens > 0 && static_cast<std::int64_t>(c.tokens.size()) > max_tokens) c.tokens.resize(max_tokens);
  return c;
}

// Minibatches of (X, Y), each [batch, steps], Y = X shifted by one token
// (d2l.seq_data_iter_random / seq_data_iter_sequential): random takes
// subsequences in a shuffled order; sequential keeps neighbouring batches
// contiguous, so the hidden state carries over between them.
inline std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> batches(
    const std::vector<std::int64_t>& corpus, std::int64_t batch_size, std::int64_t steps, bool random,
    std::mt19937_64& rng) {
  std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> out;
  const std::int64_t offset = std::uniform_int_distribution<std::int64_t>(0, steps - 1)(rng);
  const std::int64_t n = static_cast<std::int64_t>(corpus.size());
  if (random) {
    const std::int64_t subseqs = (n - offset - 1) / steps;
    std::vector<std::int64_t> starts;
    for (std::int64_t i = 0; i < subseqs; ++i) starts.push_back(offset + i * steps);
    std::shuffle(starts.begin(), starts.end(), rng);
    for (std::int64_t b = 0; b + batch_size <= subseqs; b += batch_size) {
      std::vector<std::int64_t> x, y;
      for (std::int64_t i = 0; i < batch_size; ++i)
        for (std::int64_t t = 0; t < steps; ++t) {
          x.push_back(corpus[starts[b + i] + t]);
          y.push_back(corpus[starts[b + i] + t + 1]);
        }
      out.emplace_back(std::move(x), std::move(y));
    }
    return out;
  }
  const std::int64_t per_row = (n - offset - 1) / batch_size;  // tokens per row
  for (std::int64_t t0 = 0; t0 + steps <= per_row; t0 += steps) {
    std::vector<std::int64_t> x, y;
    for (std::int64_t i = 0; i < batch_size; ++i)
      for (std::int64_t t = 0; t < steps; ++t) {
        x.push_back(corpus[offset + i * per_row + t0 + t]);
        y.push_back(corpus[offset + i * per_row + t0 + t + 1]);
      }
    out.emplace_back(std::move(x), std::move(y));
  }
  return out;
}

// d2l.RNNModel: one-hot inputs through the recurrent layer, then a Linear
// from every step's hidden state to the vocabulary. The layer is the book's
// GRU, or (cell "lstm", "rnn") an LSTM or a tanh RNN, registered as "rnn".
class RNNModel : public anvil::nn::Module {
 public:
  RNNModel(std::int64_t vocab_size, std::int64_t num_hiddens, const std::string& cell = "gru")
      : vocab_(vocab_size), cell_(cell) {
    if (cell == "gru")
      gru_ = register_module("rnn", anvil::nn::GRU(vocab_size, num_hiddens));
    else if (cell == "lstm")
      lstm_ = register_module("rnn", anvil::nn::LSTM(vocab_size, num_hiddens));
    else if (cell == "rnn")
      rnn_ = register_module("rnn", anvil::nn::RNN(vocab_size, num_hiddens));
    else
      throw anvil::ValueError("RNNModel: unknown cell; expected gru, lstm or rnn, got " + cell);
    linear_ = register_module("linear", anvil::nn::Linear(num_hiddens, vocab_size));
  }
  // What forward returns: logits [steps * batch, vocab] and the new state,
  // {h_n} ({h_n, c_n} for an LSTM).
  struct Output {
    anvil::Tensor logits;
    std::vector<anvil::Tensor> state;
  };
  // tokens [batch, steps]; `state` as forward returned it, or empty for zeros.
  Output forward(const anvil::Tensor& tokens, const std::vector<anvil::Tensor>& state) {
    const anvil::Tensor x =
        (tokens.t().unsqueeze(-1) == anvil::arange(0, vocab_, 1, tokens.device(), anvil::i64)).to(anvil::f32);
    auto at = [&](std::size_t i) { return i < state.size() ? state[i] : anvil::Tensor(); };
    anvil::Tensor y;
    std::vector<anvil::Tensor> next;
    if (lstm_) {
      const anvil::nn::LSTMOutput r = lstm_->forward(x, at(0), at(1));
      y = r.output;
      next = {r.h_n, r.c_n};
    } else {
      const anvil::nn::RNNOutput r = gru_ ? gru_->forward(x, at(0)) : rnn_->forward(x, at(0));
      y = r.output;
      next = {r.h_n};
    }
    return {(*linear_)(y.reshape({-1, y.size(-1)})), next};
  }
  anvil::Tensor forward(const anvil::Tensor& tokens) override { return forward(tokens, {}).logits; }
  std::string name() const override { return "RNNModel"; }
  const std::string& cell() const noexcept { return cell_; }

 private:
  std::int64_t vocab_;
  std::string cell_;
  std::shared_ptr<anvil::nn::GRU> gru_;
  std::shared_ptr<anvil::nn::LSTM> lstm_;
  std::shared_ptr<anvil::nn::RNN> rnn_;
  std::shared_ptr<anvil::nn::Linear> linear_;
};

// d2l.grad_clipping: scales every gradient by theta / norm when the global
// norm exceeds theta. The norm stays on the device (no host sync).
inline void grad_clipping(const std::vector<anvil::Tensor>& params, double theta) {
  anvil::NoGradGuard no_grad;
  anvil::Tensor sq = anvil::zeros({}, params.front().device());
  for (const anvil::Tensor& p : params) sq = sq + anvil::sum(anvil::square(p.grad()));
  const anvil::Tensor scale = anvil::clamp(theta / (anvil::sqrt(sq) + 1e-12), std::nullopt, 1.0);
  for (const anvil::Tensor& p : params) p.grad().mul_(scale);
}

}  // namespace d2l
