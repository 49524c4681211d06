#include <anvil/anvil.h>

#include <iostream>

int main() {
  const anvil::Tensor x = anvil::ones({2, 3}) * 2;
  const float total = x.sum().item<float>();
  std::cout << "sum = " << total << "\n";
  return total == 12.0f ? 0 : 1;
}
