// A program built like any user's (it includes only <anvil/...>), run by
// test_backend_modules under different module layouts: it must start, and
// says what it found as `key=value` lines.
#include <iostream>

#include "anvil/anvil.h"

int main() {
  using namespace anvil;
  try {
    std::cout << "cpu_sum=" << (ones({3}) + 1).sum().item<float>() << "\n";
    for (DeviceType type : {DeviceType::OpenCL, DeviceType::CUDA}) {
      const std::string name(to_string(type));
      const int n = device_count(type);
      std::cout << name << "_count=" << n << "\n";
      std::cout << name << "_reason=" << device_unavailable_reason(type) << "\n";
      if (n > 0) std::cout << name << "_sum=" << (ones({3}, Device(type, 0)) + 1).sum().item<float>() << "\n";
    }
    std::cout << "try_gpu=" << try_gpu() << "\n";
    // Why there is no further accelerator: lists every backend.
    std::cout << "try_gpu_reason=" << try_gpu_reason(gpu_count()) << "\n";
    try {
      (void)ones({1}, Device("cuda:0"));
    } catch (const Error& e) {
      std::cout << "cuda_error=" << e.what() << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "backend_probe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
