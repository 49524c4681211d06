// benchmarks/ops_bench.cpp — per-op timings of anvil alone, Google Benchmark style.
//
//   build-bench/benchmarks/bench_ops --benchmark_filter='add'
//
// The comparison with the peers is bench_compare; this is for looking at one
// op while changing it. Case names follow the test case ids
// (`add(shape=[2,3],dtype=f32)`).
#include <anvil/anvil.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

namespace {

std::string id(const char* op, std::int64_t rows, std::int64_t cols) {
  return std::string(op) + "(shape=[" + std::to_string(rows) + "," + std::to_string(cols) + "],dtype=f32)";
}

void set_bytes(benchmark::State& state, const anvil::Tensor& x, int arrays) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * arrays *
                          static_cast<std::int64_t>(x.nbytes()));
}

void binary(benchmark::State& state, anvil::Tensor (*op)(const anvil::Tensor&, const anvil::Tensor&), std::int64_t rows,
            std::int64_t cols) {
  const auto a = anvil::rand({rows, cols});
  const auto b = anvil::rand({rows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(op(a, b));
  set_bytes(state, a, 3);
}

void unary(benchmark::State& state, anvil::Tensor (*op)(const anvil::Tensor&), std::int64_t rows, std::int64_t cols) {
  const auto a = anvil::rand({rows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(op(a));
  set_bytes(state, a, 2);
}

void reduce(benchmark::State& state, std::int64_t rows, std::int64_t cols) {
  const auto a = anvil::rand({rows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(anvil::sum(a));
  set_bytes(state, a, 1);
}

void matmul(benchmark::State& state, std::int64_t n) {
  const auto a = anvil::rand({n, n});
  const auto b = anvil::rand({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(anvil::matmul(a, b));
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(n * n * n), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Attention's scores over head views (Note [Two-level batches]): q and k
// [N, L, h, d] seen as [N, h, L, d], q @ k^T, as MultiheadAttention makes them.
void head_scores(benchmark::State& state, std::int64_t n, std::int64_t len, std::int64_t heads, std::int64_t d) {
  const auto q = anvil::rand({n, len, heads, d}).transpose(1, 2);
  const auto k = anvil::rand({n, len, heads, d}).transpose(1, 2);
  for (auto _ : state) benchmark::DoNotOptimize(anvil::matmul(q, k.transpose(-2, -1)));
}

// A Linear layer's weight gradient, goᵀ @ x over a batch of `k` rows (Note
// [Splitting k between threads]): an output of m x n, a long k.
void weight_grad(benchmark::State& state, std::int64_t m, std::int64_t k, std::int64_t n) {
  const auto go = anvil::rand({k, m});
  const auto x = anvil::rand({k, n});
  for (auto _ : state) benchmark::DoNotOptimize(anvil::matmul(go.t(), x));
}

// Embedding's backward: `n` rows of `src` added into `rows` rows (index_add);
// Python's x[idx] = src, the same rows copied (index_copy).
template <class Op>
void scatter_rows(benchmark::State& state, Op op, std::int64_t rows, std::int64_t cols, std::int64_t n) {
  const auto x = anvil::zeros({rows, cols});
  const auto src = anvil::rand({n, cols});
  const auto idx = anvil::randint(0, rows, {n});
  for (auto _ : state) benchmark::DoNotOptimize(op(x, idx, src));
  set_bytes(state, src, 2);
}
anvil::Tensor index_add_op(const anvil::Tensor& x, const anvil::Tensor& i, const anvil::Tensor& s) {
  return anvil::index_add(x, 0, i, s);
}
anvil::Tensor index_copy_op(const anvil::Tensor& x, const anvil::Tensor& i, const anvil::Tensor& s) {
  return anvil::index_copy(x, 0, i, s);
}

// A training step's small ops on the CPU: softmax over short rows (Note
// [Softmax over short rows]), argmax over classes, and Linear's addmm with a
// row of bias (FusedOp::GemmBias) beside the plain product.
void rows_op(benchmark::State& state, anvil::Tensor (*op)(const anvil::Tensor&), std::int64_t rows, std::int64_t cols) {
  const auto a = anvil::randn({rows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(op(a));
  set_bytes(state, a, 2);
}
anvil::Tensor log_softmax_op(const anvil::Tensor& a) { return anvil::log_softmax(a, 1); }
anvil::Tensor softmax_op(const anvil::Tensor& a) { return anvil::softmax(a, 1); }
anvil::Tensor argmax_op(const anvil::Tensor& a) { return anvil::argmax(a, 1); }
// A Linear's bias gradient: the output gradient summed over its rows.
anvil::Tensor sum_rows_op(const anvil::Tensor& a) { return anvil::sum(a, {0}); }

void linear(benchmark::State& state, bool bias, std::int64_t m, std::int64_t k, std::int64_t n) {
  const auto x = anvil::randn({m, k});
  const auto w = anvil::randn({n, k});
  const auto b = anvil::randn({n});
  for (auto _ : state) benchmark::DoNotOptimize(bias ? anvil::addmm(b, x, w.t()) : anvil::matmul(x, w.t()));
}

// Dropout's mask is this fill (Philox, src/kernels/philox.h) with a threshold.
void rand_fill(benchmark::State& state, std::int64_t rows, std::int64_t cols) {
  for (auto _ : state) benchmark::DoNotOptimize(anvil::rand({rows, cols}));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * rows * cols * 4);
}

anvil::Tensor add_op(const anvil::Tensor& a, const anvil::Tensor& b) { return anvil::add(a, b); }
anvil::Tensor mul_op(const anvil::Tensor& a, const anvil::Tensor& b) { return anvil::mul(a, b); }
anvil::Tensor exp_op(const anvil::Tensor& a) { return anvil::exp(a); }
anvil::Tensor tanh_op(const anvil::Tensor& a) { return anvil::tanh(a); }
anvil::Tensor relu_op(const anvil::Tensor& a) { return anvil::relu(a); }
anvil::Tensor gelu_op(const anvil::Tensor& a) { return anvil::gelu(a); }

[[maybe_unused]] const int kRegistered = [] {
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{2, 3}, {1024, 1024}, {4096, 4096}}) {
    benchmark::RegisterBenchmark(id("add", rows, cols).c_str(), binary, add_op, rows, cols);
    benchmark::RegisterBenchmark(id("mul", rows, cols).c_str(), binary, mul_op, rows, cols);
    benchmark::RegisterBenchmark(id("exp", rows, cols).c_str(), unary, exp_op, rows, cols);
    benchmark::RegisterBenchmark(id("tanh", rows, cols).c_str(), unary, tanh_op, rows, cols);
    benchmark::RegisterBenchmark(id("sum", rows, cols).c_str(), reduce, rows, cols);
  }
  benchmark::RegisterBenchmark(id("index_add", 10000, 256).c_str(), scatter_rows<decltype(&index_add_op)>, index_add_op,
                               10000, 256, 32 * 35)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(id("index_copy", 10000, 256).c_str(), scatter_rows<decltype(&index_copy_op)>,
                               index_copy_op, 10000, 256, 32 * 35)
      ->Unit(benchmark::kMicrosecond);
  // The MLP's hidden activation: 256 rows of 256.
  benchmark::RegisterBenchmark(id("relu", 256, 256).c_str(), unary, relu_op, 256, 256)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(id("add", 256, 256).c_str(), binary, add_op, 256, 256)->Unit(benchmark::kMicrosecond);
  // The ViT's feed-forward activation: [128, 17, 128] as rows.
  benchmark::RegisterBenchmark(id("gelu", 2176, 128).c_str(), unary, gelu_op, 2176, 128)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(id("tanh", 2176, 128).c_str(), unary, tanh_op, 2176, 128)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(id("exp", 2176, 128).c_str(), unary, exp_op, 2176, 128)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(id("rand", 2176, 64).c_str(), rand_fill, 2176, 64)->Unit(benchmark::kMicrosecond);
  for (std::int64_t n : {64, 100, 256, 1024})
    benchmark::RegisterBenchmark(id("matmul", n, n).c_str(), matmul, n)->Unit(benchmark::kMicrosecond);
  // The ViT's attention: batch 128, 17 tokens, 4 heads of 16.
  benchmark::RegisterBenchmark("matmul(q=heads[128,4,17,16],k.t()=heads[128,4,16,17],dtype=f32)", head_scores, 128, 17,
                               4, 16)
      ->Unit(benchmark::kMicrosecond);
  // The ViT's q, k and v projections' weight gradients (128 x 17 tokens).
  benchmark::RegisterBenchmark("matmul(a=go.t()[64,2176],b=x[2176,64],dtype=f32)", weight_grad, 64, 2176, 64)
      ->Unit(benchmark::kMicrosecond);
  for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{256, 10}, {1120, 28}, {1024, 32}}) {
    benchmark::RegisterBenchmark(id("log_softmax", rows, cols).c_str(), rows_op, log_softmax_op, rows, cols)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(id("softmax", rows, cols).c_str(), rows_op, softmax_op, rows, cols)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark(id("argmax", 256, 10).c_str(), rows_op, argmax_op, 256, 10)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("sum(shape=[256,256],dim=0,dtype=f32)", rows_op, sum_rows_op, 256, 256)
      ->Unit(benchmark::kMicrosecond);
  // The MLP's first Linear: x [256, 784], weight [256, 784].
  benchmark::RegisterBenchmark("addmm(bias=[256],x=[256,784],weight.t()=[784,256],dtype=f32)", linear, true, 256, 784,
                               256)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("matmul(x=[256,784],weight.t()=[784,256],dtype=f32)", linear, false, 256, 784, 256)
      ->Unit(benchmark::kMicrosecond);
  return 0;
}();

}  // namespace
