// A minimal PNG writer (https://www.w3.org/TR/png/): IHDR, one IDAT of
// zlib-compressed rows with filter 0 (none), IEND.
#include <zlib.h>

#include "anvil/error.h"
#include "anvil/tensorboard.h"

namespace anvil::tensorboard {

namespace {

void put_be32(std::string& out, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Length, type, data, CRC-32 (zlib's) of type and data.
void chunk(std::string& out, const char (&type)[5], std::string_view data) {
  put_be32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.append(type, 4);
  out.append(data);
  const auto* p = reinterpret_cast<const Bytef*>(out.data() + start);
  put_be32(out, static_cast<std::uint32_t>(::crc32(0L, p, static_cast<uInt>(out.size() - start))));
}

}  // namespace

std::string encode_png(std::span<const std::uint8_t> pixels, int height, int width, int channels) {
  static constexpr std::uint8_t kColourType[] = {0, 0, 4, 2, 6};  // by channel count
  ANVIL_CHECK(channels >= 1 && channels <= 4, ShapeError, "encode_png: expected 1, 2, 3 or 4 channels, got ", channels);
  ANVIL_CHECK(height > 0 && width > 0, ShapeError, "encode_png: expected a positive height and width, got ", height,
              "x", width);
  const std::size_t row = static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
  ANVIL_CHECK(pixels.size() == row * static_cast<std::size_t>(height), ShapeError, "encode_png: expected ",
              row * static_cast<std::size_t>(height), " bytes for ", height, "x", width, "x", channels, ", got ",
              pixels.size());

  std::string raw;  // each row behind its filter byte
  raw.reserve((row + 1) * static_cast<std::size_t>(height));
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.append(reinterpret_cast<const char*>(pixels.data()) + static_cast<std::size_t>(y) * row, row);
  }
  uLongf zsize = ::compressBound(static_cast<uLong>(raw.size()));
  std::string z(zsize, '\0');
  const int rc = ::compress2(reinterpret_cast<Bytef*>(z.data()), &zsize, reinterpret_cast<const Bytef*>(raw.data()),
                             static_cast<uLong>(raw.size()), Z_DEFAULT_COMPRESSION);
  ANVIL_CHECK(rc == Z_OK, BackendError, "encode_png: zlib compress2 failed with status ", rc);
  z.resize(zsize);

  std::string ihdr;
  put_be32(ihdr, static_cast<std::uint32_t>(width));
  put_be32(ihdr, static_cast<std::uint32_t>(height));
  ihdr.push_back(8);  // bits per channel
  ihdr.push_back(static_cast<char>(kColourType[channels]));
  ihdr.append(3, '\0');  // deflate, adaptive filtering, no interlace

  std::string out("\x89PNG\r\n\x1a\n", 8);
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", {});
  return out;
}

}  // namespace anvil::tensorboard
