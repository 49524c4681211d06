// IDX decoding shared by read_idx/decode_idx and FashionMNIST.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/dtype.h"

namespace anvil::detail {

struct IdxArray {
  std::uint8_t type_code = 0;  // 0x08, 0x0C, 0x0D or 0x0E
  DType dtype = u8;
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> bytes;  // host byte order, C order
};

// Raw or gzip IDX; IOError "<op>: '<source>': ..." on any problem.
IdxArray decode_idx_array(std::span<const std::uint8_t> bytes, std::string_view op, std::string_view source);
IdxArray read_idx_array(const std::string& path, std::string_view op);

}  // namespace anvil::detail
