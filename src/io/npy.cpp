// NumPy .npy read/write. The header is a Python dict literal; rather than
// evaluate Python, the reader accepts exactly the grammar numpy writes (and
// the whitespace/quote/trailing-comma variants Python allows), nothing more.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>

#include "anvil/io.h"
#include "anvil/ops.h"
#include "io/file_util.h"

namespace anvil {

namespace {

using detail::cat;
using detail::quote;

constexpr std::string_view kOp = "load_npy";
constexpr std::string_view kSaveOp = "save_npy";
constexpr std::array<std::uint8_t, 6> kMagic{0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::string_view kSupported = "'<f2', '<f4', '<f8', '<i4', '<i8' (or '>' big-endian), '|u1', '|b1'";
// numpy.lib.format leaves room to grow the first axis in place.
constexpr std::size_t kGrowthAxisMaxDigits = 21;
constexpr std::size_t kArrayAlign = 64;

struct DescrInfo {
  DType dtype;
  bool big_endian;
};

std::optional<DescrInfo> parse_descr(std::string_view d) {
  if (d.size() != 3) return std::nullopt;
  const char order = d[0];
  const std::string_view kind = d.substr(1);
  if (kind == "u1" || kind == "b1") {
    if (order != '|' && order != '<' && order != '>') return std::nullopt;
    return DescrInfo{kind == "u1" ? u8 : boolean, false};
  }
  if (order != '<' && order != '>') return std::nullopt;
  const bool big = order == '>';
  if (kind == "f2") return DescrInfo{f16, big};
  if (kind == "f4") return DescrInfo{f32, big};
  if (kind == "f8") return DescrInfo{f64, big};
  if (kind == "i4") return DescrInfo{i32, big};
  if (kind == "i8") return DescrInfo{i64, big};
  return std::nullopt;
}

std::string_view descr_of(DType t) {
  switch (t) {
    case DType::F32:
      return "<f4";
    case DType::F64:
      return "<f8";
    case DType::I32:
      return "<i4";
    case DType::I64:
      return "<i8";
    case DType::U8:
      return "|u1";
    case DType::Bool:
      return "|b1";
    case DType::F16:
      return "<f2";
    case DType::BF16:  // NumPy has no bfloat16: save_npy turns it away
      break;
  }
  return "?";
}

// A recursive-descent reader of the header dict.
class DictParser {
 public:
  DictParser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    throw IOError(cat(kOp, ": ", quote(source_), ": ", args...));
  }
  [[noreturn]] void fail_at(std::string_view expected) const {
    fail("malformed header at byte ", pos_, " of the header dict; expected ", expected, ", got ",
         pos_ < text_.size() ? quote(text_.substr(pos_, 12)) : std::string("the end of the header"));
  }

  void parse(std::string& descr, bool& fortran_order, std::vector<std::int64_t>& shape) {
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    skip_ws();
    expect('{', "'{'");
    skip_ws();
    while (!peek('}')) {
      const std::string key = string_literal();
      skip_ws();
      expect(':', "':'");
      skip_ws();
      if (key == "descr") {
        if (seen_descr) fail("duplicate key 'descr' in the header; expected each key once");
        seen_descr = true;
        if (peek('['))
          fail("structured dtypes (a list descr) are not supported by anvil; expected one of ", kSupported);
        descr = string_literal();
      } else if (key == "fortran_order") {
        if (seen_fortran) fail("duplicate key 'fortran_order' in the header; expected each key once");
        seen_fortran = true;
        fortran_order = boolean_literal();
      } else if (key == "shape") {
        if (seen_shape) fail("duplicate key 'shape' in the header; expected each key once");
        seen_shape = true;
        shape = tuple_of_ints();
      } else {
        fail("unknown key ", quote(key), " in the header; expected only 'descr', 'fortran_order' and 'shape'");
      }
      skip_ws();
      if (peek(',')) {
        ++pos_;
        skip_ws();
      } else if (!peek('}')) {
        fail_at("',' or '}'");
      }
    }
    ++pos_;
    if (!seen_descr || !seen_fortran || !seen_shape)
      fail("the header lacks the key '",
           !seen_descr     ? "descr"
           : !seen_fortran ? "fortran_order"
                           : "shape",
           "'; expected 'descr', 'fortran_order' and 'shape'");
    // numpy pads with spaces and ends with '\n'.
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
    if (pos_ + 1 != text_.size() || text_[pos_] != '\n')
      fail("the header must end with spaces and a newline after the dict; expected '\\n' as its last byte, got ",
           pos_ < text_.size() ? quote(text_.substr(pos_, 12)) : std::string("no newline"));
  }

 private:
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void expect(char c, std::string_view what) {
    if (!peek(c)) fail_at(what);
    ++pos_;
  }
  void skip_ws() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  std::string string_literal() {
    if (!peek('\'') && !peek('"')) fail_at("a quoted string");
    const char quote = text_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      const auto c = static_cast<unsigned char>(text_[pos_]);
      // numpy's keys and descrs are plain ASCII; escapes never occur.
      if (c == '\\' || c < 0x20 || c >= 0x7f) fail_at("a plain ASCII string without escapes");
      ++pos_;
    }
    if (pos_ == text_.size()) fail("unterminated string in the header; expected a closing quote");
    return std::string(text_.substr(start, pos_++ - start));
  }
  bool boolean_literal() {
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail_at("True or False");
  }
  std::int64_t int_literal() {
    const std::size_t start = pos_;
    std::int64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_] - '0';
      if (v > (std::numeric_limits<std::int64_t>::max() - digit) / 10)
        fail("a shape entry is too large; expected at most ", std::numeric_limits<std::int64_t>::max());
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail_at("a non-negative integer");
    if (pos_ - start > 1 && text_[start] == '0') fail_at("an integer without leading zeros");
    return v;
  }
  // (), (n,), (n, m), (n, m,)
  std::vector<std::int64_t> tuple_of_ints() {
    expect('(', "'(' starting the shape tuple");
    std::vector<std::int64_t> dims;
    skip_ws();
    bool trailing_comma = false;
    while (!peek(')')) {
      if (dims.size() == static_cast<std::size_t>(kMaxDims))
        fail("the shape has too many dimensions; expected at most ", kMaxDims, ", got more");
      dims.push_back(int_literal());
      skip_ws();
      trailing_comma = false;
      if (peek(',')) {
        ++pos_;
        trailing_comma = true;
        skip_ws();
      } else if (!peek(')')) {
        fail_at("',' or ')' in the shape tuple");
      }
    }
    ++pos_;
    // (3) is the integer 3 in Python, not a tuple.
    if (dims.size() == 1 && !trailing_comma) fail("the shape (n) is not a tuple; expected (n,)");
    return dims;
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

template <typename... Args>
[[noreturn]] void fail_npy(std::string_view source, const Args&... args) {
  throw IOError(cat(kOp, ": ", quote(source), ": ", args...));
}

void byteswap_inplace(std::uint8_t* p, std::uint64_t numel, std::size_t esize) {
  for (std::uint64_t i = 0; i < numel; ++i, p += esize) std::reverse(p, p + esize);
}

void check_bools(const NpyHeader& h, const std::uint8_t* p, std::string_view source) {
  if (h.dtype != boolean) return;
  for (std::uint64_t i = 0; i < h.data_size; ++i)
    if (p[i] > 1)
      throw IOError(cat(kOp, ": ", quote(source), ": the bool array holds byte ", static_cast<int>(p[i]),
                        " at element ", i, "; expected 0 or 1"));
}

// Shape of the bytes as laid out in the file: reversed for Fortran order.
Shape storage_shape(const NpyHeader& h) {
  std::vector<std::int64_t> dims(h.shape.begin(), h.shape.end());
  if (h.fortran_order) std::reverse(dims.begin(), dims.end());
  return Shape(dims);
}

// A Fortran-order array is the transpose of its bytes read in C order.
Tensor to_logical(const Tensor& stored, const NpyHeader& h) {
  if (!h.fortran_order || h.shape.size() < 2) return stored;
  std::vector<std::int64_t> reversed(static_cast<std::size_t>(h.shape.size()));
  for (int i = 0; i < h.shape.size(); ++i) reversed[static_cast<std::size_t>(i)] = h.shape.size() - 1 - i;
  return stored.permute(Shape(reversed)).contiguous();
}

std::string shape_repr(const Shape& s) {
  if (s.size() == 0) return "()";
  std::string out = "(";
  for (int i = 0; i < s.size(); ++i) out += cat(i ? ", " : "", s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// Exactly numpy.lib.format._write_array_header for a C-order array.
std::vector<std::uint8_t> header_bytes(const Tensor& t) {
  ANVIL_CHECK(t.dtype() != bf16, DTypeError, kSaveOp,
              ": NumPy has no bfloat16; expected a dtype .npy can hold (f16, f32, f64, i32, i64, u8, bool), got bf16; "
              "convert with .to(f32), or save with save_safetensors");
  std::string dict =
      cat("{'descr': '", descr_of(t.dtype()), "', 'fortran_order': False, 'shape': ", shape_repr(t.shape()), ", }");
  if (t.dim() > 0) {
    const std::size_t digits = std::to_string(t.shape()[0]).size();
    if (digits < kGrowthAxisMaxDigits) dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  // Version 1.0 unless the padded length does not fit its uint16.
  const std::size_t hlen = dict.size() + 1;
  int major = 1;
  std::size_t prefix = kMagic.size() + 2 + 2;
  std::size_t padlen = kArrayAlign - ((prefix + hlen) % kArrayAlign);
  if (hlen + padlen > 65535) {
    major = 2;
    prefix = kMagic.size() + 2 + 4;
    padlen = kArrayAlign - ((prefix + hlen) % kArrayAlign);
  }
  dict.append(padlen, ' ');
  dict += '\n';
  std::vector<std::uint8_t> out(kMagic.begin(), kMagic.end());
  out.push_back(static_cast<std::uint8_t>(major));
  out.push_back(0);
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  for (std::size_t i = 0; i < len_bytes; ++i) out.push_back(static_cast<std::uint8_t>(dict.size() >> (8 * i)));
  out.insert(out.end(), dict.begin(), dict.end());
  return out;
}

}  // namespace

NpyHeader parse_npy_header(std::span<const std::uint8_t> bytes, std::uint64_t file_size, std::string_view source) {
  auto fail = [&](const auto&... args) { fail_npy(source, args...); };
  const std::size_t avail = static_cast<std::size_t>(std::min<std::uint64_t>(bytes.size(), file_size));
  if (avail < kMagic.size() + 2 || !std::equal(kMagic.begin(), kMagic.end(), bytes.begin()))
    fail("not a .npy file; expected the magic \\x93NUMPY followed by a version, got ",
         avail < kMagic.size() + 2 ? cat("a ", avail, "-byte file")
                                   : quote(std::string_view(reinterpret_cast<const char*>(bytes.data()), 6)));
  NpyHeader h;
  h.major_version = bytes[6];
  h.minor_version = bytes[7];
  if (h.major_version < 1 || h.major_version > 3 || h.minor_version != 0)
    fail("unsupported format version; expected 1.0, 2.0 or 3.0, got ", h.major_version, ".", h.minor_version);
  const std::size_t len_bytes = h.major_version == 1 ? 2 : 4;
  const std::size_t start = kMagic.size() + 2 + len_bytes;
  if (avail < start) fail("file ends inside the header length; expected at least ", start, " bytes, got ", avail);
  std::uint64_t hlen = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) hlen |= static_cast<std::uint64_t>(bytes[8 + i]) << (8 * i);
  if (hlen > kNpyMaxHeaderSize)
    fail("header length is too large; expected at most ", kNpyMaxHeaderSize, " bytes, got ", hlen);
  if (start + hlen > file_size)
    fail("header runs past the end of the file; expected at most ", file_size - start, " header bytes, got ", hlen);
  if (start + hlen > bytes.size())
    fail("only ", bytes.size(), " bytes were given; expected the whole header, ", start + hlen);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + start, static_cast<std::size_t>(hlen));

  std::string descr;
  std::vector<std::int64_t> dims;
  DictParser(text, source).parse(descr, h.fortran_order, dims);
  const auto info = parse_descr(descr);
  if (!info) fail("dtype ", quote(descr), " is not supported by anvil; expected one of ", kSupported);
  h.dtype = info->dtype;
  h.big_endian = info->big_endian;

  const std::uint64_t esize = element_size(h.dtype);
  const std::uint64_t max_numel = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / esize;
  std::uint64_t nonzero_product = 1;
  bool has_zero = false;
  for (std::int64_t d : dims) {
    const auto u = static_cast<std::uint64_t>(d);
    if (u == 0)
      has_zero = true;
    else if (u > max_numel || nonzero_product > max_numel / u)
      fail("the size of shape ", Shape(dims), " overflows; expected at most ", max_numel, " elements of ", esize,
           " bytes");
    else
      nonzero_product *= u;
  }
  h.shape = Shape(dims);
  h.data_offset = start + hlen;
  h.data_size = (has_zero ? 0 : nonzero_product) * esize;
  const std::uint64_t present = file_size - h.data_offset;
  if (present < h.data_size)
    fail("file is truncated; expected ", h.data_size, " bytes of data (shape ", h.shape, " of ", descr, "), got ",
         present);
  if (present > h.data_size)
    fail("file has trailing bytes after the array; expected ", h.data_size, " bytes of data (shape ", h.shape, " of ",
         descr, "), got ", present);
  return h;
}

Tensor load_npy(std::span<const std::uint8_t> bytes, Device device, std::string_view source) {
  const NpyHeader h = parse_npy_header(bytes, bytes.size(), source);
  const std::uint8_t* p = bytes.data() + h.data_offset;
  std::vector<std::uint8_t> swapped;
  if (h.big_endian) {
    swapped.assign(p, p + h.data_size);
    byteswap_inplace(swapped.data(), h.shape.numel(), element_size(h.dtype));
    p = swapped.data();
  }
  check_bools(h, p, source);
  return to_logical(from_host(p, storage_shape(h), h.dtype, device), h);
}

Tensor load_npy(const std::string& path, Device device) {
  detail::InputFile file(path, kOp);
  // The fixed prefix, then the header it announces (capped before reading).
  std::vector<std::uint8_t> head(static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), 12)));
  file.read_at(head.data(), head.size(), 0, "the header");
  if (head.size() >= 10 && std::equal(kMagic.begin(), kMagic.end(), head.begin()) && head[6] >= 1 && head[6] <= 3) {
    const std::size_t len_bytes = head[6] == 1 ? 2 : 4;
    const std::size_t start = 8 + len_bytes;
    if (head.size() >= start) {
      std::uint64_t hlen = 0;
      for (std::size_t i = 0; i < len_bytes; ++i) hlen |= static_cast<std::uint64_t>(head[8 + i]) << (8 * i);
      if (hlen <= kNpyMaxHeaderSize && start + hlen <= file.size()) {
        head.resize(static_cast<std::size_t>(start + hlen));
        file.read_at(head.data(), head.size(), 0, "the header");
      }
    }
  }
  const NpyHeader h = parse_npy_header(head, file.size(), path);
  const Shape stored = storage_shape(h);
  const std::size_t esize = element_size(h.dtype);
  if (device.is_cpu()) {
    Tensor x = empty(stored, cpu(), h.dtype);
    if (h.data_size > 0) {
      auto* dst = static_cast<std::uint8_t*>(x.raw_data_ptr());
      file.read_at(dst, static_cast<std::size_t>(h.data_size), h.data_offset, "the array data");
      if (h.big_endian) byteswap_inplace(dst, h.shape.numel(), esize);
      check_bools(h, dst, path);
    }
    return to_logical(x, h);
  }
  std::vector<std::uint8_t> staging(static_cast<std::size_t>(h.data_size));
  if (h.data_size > 0) file.read_at(staging.data(), staging.size(), h.data_offset, "the array data");
  if (h.big_endian) byteswap_inplace(staging.data(), h.shape.numel(), esize);
  check_bools(h, staging.data(), path);
  return to_logical(from_host(staging.data(), stored, h.dtype, device), h);
}

std::vector<std::uint8_t> serialize_npy(const Tensor& t) {
  ANVIL_CHECK(t.defined(), ValueError, kSaveOp, ": the tensor is undefined; expected a defined tensor");
  std::vector<std::uint8_t> out = header_bytes(t);
  if (t.numel() > 0) {
    const Tensor host = t.contiguous().cpu();
    const auto* p = static_cast<const std::uint8_t*>(host.raw_data_ptr());
    out.insert(out.end(), p, p + host.nbytes());
  }
  return out;
}

void save_npy(const std::string& path, const Tensor& t) {
  ANVIL_CHECK(t.defined(), ValueError, kSaveOp, ": the tensor is undefined; expected a defined tensor");
  const std::vector<std::uint8_t> header = header_bytes(t);
  detail::write_file_atomic(path, kSaveOp, [&](detail::OutputSink& sink) {
    sink.write(header.data(), header.size());
    if (t.numel() > 0) {
      const Tensor host = t.contiguous().cpu();
      sink.write(host.raw_data_ptr(), host.nbytes());
    }
  });
}

}  // namespace anvil
