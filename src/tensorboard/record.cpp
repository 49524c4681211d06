// TFRecord framing and its checksum, CRC-32C (tensorflow/core/lib/io/record_writer.cc).
#include <array>

#include "anvil/tensorboard.h"

namespace anvil::tensorboard {

namespace {

// One byte at a time over a 256-entry table: an event file is written at
// the pace of training, so the checksum is never what takes the time.
constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint32_t, 256> kTable = make_table();

void put_le(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) c = kTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t n) noexcept {
  const std::uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string tfrecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out.append(data);
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

}  // namespace anvil::tensorboard
