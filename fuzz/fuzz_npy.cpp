// .npy: loading untrusted bytes throws IOError and nothing else; an array
// that loads survives a save/load round trip unchanged.
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
    const anvil::NpyHeader header = anvil::parse_npy_header(bytes, size, "fuzz");
    ANVIL_FUZZ_REQUIRE(header.data_offset + header.data_size == size);
    const anvil::Tensor t = anvil::load_npy(bytes, anvil::cpu(), "fuzz");
    ANVIL_FUZZ_REQUIRE(t.shape() == header.shape && t.dtype() == header.dtype);
    ANVIL_FUZZ_REQUIRE(t.is_contiguous() && t.nbytes() == header.data_size);
    const std::vector<std::uint8_t> again = anvil::serialize_npy(t);
    const anvil::Tensor u = anvil::load_npy(std::span<const std::uint8_t>(again), anvil::cpu(), "round trip");
    ANVIL_FUZZ_REQUIRE(u.shape() == t.shape() && u.dtype() == t.dtype());
    if (t.nbytes() > 0) ANVIL_FUZZ_REQUIRE(std::memcmp(t.raw_data_ptr(), u.raw_data_ptr(), t.nbytes()) == 0);
  });
  return 0;
}
