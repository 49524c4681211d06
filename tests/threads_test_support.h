// What the thread stress suites (test_threads_*.cpp) share: integer-valued
// tensors, whose sums are exact in any order, and threads that start together.
#pragma once

#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "anvil/anvil.h"

namespace anvil::testing {

// Small integers (|v| <= 2) in f32: every product and sum the suites make of
// them is an exact integer, so neither the order in which threads add nor a
// reduction's split across OpenMP threads can change a bit.
inline Tensor ints(const Shape& shape, int salt, Device d) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>((i * 7 + salt * 3) % 5 - 2);
  return tensor(v, shape, d);
}

// Runs body(t) on n threads that start together; rethrows nothing (failures
// are gtest's, which are thread-safe).
template <typename Body>
void on_threads(int n, Body body) {
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      body(t);
    });
  for (auto& th : threads) th.join();
}

}  // namespace anvil::testing
