// safetensors read/write. The reader treats every file as untrusted: it
// validates the header completely (see validate_layout) before it allocates
// anything on a device.
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "anvil/io.h"
#include "anvil/ops.h"
#include "io/file_util.h"

namespace anvil {

static_assert(std::endian::native == std::endian::little, "safetensors and .npy readers assume a little-endian host");

namespace {

using json = nlohmann::json;
using detail::cat;
using detail::quote;

constexpr std::string_view kOp = "load_safetensors";
constexpr std::string_view kMetadataKey = "__metadata__";
// {"name": {"shape": [..]}} is depth 2; nothing in a valid header nests deeper.
constexpr int kMaxJsonDepth = 3;

struct DTypeName {
  std::string_view name;
  std::optional<DType> dtype;  // nullopt: a safetensors dtype anvil lacks
};
constexpr std::array<DTypeName, 21> kDTypeNames{{
    {"F32", f32},
    {"F64", f64},
    {"I32", i32},
    {"I64", i64},
    {"U8", u8},
    {"BOOL", boolean},
    {"F16", f16},
    {"BF16", bf16},
    {"I8", std::nullopt},
    {"I16", std::nullopt},
    {"U16", std::nullopt},
    {"U32", std::nullopt},
    {"U64", std::nullopt},
    {"F8_E5M2", std::nullopt},
    {"F8_E4M3", std::nullopt},
    {"F8_E8M0", std::nullopt},
    {"E8M0", std::nullopt},
    {"F4", std::nullopt},
    {"F6_E2M3", std::nullopt},
    {"F6_E3M2", std::nullopt},
    {"C64", std::nullopt},
}};
constexpr std::string_view kSupported = "F32, F64, F16, BF16, I32, I64, U8, BOOL";

std::uint64_t read_le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// nlohmann's messages may quote raw input bytes; keep the message printable.
std::string printable(std::string_view s) {
  std::string q = quote(s);
  return q.substr(1, q.size() - 2);
}

class HeaderParser {
 public:
  HeaderParser(std::string_view source) : source_(source) {}

  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    throw IOError(cat(kOp, ": ", quote(source_), ": ", args...));
  }

  json parse_json(std::string_view text) const {
    // nlohmann keeps the last of duplicate keys silently; the callback sees
    // every key and refuses a repeat, and caps nesting before it can grow.
    std::vector<std::set<std::string>> keys_per_object;
    json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
      switch (event) {
        case json::parse_event_t::object_start:
        case json::parse_event_t::array_start:
          if (depth >= kMaxJsonDepth)
            fail("header nests JSON too deeply; expected at most ", kMaxJsonDepth,
                 " levels ({\"name\": {\"shape\": [...]}}), got more");
          if (event == json::parse_event_t::object_start) keys_per_object.emplace_back();
          break;
        case json::parse_event_t::object_end:
          keys_per_object.pop_back();
          break;
        case json::parse_event_t::key: {
          const auto& key = parsed.get_ref<const std::string&>();
          if (!keys_per_object.back().insert(key).second)
            fail("duplicate key ", quote(key), " in the header; expected each key once, got it twice",
                 keys_per_object.size() > 1 ? " (inside one entry)" : "");
          break;
        }
        default:
          break;
      }
      return true;
    };
    try {
      return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                         /*ignore_comments=*/false);
    } catch (const json::exception& e) {
      fail("header is not valid JSON: ", printable(e.what()));
    }
  }

  SafetensorsHeader parse(std::span<const std::uint8_t> bytes, std::uint64_t file_size) const {
    if (file_size < 8)
      fail("file is too short to hold the 8-byte header length; expected at least 8 bytes, got ", file_size);
    if (bytes.size() < 8) fail("only ", bytes.size(), " bytes were given; expected at least 8");
    SafetensorsHeader header;
    header.header_size = read_le64(bytes.data());
    const std::uint64_t n = header.header_size;
    if (n > kSafetensorsMaxHeaderSize)
      fail("header length is too large; expected at most ", kSafetensorsMaxHeaderSize, " bytes, got ", n);
    if (n > file_size - 8)
      fail("header length runs past the end of the file; expected at most ", file_size - 8, " bytes (the file has ",
           file_size, "), got ", n);
    if (bytes.size() < 8 + n) fail("only ", bytes.size(), " bytes were given; expected the header's ", 8 + n);
    header.data_size = file_size - 8 - n;

    const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, static_cast<std::size_t>(n));
    if (text.empty() || text.front() != '{')
      fail("header must be a JSON object; expected '{' at byte 8, got ",
           text.empty() ? std::string("an empty header") : quote(text.substr(0, 1)));
    // nlohmann stops at a raw NUL as if the input ended there, which would
    // accept `{}\0garbage`; JSON never contains one outside escapes.
    if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
      fail("header is not valid JSON: a NUL byte at header offset ", nul, "; expected JSON text");
    const json root = parse_json(text);
    if (!root.is_object()) fail("header must be a JSON object; got ", root.type_name());

    for (const auto& [key, value] : root.items()) {
      if (key == kMetadataKey)
        parse_metadata(value, header.metadata);
      else
        header.tensors.push_back(parse_entry(key, value));
    }
    validate_layout(header);
    return header;
  }

 private:
  void parse_metadata(const json& value, std::map<std::string, std::string>& out) const {
    if (!value.is_object())
      fail("\"__metadata__\" must be an object of strings; expected object, got ", value.type_name());
    for (const auto& [k, v] : value.items()) {
      if (!v.is_string())
        fail("\"__metadata__\" value of ", quote(k), " must be a string; expected string, got ", v.type_name());
      out.emplace(k, v.get<std::string>());
    }
  }

  std::uint64_t unsigned_at(const json& v, const std::string& name, const char* field, std::size_t i) const {
    if (!v.is_number_unsigned())
      fail("tensor ", quote(name), ": ", field, "[", i, "] must be a non-negative integer; got ",
           v.is_number() ? printable(v.dump()) : std::string(v.type_name()));
    return v.get<std::uint64_t>();
  }

  SafetensorsTensorInfo parse_entry(const std::string& name, const json& entry) const {
    SafetensorsTensorInfo info;
    info.name = name;
    if (!entry.is_object())
      fail("tensor ", quote(name), " must be an object with dtype, shape and data_offsets; got ", entry.type_name());
    for (const auto& [field, v] : entry.items()) {
      (void)v;
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        fail("tensor ", quote(name), " has an unknown field ", quote(field),
             "; expected only dtype, shape and data_offsets");
    }
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(field)) fail("tensor ", quote(name), " has no \"", field, "\" field");

    const json& dtype = entry.at("dtype");
    if (!dtype.is_string()) fail("tensor ", quote(name), ": dtype must be a string; got ", dtype.type_name());
    const auto& dtype_name = dtype.get_ref<const std::string&>();
    const auto it =
        std::find_if(kDTypeNames.begin(), kDTypeNames.end(), [&](const DTypeName& d) { return d.name == dtype_name; });
    if (it == kDTypeNames.end())
      fail("tensor ", quote(name), " has an unknown dtype ", quote(dtype_name), "; expected one of ", kSupported);
    if (!it->dtype)
      fail("tensor ", quote(name), " has dtype ", dtype_name, ", which anvil does not support; expected one of ",
           kSupported, "; convert it first (e.g. to F32)");
    info.dtype = *it->dtype;

    const json& shape = entry.at("shape");
    if (!shape.is_array()) fail("tensor ", quote(name), ": shape must be an array; got ", shape.type_name());
    if (shape.size() > static_cast<std::size_t>(kMaxDims))
      fail("tensor ", quote(name), " has too many dimensions; expected at most ", kMaxDims, ", got ", shape.size());
    // The product of the non-zero dims must fit, so that no partial product
    // overflows whatever order a consumer multiplies in.
    std::vector<std::int64_t> dims;
    std::uint64_t nonzero_product = 1;
    bool has_zero = false;
    const std::uint64_t esize = element_size(info.dtype);
    const std::uint64_t max_numel = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / esize;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const std::uint64_t d = unsigned_at(shape[i], name, "shape", i);
      if (d == 0)
        has_zero = true;
      else if (d > max_numel || nonzero_product > max_numel / d)
        fail("tensor ", quote(name), ": the size of shape ", printable(shape.dump()), " overflows; expected at most ",
             max_numel, " elements of ", esize, " bytes");
      else
        nonzero_product *= d;
      dims.push_back(static_cast<std::int64_t>(d));
    }
    const std::uint64_t numel = has_zero ? 0 : nonzero_product;
    info.shape = Shape(dims);

    const json& offsets = entry.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2)
      fail("tensor ", quote(name), ": data_offsets must be an array [begin, end]; got ",
           offsets.is_array() ? cat("an array of ", offsets.size()) : std::string(offsets.type_name()));
    info.begin = unsigned_at(offsets[0], name, "data_offsets", 0);
    info.end = unsigned_at(offsets[1], name, "data_offsets", 1);
    if (info.begin > info.end)
      fail("tensor ", quote(name), " has data_offsets [", info.begin, ", ", info.end,
           "]; expected begin <= end, got begin > end");
    const std::uint64_t nbytes = numel * esize;
    if (info.end - info.begin != nbytes)
      fail("tensor ", quote(name), " has data_offsets [", info.begin, ", ", info.end, "]; expected a span of ", nbytes,
           " bytes (shape ", info.shape, " of ", info.dtype, ", ", esize, " bytes each), got ", info.end - info.begin);
    return info;
  }

  // Offsets: inside the buffer, contiguous from 0, in order, not overlapping,
  // and covering the buffer exactly (no trailing bytes).
  void validate_layout(SafetensorsHeader& header) const {
    auto& ts = header.tensors;
    for (const auto& t : ts)
      if (t.end > header.data_size)
        fail("tensor ", quote(t.name), " has data_offsets [", t.begin, ", ", t.end,
             "] past the end of the data buffer; expected end <= ", header.data_size, ", got ", t.end);
    std::stable_sort(ts.begin(), ts.end(), [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t expected = 0;
    const SafetensorsTensorInfo* previous = nullptr;
    for (const auto& t : ts) {
      if (t.begin != expected) {
        if (t.begin < expected)
          fail("tensor ", quote(t.name), " overlaps tensor ", quote(previous->name), "; expected it to start at ",
               expected, " (where ", quote(previous->name), " ends), got ", t.begin);
        fail("there is a gap before tensor ", quote(t.name), "; expected it to start at byte ", expected,
             previous ? cat(" (where ", quote(previous->name), " ends)") : std::string(" of the buffer"), ", got ",
             t.begin, "; tensors must be contiguous from offset 0");
      }
      expected = t.end;
      previous = &t;
    }
    if (expected != header.data_size)
      fail("the data buffer has trailing bytes; expected ", expected, " bytes (the end of the last tensor), got ",
           header.data_size);
  }

  std::string_view source_;
};

// BOOL bytes must be 0 or 1: anything else is not a bool in anvil's kernels.
void check_bools(const SafetensorsTensorInfo& t, const std::uint8_t* p, std::string_view source) {
  if (t.dtype != boolean) return;
  for (std::uint64_t i = 0; i < t.end - t.begin; ++i)
    if (p[i] > 1)
      throw IOError(cat(kOp, ": ", quote(source), ": tensor ", quote(t.name), " (BOOL) holds byte ",
                        static_cast<int>(p[i]), " at element ", i, "; expected 0 or 1"));
}

// --- writing ---------------------------------------------------------------------

constexpr std::string_view kSaveOp = "save_safetensors";

struct PreparedEntry {
  std::string name;
  Tensor tensor;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

std::vector<PreparedEntry> prepare(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<PreparedEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    ANVIL_CHECK(t.defined(), ValueError, kSaveOp, ": tensor ", quote(name), " is undefined; expected a defined tensor");
    ANVIL_CHECK(name != kMetadataKey, ValueError, kSaveOp, ": the name \"__metadata__\" is reserved; expected ",
                "a tensor name, got \"__metadata__\"");
    entries.push_back({name, t, 0, 0});
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < entries.size(); ++i)
    ANVIL_CHECK(entries[i].name != entries[i - 1].name, ValueError, kSaveOp, ": duplicate tensor name ",
                quote(entries[i].name), "; expected each name once");
  std::uint64_t offset = 0;
  for (auto& e : entries) {
    e.begin = offset;
    offset += e.tensor.nbytes();
    e.end = offset;
  }
  return entries;
}

std::string header_text(const std::vector<PreparedEntry>& entries, const std::map<std::string, std::string>& metadata) {
  json root = json::object();
  if (!metadata.empty()) root[std::string(kMetadataKey)] = metadata;
  for (const auto& e : entries) {
    json shape = json::array();
    for (std::int64_t d : e.tensor.shape()) shape.push_back(d);
    root[e.name] = {{"dtype", safetensors_dtype_name(e.tensor.dtype())},
                    {"shape", std::move(shape)},
                    {"data_offsets", {e.begin, e.end}}};
  }
  std::string text;
  try {
    text = root.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::strict);
  } catch (const json::exception&) {
    throw ValueError(cat(kSaveOp, ": a tensor name or metadata string is not valid UTF-8; expected UTF-8 text"));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void produce(detail::OutputSink& sink, const std::vector<std::pair<std::string, Tensor>>& tensors,
             const std::map<std::string, std::string>& metadata) {
  const auto entries = prepare(tensors);
  const std::string text = header_text(entries, metadata);
  std::array<std::uint8_t, 8> length{};
  for (int i = 0; i < 8; ++i) length[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(text.size() >> (8 * i));
  sink.write(length.data(), length.size());
  sink.write(text.data(), text.size());
  // One tensor on the host at a time keeps the peak memory at one tensor.
  for (const auto& e : entries) {
    if (e.end == e.begin) continue;
    const Tensor host = e.tensor.contiguous().cpu();
    sink.write(host.raw_data_ptr(), host.nbytes());
  }
}

class VectorSink final : public detail::OutputSink {
 public:
  void write(const void* data, std::size_t n) override {
    const auto* p = static_cast<const std::uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
  }
  std::vector<std::uint8_t> bytes;
};

}  // namespace

std::string_view safetensors_dtype_name(DType t) noexcept {
  for (const auto& d : kDTypeNames)
    if (d.dtype == t) return d.name;
  return "?";
}

SafetensorsHeader parse_safetensors_header(std::span<const std::uint8_t> bytes, std::uint64_t file_size,
                                           std::string_view source) {
  return HeaderParser(source).parse(bytes, file_size);
}

namespace {
// Reads the length and the header only: a lying length never allocates more
// than the file holds.
SafetensorsHeader read_header(const detail::InputFile& file) {
  std::vector<std::uint8_t> head;
  if (file.size() >= 8) {
    head.resize(8);
    file.read_at(head.data(), 8, 0, "the header length");
    const std::uint64_t n = read_le64(head.data());
    if (n <= kSafetensorsMaxHeaderSize && n <= file.size() - 8) {
      head.resize(static_cast<std::size_t>(8 + n));
      file.read_at(head.data() + 8, static_cast<std::size_t>(n), 8, "the header");
    }
  }
  return parse_safetensors_header(head, file.size(), file.path());
}
}  // namespace

SafetensorsHeader read_safetensors_header(const std::string& path) {
  detail::InputFile file(path, kOp);
  return read_header(file);
}

std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device) {
  detail::InputFile file(path, kOp);
  const SafetensorsHeader header = read_header(file);
  std::map<std::string, Tensor> out;
  std::vector<std::uint8_t> staging;
  for (const auto& t : header.tensors) {
    const std::uint64_t n = t.end - t.begin;
    const std::string what = cat("tensor ", quote(t.name));
    if (device.is_cpu()) {
      // Straight from the file into the tensor's storage.
      Tensor x = empty(t.shape, cpu(), t.dtype);
      if (n > 0) {
        auto* dst = static_cast<std::uint8_t*>(x.raw_data_ptr());
        file.read_at(dst, static_cast<std::size_t>(n), header.data_offset() + t.begin, what);
        check_bools(t, dst, path);
      }
      out.emplace(t.name, std::move(x));
    } else {
      staging.resize(static_cast<std::size_t>(n));
      if (n > 0) file.read_at(staging.data(), staging.size(), header.data_offset() + t.begin, what);
      check_bools(t, staging.data(), path);
      out.emplace(t.name, from_host(staging.data(), t.shape, t.dtype, device));
    }
  }
  return out;
}

std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device, DType float_dtype) {
  ANVIL_CHECK(is_floating(float_dtype), DTypeError, kOp,
              ": the dtype for floating-point tensors must be floating; expected f16, bf16, f32 or f64, got ",
              float_dtype);
  // Read on the host, then convert where it is cheaper (Tensor::to: before
  // the move when narrowing).
  std::map<std::string, Tensor> out = load_safetensors(path, cpu());
  for (auto& [name, t] : out) t = is_floating(t.dtype()) ? t.to(device, float_dtype) : t.to(device);
  return out;
}

std::map<std::string, Tensor> load_safetensors(std::span<const std::uint8_t> bytes, Device device,
                                               std::string_view source) {
  const SafetensorsHeader header = parse_safetensors_header(bytes, bytes.size(), source);
  std::map<std::string, Tensor> out;
  for (const auto& t : header.tensors) {
    const std::uint8_t* p = bytes.data() + header.data_offset() + t.begin;
    check_bools(t, p, source);
    out.emplace(t.name, from_host(p, t.shape, t.dtype, device));
  }
  return out;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Validate names before a temporary file exists.
  (void)header_text(prepare(tensors), metadata);
  detail::write_file_atomic(path, kSaveOp, [&](detail::OutputSink& sink) { produce(sink, tensors, metadata); });
}

std::vector<std::uint8_t> serialize_safetensors(const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                const std::map<std::string, std::string>& metadata) {
  VectorSink sink;
  produce(sink, tensors, metadata);
  return std::move(sink.bytes);
}

}  // namespace anvil
