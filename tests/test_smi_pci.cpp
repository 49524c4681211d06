// anvil-smi matches NVML's GPUs to cuda:N by PCI bus id (tools/smi/pci.h),
// tested without a GPU: NVML lists GPUs in PCI order, CUDA fastest first or
// as CUDA_VISIBLE_DEVICES says, so the two orders differ.
#include <gtest/gtest.h>

#include "smi/pci.h"

namespace {

using anvil::smi::nvml_row_for;
using anvil::smi::pci_bus_key;

TEST(SmiPci, CudaAndNvmlSpellingsOfOneBusIdAgree) {
  EXPECT_EQ(pci_bus_key("0000:3b:00.0"), "0000:3b:00");      // CUDA (cudaDeviceProp)
  EXPECT_EQ(pci_bus_key("00000000:3B:00.0"), "0000:3b:00");  // NVML's busId
  EXPECT_EQ(pci_bus_key("0001:af:1f"), "0001:af:1f");
  EXPECT_NE(pci_bus_key("0000:3b:00.0"), pci_bus_key("0000:3c:00.0"));
  EXPECT_NE(pci_bus_key("0000:3b:00.0"), pci_bus_key("0001:3b:00.0"));
  for (const char* bad : {"", "GPU-1234", "0000:3b", "0000:3b:00x", "zz:3b:00.0"})
    EXPECT_EQ(pci_bus_key(bad), "") << bad;
}

TEST(SmiPci, RowsMatchByBusIdNotByIndex) {
  const std::vector<std::string> nvml = {"00000000:1A:00.0", "00000000:3B:00.0", "00000000:5E:00.0"};
  // CUDA_VISIBLE_DEVICES=2,0: cuda:0 is NVML's row 2, cuda:1 its row 0.
  EXPECT_EQ(nvml_row_for({"0000:5e:00.0", "0000:1a:00.0"}, nvml), (std::vector<int>{2, 0}));
  // All three in CUDA's fastest-first order.
  EXPECT_EQ(nvml_row_for({"0000:3b:00.0", "0000:5e:00.0", "0000:1a:00.0"}, nvml), (std::vector<int>{1, 2, 0}));
  // A GPU NVML does not list, or whose bus id is unknown, has no row.
  EXPECT_EQ(nvml_row_for({"0000:99:00.0", ""}, nvml), (std::vector<int>{-1, -1}));
  EXPECT_EQ(nvml_row_for({"0000:1a:00.0"}, {"", "00000000:1A:00.0"}), (std::vector<int>{1}));
  EXPECT_TRUE(nvml_row_for({}, nvml).empty());
}

}  // namespace
