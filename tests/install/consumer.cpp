// A program built against an installed anvil (find_package(anvil)): it
// computes on the CPU (a convolution too, which runs on oneDNN, a library
// the installed libanvil loads for itself) and lists the OpenCL devices it sees, in anvil-smi
// -L's format, so check.sh can compare them with the build tree's.
#include <anvil/anvil.h>

#include <iostream>

int main() {
  const anvil::Tensor x = anvil::ones({2, 3}) * 2;
  const float total = x.sum().item<float>();
  std::cout << "sum = " << total << "\n";
  // 4 input channels: the CPU's oneDNN path. Every output is 4*3*3 = 36.
  const float conv = anvil::conv2d(anvil::ones({1, 4, 5, 5}), anvil::ones({2, 4, 3, 3})).sum().item<float>();
  std::cout << "conv2d sum = " << conv << "\n";
  for (int i = 0; i < anvil::device_count(anvil::DeviceType::OpenCL); ++i) {
    const anvil::Device d(anvil::DeviceType::OpenCL, i);
    std::cout << d << ": " << anvil::properties(d).name << "\n";
  }
  return total == 12.0f && conv == 2 * 3 * 3 * 36.0f ? 0 : 1;
}
