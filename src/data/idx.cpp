// IDX reading (raw or gzip). The decompressed stream is read incrementally:
// the header first, then exactly the bytes it announces, growing the buffer
// only as data actually arrives, so a lying header costs nothing and a gzip
// bomb stops at the announced size.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "anvil/data.h"
#include "anvil/error.h"
#include "anvil/ops.h"
#include "io/file_util.h"

namespace anvil {
namespace detail {

namespace {

class ByteReader {
 public:
  virtual ~ByteReader() = default;
  // Reads up to `n` bytes; fewer only when the data ends.
  virtual std::size_t read(std::uint8_t* dst, std::size_t n) = 0;
  // Bytes left over after the IDX content: 0 for a well-formed input.
  virtual std::string trailing() = 0;
};

class RawReader final : public ByteReader {
 public:
  explicit RawReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    const std::size_t k = std::min(n, bytes_.size() - pos_);
    std::copy_n(bytes_.data() + pos_, k, dst);
    pos_ += k;
    return k;
  }
  std::string trailing() override {
    return pos_ == bytes_.size() ? std::string() : cat(bytes_.size() - pos_, " trailing bytes after the data");
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
};

class GzipReader final : public ByteReader {
 public:
  GzipReader(std::span<const std::uint8_t> bytes, std::string_view op, std::string_view source)
      : bytes_(bytes), op_(op), source_(source) {
    // 16 + MAX_WBITS: a gzip wrapper (header and CRC-32 trailer) only.
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK)
      throw IOError(cat(op_, ": ", quote(source_), ": cannot initialise zlib"));
  }
  ~GzipReader() override { inflateEnd(&zs_); }
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  std::size_t read(std::uint8_t* dst, std::size_t n) override {
    std::size_t done = 0;
    while (done < n && !ended_) {
      if (zs_.avail_in == 0 && fed_ < bytes_.size()) {
        // avail_in is 32-bit: feed large inputs in pieces.
        const std::size_t piece = std::min<std::size_t>(bytes_.size() - fed_, 1u << 30);
        zs_.next_in = const_cast<Bytef*>(bytes_.data() + fed_);  // zlib's API is not const-correct
        zs_.avail_in = static_cast<uInt>(piece);
        fed_ += piece;
      }
      const std::size_t want = std::min<std::size_t>(n - done, 1u << 30);
      zs_.next_out = dst + done;
      zs_.avail_out = static_cast<uInt>(want);
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      done += want - zs_.avail_out;
      if (rc == Z_STREAM_END) {
        ended_ = true;
      } else if (rc == Z_BUF_ERROR && zs_.avail_in == 0 && fed_ == bytes_.size()) {
        // No progress possible: the compressed input ran out mid-stream.
        throw IOError(cat(op_, ": ", quote(source_), ": the gzip stream is truncated; expected more compressed ",
                          "data after its ", bytes_.size(), " bytes (", total_out(), " bytes decompressed so far)"));
      } else if (rc != Z_OK) {
        throw IOError(cat(op_, ": ", quote(source_),
                          ": corrupt gzip data (zlib: ", zs_.msg != nullptr ? zs_.msg : zlib_error(rc), ") after ",
                          total_out(), " decompressed bytes; expected a valid gzip stream"));
      }
    }
    return done;
  }

  std::string trailing() override {
    // The IDX content is complete; the stream must end right here, with a
    // valid CRC, and nothing may follow it.
    std::uint8_t extra = 0;
    if (read(&extra, 1) != 0) return "more decompressed data than the header announces";
    const std::size_t left = zs_.avail_in + (bytes_.size() - fed_);
    if (left != 0) return cat(left, " trailing bytes after the gzip stream");
    return {};
  }

 private:
  static const char* zlib_error(int rc) {
    switch (rc) {
      case Z_DATA_ERROR:
        return "data error";
      case Z_MEM_ERROR:
        return "out of memory";
      case Z_STREAM_ERROR:
        return "stream error";
      case Z_NEED_DICT:
        return "needs a preset dictionary";
      default:
        return "error";
    }
  }
  std::uint64_t total_out() const { return zs_.total_out; }

  std::span<const std::uint8_t> bytes_;
  std::string_view op_;
  std::string_view source_;
  z_stream zs_{};
  std::size_t fed_ = 0;
  bool ended_ = false;
};

template <typename... Args>
[[noreturn]] void fail_idx(std::string_view op, std::string_view source, const Args&... args) {
  throw IOError(cat(op, ": ", quote(source), ": ", args...));
}

std::string hex_byte(std::uint8_t b) { return cat("0x", "0123456789ABCDEF"[b >> 4], "0123456789ABCDEF"[b & 15]); }

std::string type_name(std::uint8_t code) {
  switch (code) {
    case 0x08:
      return "0x08 (unsigned byte)";
    case 0x09:
      return "0x09 (signed byte)";
    case 0x0B:
      return "0x0B (short)";
    case 0x0C:
      return "0x0C (int)";
    case 0x0D:
      return "0x0D (float)";
    case 0x0E:
      return "0x0E (double)";
    default:
      return hex_byte(code);
  }
}

}  // namespace

IdxArray decode_idx_array(std::span<const std::uint8_t> bytes, std::string_view op, std::string_view source) {
  auto fail = [&](const auto&... args) { fail_idx(op, source, args...); };
  const bool gzipped = bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
  std::unique_ptr<ByteReader> reader;
  if (gzipped)
    reader = std::make_unique<GzipReader>(bytes, op, source);
  else
    reader = std::make_unique<RawReader>(bytes);
  const char* kind = gzipped ? "decompressed data" : "file";

  std::uint8_t magic[4] = {};
  if (const std::size_t got = reader->read(magic, 4); got < 4)
    fail("the ", kind, " is too short for the IDX magic number; expected 4 bytes, got ", got);
  if (magic[0] != 0 || magic[1] != 0)
    fail("not an IDX file; expected a magic number starting 0x00 0x00, got ", hex_byte(magic[0]), " ",
         hex_byte(magic[1]));
  IdxArray out;
  out.type_code = magic[2];
  switch (out.type_code) {
    case 0x08:
      out.dtype = u8;
      break;
    case 0x0C:
      out.dtype = i32;
      break;
    case 0x0D:
      out.dtype = f32;
      break;
    case 0x0E:
      out.dtype = f64;
      break;
    default:
      fail_idx(op, source, "IDX element type ", type_name(out.type_code),
               " is not supported; expected 0x08 (u8), 0x0C (i32), 0x0D (f32) or 0x0E (f64)");
  }
  const int ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims) fail("IDX header has ", ndims, " dimensions; expected 1 to ", kMaxDims);

  std::uint8_t dim_bytes[4 * kMaxDims] = {};
  const std::size_t need = 4 * static_cast<std::size_t>(ndims);
  if (const std::size_t got = reader->read(dim_bytes, need); got < need)
    fail("the ", kind, " ends inside the IDX header; expected ", 4 + need, " header bytes, got ", 4 + got);
  const std::uint64_t esize = element_size(out.dtype);
  const std::uint64_t max_numel = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / esize;
  std::uint64_t nonzero_product = 1;
  bool has_zero = false;
  for (int i = 0; i < ndims; ++i) {
    const std::uint8_t* p = dim_bytes + 4 * i;
    const std::uint64_t d =
        (std::uint64_t{p[0]} << 24) | (std::uint64_t{p[1]} << 16) | (std::uint64_t{p[2]} << 8) | p[3];
    out.dims.push_back(static_cast<std::int64_t>(d));
    if (d == 0)
      has_zero = true;
    else if (nonzero_product > max_numel / d)
      fail("IDX dimensions ", Shape(out.dims), "... overflow; expected at most ", max_numel, " elements");
    else
      nonzero_product *= d;
  }
  const std::uint64_t numel = has_zero ? 0 : nonzero_product;
  const std::uint64_t total = numel * esize;
  // Grow as the data arrives (see the note at the top).
  constexpr std::uint64_t kChunk = std::uint64_t{64} << 10;
  std::uint64_t got = 0;
  while (got < total) {
    const std::uint64_t piece = std::min(total - got, std::max<std::uint64_t>(kChunk, got));
    out.bytes.resize(static_cast<std::size_t>(got + piece));
    const std::size_t r = reader->read(out.bytes.data() + got, static_cast<std::size_t>(piece));
    got += r;
    if (r < piece)
      fail("the ", kind, " is truncated; expected ", total, " bytes of data after the header (shape ", Shape(out.dims),
           " of ", out.dtype, "), got ", got);
  }
  if (const std::string extra = reader->trailing(); !extra.empty())
    fail("the ", kind, " has ", extra, "; expected exactly ", total, " bytes of data after the header (shape ",
         Shape(out.dims), " of ", out.dtype, ")");
  // IDX is big-endian.
  if (esize > 1)
    for (std::size_t i = 0; i < out.bytes.size(); i += esize)
      std::reverse(out.bytes.begin() + static_cast<std::ptrdiff_t>(i),
                   out.bytes.begin() + static_cast<std::ptrdiff_t>(i + esize));
  return out;
}

IdxArray read_idx_array(const std::string& path, std::string_view op) {
  InputFile file(path, op);
  const std::vector<std::uint8_t> bytes = file.read_all();
  return decode_idx_array(bytes, op, path);
}

}  // namespace detail

Tensor decode_idx(std::span<const std::uint8_t> bytes, std::string_view source) {
  const detail::IdxArray a = detail::decode_idx_array(bytes, "decode_idx", source);
  return from_host(a.bytes.data(), Shape(a.dims), a.dtype, cpu());
}

Tensor read_idx(const std::string& path) {
  const detail::IdxArray a = detail::read_idx_array(path, "read_idx");
  return from_host(a.bytes.data(), Shape(a.dims), a.dtype, cpu());
}

}  // namespace anvil
