// anvil/io.h — tensors to and from files: safetensors and NumPy .npy.
//
//   anvil::save_safetensors("net.safetensors", {{"w", w}, {"b", b}}, {{"epoch", "3"}});
//   auto params = anvil::load_safetensors("net.safetensors", anvil::try_gpu());
//   params.at("w").device();                          // straight onto that device
//
//   anvil::save_npy("x.npy", x);                      // np.load("x.npy") reads it
//   auto y = anvil::load_npy("x.npy", anvil::gpu(0));
//
// Files are untrusted input: every reader validates the whole file before it
// allocates anything on a device and throws IOError naming the file, the
// tensor and the rule that failed (`load_safetensors: 'net.safetensors':
// tensor 'w' has data_offsets [0, 20]; expected a span of 24 bytes (shape
// [2, 3] × 4 bytes of f32), got 20`). A file anvil cannot represent (an f16
// tensor, a structured .npy) is an IOError too, naming the key and the dtype.
//
// Writers are atomic: the bytes go to a temporary file in the destination
// folder, which is fsync'ed and renamed over `path`, and the folder is
// fsync'ed, so a crash leaves either the old file or the complete new one.
// Tensors on any device are copied to the host for writing.
//
// Loading maps every tensor directly onto `device` (PyTorch's map_location):
// the bytes go from the file to the host and from there to `device`; no other
// device is touched.
//
// Thread safety: every function here may be called from several threads at
// once on distinct files.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "anvil/device.h"
#include "anvil/dtype.h"
#include "anvil/shape.h"
#include "anvil/tensor.h"

namespace anvil {

// --- safetensors ---------------------------------------------------------------
// The format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of UTF-8 JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
//    "__metadata__": {"key": "value"}}
// (padded with spaces), then the data buffer. Offsets are relative to the
// buffer. anvil reads and writes F32, F64, I32, I64, U8 and BOOL.

// Headers longer than this are rejected (the reference implementation's cap).
inline constexpr std::uint64_t kSafetensorsMaxHeaderSize = 100'000'000;

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = f32;
  Shape shape;
  std::uint64_t begin = 0;  // byte offsets into the data buffer, [begin, end)
  std::uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensorInfo> tensors;  // in buffer order (by offset)
  std::map<std::string, std::string> metadata;
  std::uint64_t header_size = 0;  // N: the JSON bytes, padding included
  std::uint64_t data_size = 0;    // bytes of the data buffer
  std::uint64_t data_offset() const noexcept { return 8 + header_size; }
};

// Validates the 8-byte length and the JSON header, and checks every tensor's
// offsets against a file of `file_size` bytes. `bytes` is the start of the
// file: at least its first 8 + N bytes (the whole file is fine). `source`
// names the input in error messages. Throws IOError.
SafetensorsHeader parse_safetensors_header(std::span<const std::uint8_t> bytes, std::uint64_t file_size,
                                           std::string_view source = "<memory>");
// Just the header of a file (names, dtypes, shapes, metadata); reads no data.
SafetensorsHeader read_safetensors_header(const std::string& path);

// Every tensor of the file, on `device`. Throws IOError for a malformed file
// (including BOOL bytes other than 0 and 1).
std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device = cpu());
// The same with every floating-point tensor converted to `float_dtype` (a
// checkpoint loaded straight into bf16, as model.to(torch.bfloat16) after
// loading); integer and bool tensors keep their dtype. DTypeError when
// `float_dtype` is not a floating dtype.
//   auto w = anvil::load_safetensors("net.safetensors", anvil::cpu(), anvil::bf16);
std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device, DType float_dtype);
// The same from bytes already in memory (a whole file).
std::map<std::string, Tensor> load_safetensors(std::span<const std::uint8_t> bytes, Device device = cpu(),
                                               std::string_view source = "<memory>");

// Writes `tensors` (any devices, any strides) with keys sorted, the header
// padded with spaces to a multiple of 8 bytes, and `__metadata__` when
// `metadata` is not empty. ValueError for an undefined tensor, a duplicate or
// reserved ("__metadata__") name, or a name or value that is not UTF-8;
// IOError when the file cannot be written.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// The bytes save_safetensors writes.
std::vector<std::uint8_t> serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                const std::map<std::string, std::string>& metadata = {});

// The safetensors dtype name of `t` ("F32", "BOOL", …).
std::string_view safetensors_dtype_name(DType t) noexcept;

// --- NumPy .npy -------------------------------------------------------------------
// One array per file (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
// Read: format versions 1.0, 2.0 and 3.0; descr '<f4', '<f8', '<i4', '<i8'
// (big-endian '>' too, swapped on load), '|u1', '|b1'; C or Fortran order
// (a Fortran-order file loads as the same logical array, contiguous).
// Write: version 1.0 (2.0 when the header needs it), little-endian, C order,
// exactly as numpy.save writes it.

// Headers longer than this are rejected (numpy's own reader stops at 10000).
inline constexpr std::uint64_t kNpyMaxHeaderSize = 1 << 20;

struct NpyHeader {
  int major_version = 1;
  int minor_version = 0;
  DType dtype = f32;
  bool big_endian = false;
  bool fortran_order = false;
  Shape shape;
  std::uint64_t data_offset = 0;  // where the array's bytes start
  std::uint64_t data_size = 0;    // numel × element size
};

// Validates the magic, version, header dict and that a file of `file_size`
// bytes holds exactly the array. `bytes` is the start of the file, at least
// the whole header (the whole file is fine). Throws IOError.
NpyHeader parse_npy_header(std::span<const std::uint8_t> bytes, std::uint64_t file_size,
                           std::string_view source = "<memory>");

Tensor load_npy(const std::string& path, Device device = cpu());
Tensor load_npy(std::span<const std::uint8_t> bytes, Device device = cpu(), std::string_view source = "<memory>");

// Writes `t` (any device, any strides). ValueError for an undefined tensor.
void save_npy(const std::string& path, const Tensor& t);
std::vector<std::uint8_t> serialize_npy(const Tensor& t);

}  // namespace anvil
