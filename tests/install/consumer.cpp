// A program built against an installed anvil (find_package(anvil)): it
// computes on the CPU and lists the OpenCL devices it sees, in anvil-smi
// -L's format, so check.sh can compare them with the build tree's.
#include <anvil/anvil.h>

#include <iostream>

int main() {
  const anvil::Tensor x = anvil::ones({2, 3}) * 2;
  const float total = x.sum().item<float>();
  std::cout << "sum = " << total << "\n";
  for (int i = 0; i < anvil::device_count(anvil::DeviceType::OpenCL); ++i) {
    const anvil::Device d(anvil::DeviceType::OpenCL, i);
    std::cout << d << ": " << anvil::properties(d).name << "\n";
  }
  return total == 12.0f ? 0 : 1;
}
