// safetensors: parsing and loading untrusted bytes throws IOError and nothing
// else; a file that loads survives a save/load round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "anvil/error.h"
#include "anvil/io.h"
#include "anvil/tensor.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  ANVIL_FUZZ_ONLY_THROWS(anvil::IOError, {
    const anvil::SafetensorsHeader header = anvil::parse_safetensors_header(bytes, size, "fuzz");
    ANVIL_FUZZ_REQUIRE(header.data_offset() + header.data_size == size);
    const auto tensors = anvil::load_safetensors(bytes, anvil::cpu(), "fuzz");
    ANVIL_FUZZ_REQUIRE(tensors.size() == header.tensors.size());

    const std::vector<std::pair<std::string, anvil::Tensor>> items(tensors.begin(), tensors.end());
    const std::vector<std::uint8_t> again = anvil::serialize_safetensors(items, header.metadata);
    const auto reloaded = anvil::load_safetensors(std::span<const std::uint8_t>(again), anvil::cpu(), "round trip");
    ANVIL_FUZZ_REQUIRE(reloaded.size() == tensors.size());
    for (const auto& info : header.tensors) {
      const anvil::Tensor& a = tensors.at(info.name);
      const anvil::Tensor& b = reloaded.at(info.name);
      ANVIL_FUZZ_REQUIRE(a.dtype() == info.dtype && b.dtype() == info.dtype);
      ANVIL_FUZZ_REQUIRE(a.shape() == info.shape && b.shape() == info.shape);
      ANVIL_FUZZ_REQUIRE(a.nbytes() == info.end - info.begin);
      if (a.nbytes() > 0) {
        ANVIL_FUZZ_REQUIRE(std::memcmp(a.raw_data_ptr(), data + header.data_offset() + info.begin, a.nbytes()) == 0);
        ANVIL_FUZZ_REQUIRE(std::memcmp(a.raw_data_ptr(), b.raw_data_ptr(), a.nbytes()) == 0);
      }
    }
    ANVIL_FUZZ_REQUIRE(anvil::parse_safetensors_header(again, again.size(), "round trip").metadata == header.metadata);
  });
  return 0;
}
