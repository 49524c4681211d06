// IDX (raw or gzip): decoding untrusted bytes throws IOError and nothing else.
#include <cstddef>
#include <cstdint>
#include <span>

#include "anvil/data.h"
#include "anvil/error.h"
#include "anvil/tensor.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ANVIL_FUZZ_ONLY_THROWS(anvil::IOError, {
    const anvil::Tensor t = anvil::decode_idx(std::span<const std::uint8_t>(data, size), "fuzz");
    ANVIL_FUZZ_REQUIRE(t.dim() >= 1 && t.is_contiguous());
    // Raw input holds exactly the header and the data.
    if (size >= 2 && !(data[0] == 0x1f && data[1] == 0x8b))
      ANVIL_FUZZ_REQUIRE(4 + 4 * static_cast<std::size_t>(t.dim()) + t.nbytes() == size);
  });
  return 0;
}
