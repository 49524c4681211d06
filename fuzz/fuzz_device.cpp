// Device strings: anvil::Device(std::string_view) throws DeviceError and
// nothing else; what it accepts prints back to a string that parses to the
// same device.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anvil/device.h"
#include "anvil/error.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view spec(reinterpret_cast<const char*>(data), size);
  ANVIL_FUZZ_ONLY_THROWS(anvil::DeviceError, {
    const anvil::Device d(spec);
    const anvil::Device again(d.str());
    ANVIL_FUZZ_REQUIRE(again == d);
    ANVIL_FUZZ_REQUIRE(d.index() >= 0);
  });
  return 0;
}
