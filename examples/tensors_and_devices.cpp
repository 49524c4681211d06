// A first tour of anvil: devices, tensors, ops, moving data on purpose, and
// what the ledger counted. Runs on any machine: without an accelerator every
// try_gpu() falls back to the CPU and says why.
#include <anvil/anvil.h>

#include <iostream>

#include "d2l_flags.h"

int main(int argc, char** argv) try {
  using namespace anvil;
  d2l::parse_profile_flag(argc, argv, "tensors_and_devices");
  std::cout << "anvil " << kVersion << "\n";
  std::cout << "devices: " << all_devices() << "\n";
  std::cout << "gpu_count() = " << gpu_count() << "\n";
  std::cout << "try_gpu() = " << try_gpu() << ", try_gpu(10) = " << try_gpu(10) << "\n";
  if (gpu_count() == 0) std::cout << "  (falls back because: " << try_gpu_reason() << ")\n";
  std::cout << "try_all_gpus() = " << try_all_gpus() << "\n\n";

  Ledger ledger;
  const Device dev = try_gpu();
  manual_seed(0);
  Tensor x = ones({2, 3}, dev);
  Tensor y = rand({2, 3}, dev);
  std::cout << "x = " << x << "\ny = " << y << "\n";
  std::cout << "(x + 2).exp() * y = " << (x + 2).exp() * y << "\n";
  std::cout << "x.to(x.device()).is_same(x) = " << std::boolalpha << x.to(x.device()).is_same(x) << "\n";
  std::cout << "x.copy_to(x.device()).is_same(x) = " << x.copy_to(x.device()).is_same(x) << "\n";

  Tensor a = randn({4, 5}, dev), b = randn({5, 3}, dev);
  std::cout << "matmul(a, b).sum(dim 1) = " << matmul(a, b).sum({1}) << "\n";
  std::cout << "arange(10).reshape({2, 5}).t() = " << arange(10, dev).reshape({2, 5}).t() << "\n";
  std::cout << "norm of a = " << a.norm().item<float>() << "\n";

  try {
    Tensor bad = matmul(a, a);
  } catch (const ShapeError& e) {
    std::cout << "caught ShapeError: " << e.what() << "\n";
  }
  std::cout << "\nwhat moved:\n" << ledger.report();
  std::cout << "cpu memory: " << memory_stats(cpu()) << "\n";
  return 0;
} catch (const anvil::Error& e) {
  std::cerr << "error: " << e.what() << "\n";
  return 1;
}
