// safetensors: round trips on every device, the exact format, interop with
// the reference implementation, and one malformed-file test per rule.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "anvil/anvil.h"
#include "anvil/io.h"
#include "device_test.h"
#include "io_test_support.h"

namespace {

using namespace anvil;
using anvil::testing::Bytes;
using anvil::testing::expect_error;
using anvil::testing::TempDir;

// A file from a header text and a data buffer; `length` overrides N.
Bytes craft(std::string_view header, const Bytes& data = {}, std::optional<std::uint64_t> length = std::nullopt) {
  // Reserved up front: growing an 8-byte vector here trips GCC 12's
  // -Warray-bounds false positive on the inlined memcpy.
  Bytes out;
  out.reserve(8 + header.size() + data.size());
  const std::uint64_t n = length.value_or(header.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  anvil::testing::append(out, header);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The file must be rejected with IOError containing every piece, both from
// memory and from disk.
void expect_rejected(const Bytes& file, std::initializer_list<std::string_view> pieces) {
  expect_error<IOError>([&] { load_safetensors(std::span<const std::uint8_t>(file)); }, pieces);
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  anvil::testing::write_bytes(path, file);
  expect_error<IOError>([&] { load_safetensors(path); }, pieces);
}

const Bytes k24(24, 0);  // room for a [2, 3] f32

// --- round trips on every device ----------------------------------------------------------

class SafetensorsDevices : public anvil::testing::DeviceTest {};

TEST_P(SafetensorsDevices, RoundTripEveryDTypeOntoTheDevice) {
  TempDir dir;
  const std::string path = dir.file("all.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& c : anvil::testing::interop_cases())
    tensors.emplace_back(c.name, anvil::testing::pattern_tensor(c, device()));
  save_safetensors(path, tensors, {{"epoch", "3"}});

  auto loaded = load_safetensors(path, device());
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& c : anvil::testing::interop_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor& t = loaded.at(c.name);
    EXPECT_EQ(t.device(), device());
    EXPECT_EQ(t.dtype(), c.dtype);
    EXPECT_EQ(t.shape(), Shape(c.shape));
    EXPECT_EQ(anvil::testing::tensor_bytes(t), anvil::testing::pattern_bytes(c.dtype, Shape(c.shape).numel(), c.salt));
  }
  EXPECT_EQ(read_safetensors_header(path).metadata, (std::map<std::string, std::string>{{"epoch", "3"}}));
}

TEST_P(SafetensorsDevices, LoadsFloatsStraightIntoAHalfDType) {
  TempDir dir;
  const std::string path = dir.file("mixed.safetensors");
  const Tensor w = tensor({0.1, -2.5, 70000.0, 1e-8});
  const Tensor steps = tensor({3, 4}, cpu(), i64);
  save_safetensors(path, {{"w", w}, {"steps", steps}, {"h", w.to(f16)}});
  for (DType t : {f16, bf16, f32}) {
    SCOPED_TRACE(to_string(t));
    auto loaded = load_safetensors(path, device(), t);
    EXPECT_EQ(loaded.at("w").device(), device());
    EXPECT_EQ(loaded.at("w").dtype(), t);
    EXPECT_EQ(loaded.at("h").dtype(), t);
    EXPECT_EQ(loaded.at("steps").dtype(), i64);
    EXPECT_EQ(loaded.at("steps").device(), device());
    // as w.to(t) rounds (tests/test_core_half.cpp holds that conversion to NumPy)
    EXPECT_EQ(loaded.at("w").to_vector<double>(), w.to(t).to_vector<double>());
    EXPECT_EQ(loaded.at("steps").to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 4}));
  }
  EXPECT_THROW((void)load_safetensors(path, device(), i32), DTypeError);
}

TEST_P(SafetensorsDevices, LoadingTouchesOnlyTheHostAndTheTargetDevice) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  save_safetensors(path, {{"w", anvil::testing::pattern_tensor({"w", f32, {16, 16}, 1})},
                          {"b", anvil::testing::pattern_tensor({"b", i64, {16}, 2})}});
  Ledger scope;
  const auto loaded = load_safetensors(path, device());
  const LedgerReport r = scope.report();
  for (const auto& [route, transfer] : r.transfers) {
    EXPECT_EQ(route.first, cpu()) << "a copy from " << route.first;
    EXPECT_EQ(route.second, device()) << "a copy to " << route.second;
  }
  if (!device().is_cpu()) {
    EXPECT_EQ(r.copies(cpu(), device()), 2u);
  }
  for (const auto& [name, t] : loaded) EXPECT_EQ(t.device(), device()) << name;
}

TEST_P(SafetensorsDevices, SavesNonContiguousDeviceTensors) {
  const Tensor base = arange(0, 12, 1, device(), f32).reshape({3, 4});
  const Tensor view = base.t();  // [4, 3], strided
  const auto bytes = serialize_safetensors({{"v", view}});
  const auto loaded = load_safetensors(std::span<const std::uint8_t>(bytes));
  EXPECT_EQ(loaded.at("v").shape(), Shape({4, 3}));
  EXPECT_EQ(loaded.at("v").to_vector<float>(), view.contiguous().to_vector<float>());
}

ANVIL_INSTANTIATE_DEVICE_TEST(SafetensorsDevices);

// --- the format as written ---------------------------------------------------------------------

TEST(SafetensorsFormat, HeaderIsSortedPaddedJsonWithContiguousOffsets) {
  const auto bytes =
      serialize_safetensors({{"b", tensor(std::vector<std::int32_t>{1, 2})}, {"a", tensor(std::vector<float>{0.5f})}});
  ASSERT_GE(bytes.size(), 8u);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<std::size_t>(i)];
  EXPECT_EQ(n % 8, 0u);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  const std::string json = R"({"a":{"data_offsets":[0,4],"dtype":"F32","shape":[1]},)"
                           R"("b":{"data_offsets":[4,12],"dtype":"I32","shape":[2]}})";
  EXPECT_EQ(header.substr(0, json.size()), json);
  EXPECT_EQ(header.find_first_not_of(' ', json.size()), std::string::npos) << "padding must be spaces";
  ASSERT_EQ(bytes.size(), 8 + n + 12);
  const float a = 0.5f;
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n, &a, 4), 0);
  const std::int32_t b[2] = {1, 2};
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + 4, b, 8), 0);
}

TEST(SafetensorsFormat, MetadataOnlyWhenGiven) {
  const auto without = serialize_safetensors({{"x", zeros({1})}});
  EXPECT_EQ(std::string(without.begin(), without.end()).find("__metadata__"), std::string::npos);
  const auto with = serialize_safetensors({{"x", zeros({1})}}, {{"k", "v \xe2\x9c\x93"}});
  const auto header = parse_safetensors_header(with, with.size());
  EXPECT_EQ(header.metadata.at("k"), "v \xe2\x9c\x93");
}

TEST(SafetensorsFormat, EmptyFileAndZeroSizedTensors) {
  const auto empty_file = serialize_safetensors({});
  EXPECT_TRUE(load_safetensors(std::span<const std::uint8_t>(empty_file)).empty());
  // Several zero-sized tensors share one offset.
  const auto bytes = serialize_safetensors({{"a", zeros({0})}, {"b", zeros({2, 0})}, {"c", ones({1})}});
  const auto loaded = load_safetensors(std::span<const std::uint8_t>(bytes));
  EXPECT_EQ(loaded.at("b").shape(), Shape({2, 0}));
  EXPECT_EQ(loaded.at("c").to_vector<float>(), std::vector<float>{1.0f});
}

TEST(SafetensorsFormat, ReaderAcceptsPaddingAndAnyKeyOrder) {
  const std::string header = R"({"x":{"shape":[2,3],"data_offsets":[0,24],"dtype":"F32"}})";
  const auto loaded = load_safetensors(craft(header + "      ", k24));
  EXPECT_EQ(loaded.at("x").shape(), Shape({2, 3}));
}

TEST(SafetensorsWrite, IsAtomicAndLeavesNoTemporaryFiles) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  save_safetensors(path, {{"x", ones({1000})}});
  save_safetensors(path, {{"y", zeros({2})}});  // overwrite with a smaller file
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
  const auto loaded = load_safetensors(path);
  EXPECT_EQ(loaded.size(), 1u);
  EXPECT_TRUE(loaded.count("y"));
  // A failing write leaves the old file and no temporary.
  expect_error<ValueError>(
      [&] {
        save_safetensors(path, {{"a", ones({1})}, {"a", ones({1})}});
      },
      {"save_safetensors", "duplicate", "'a'"});
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
  EXPECT_TRUE(load_safetensors(path).count("y"));
}

TEST(SafetensorsWrite, RejectsBadInputs) {
  expect_error<ValueError>([] { serialize_safetensors({{"__metadata__", ones({1})}}); }, {"reserved"});
  expect_error<ValueError>([] { serialize_safetensors({{"x", Tensor()}}); }, {"'x'", "undefined"});
  expect_error<ValueError>([] { serialize_safetensors({{"bad\xff", ones({1})}}); }, {"UTF-8"});
  expect_error<ValueError>([] { serialize_safetensors({{"x", ones({1})}}, {{"k", "\xc3"}}); }, {"UTF-8"});
  TempDir dir;
  expect_error<IOError>(
      [&] {
        save_safetensors(dir.file("missing/dir/m.safetensors"), {{"x", ones({1})}});
      },
      {"save_safetensors", "missing/dir"});
}

TEST(SafetensorsRead, MissingFileAndFolder) {
  TempDir dir;
  expect_error<IOError>([&] { load_safetensors(dir.file("nope.safetensors")); },
                        {"load_safetensors", "nope.safetensors", "No such file"});
  expect_error<IOError>([&] { load_safetensors(dir.path().string()); }, {"not a regular file", "a directory"});
}

// --- interop with the reference implementation -----------------------------------------

TEST(SafetensorsInterop, ReferenceReadsWhatAnvilWritesBitForBit) {
  TempDir dir;
  const std::string path = dir.file("anvil.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& c : anvil::testing::interop_cases()) tensors.emplace_back(c.name, anvil::testing::pattern_tensor(c));
  save_safetensors(path, tensors, {{"format", "np"}, {"note", "anvil \xe2\x9c\x93 interop"}});
  std::string output;
  EXPECT_EQ(anvil::testing::run_interop("check-safetensors '" + path + "'", output), 0) << output;
}

TEST(SafetensorsInterop, AnvilReadsWhatTheReferenceWritesBitForBit) {
  TempDir dir;
  const std::string path = dir.file("reference.safetensors");
  std::string output;
  ASSERT_EQ(anvil::testing::run_interop("write-safetensors '" + path + "'", output), 0) << output;
  const auto loaded = load_safetensors(path);
  ASSERT_EQ(loaded.size(), anvil::testing::interop_cases().size());
  for (const auto& c : anvil::testing::interop_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor& t = loaded.at(c.name);
    EXPECT_EQ(t.dtype(), c.dtype);
    EXPECT_EQ(t.shape(), Shape(c.shape));
    EXPECT_EQ(anvil::testing::tensor_bytes(t), anvil::testing::pattern_bytes(c.dtype, Shape(c.shape).numel(), c.salt));
  }
  const auto meta = read_safetensors_header(path).metadata;
  EXPECT_EQ(meta.at("note"), "anvil \xe2\x9c\x93 interop");
}

// --- malformed files: one test per validation rule ----------------------------------------

TEST(SafetensorsMalformed, FileShorterThanTheLength) {
  expect_rejected(Bytes{1, 0, 0}, {"load_safetensors", "too short", "expected at least 8 bytes, got 3"});
}

TEST(SafetensorsMalformed, HeaderLengthOverTheCap) {
  expect_rejected(craft("{}", {}, std::uint64_t{100'000'001}), {"too large", "at most 100000000", "got 100000001"});
  expect_rejected(craft("{}", {}, ~std::uint64_t{0}), {"too large"});
}

TEST(SafetensorsMalformed, HeaderLengthPastTheEndOfTheFile) {
  expect_rejected(craft("{}", {}, 3), {"past the end of the file", "expected at most 2", "got 3"});
}

TEST(SafetensorsMalformed, HeaderNotAnObject) {
  expect_rejected(craft("[]"), {"JSON object", "expected '{'", "got '['"});
  expect_rejected(craft(" {}"), {"expected '{'"});
  expect_rejected(craft(""), {"empty header"});
}

TEST(SafetensorsMalformed, InvalidJson) {
  expect_rejected(craft("{"), {"not valid JSON"});
  expect_rejected(craft(R"({"a": 1,})"), {"not valid JSON"});
  expect_rejected(craft("{} x"), {"not valid JSON"});
  expect_rejected(craft(std::string("{}\0xx", 5)), {"not valid JSON", "NUL byte at header offset 2"});
  expect_rejected(craft(std::string("{\"a\0\":1}", 8)), {"NUL byte"});
}

TEST(SafetensorsMalformed, InvalidUtf8) {
  expect_rejected(craft("{\"\xff\": {}}"), {"not valid JSON"});
  expect_rejected(craft("{\"__metadata__\": {\"k\": \"\xc3\x28\"}}"), {"not valid JSON"});
}

TEST(SafetensorsMalformed, DuplicateTensorKey) {
  const std::string e = R"({"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  expect_rejected(craft("{\"x\":" + e + ",\"x\":" + e + "}"), {"duplicate key 'x'"});
}

TEST(SafetensorsMalformed, DuplicateFieldInsideAnEntry) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","dtype":"F64","shape":[0],"data_offsets":[0,0]}})"),
                  {"duplicate key 'dtype'", "inside one entry"});
}

TEST(SafetensorsMalformed, DuplicateMetadataKey) {
  expect_rejected(craft(R"({"__metadata__":{"a":"1","a":"2"}})"), {"duplicate key 'a'"});
}

TEST(SafetensorsMalformed, NestingTooDeep) {
  expect_rejected(craft(R"({"x":{"shape":[[1]]}})"), {"nests JSON too deeply"});
  expect_rejected(craft(std::string(100000, '[')), {"expected '{'"});
  std::string deep_objects = "{\"x\":";
  std::string deep_arrays = "{\"x\":{\"shape\":";
  for (int i = 0; i < 100000; ++i) {
    deep_objects += "{\"a\":";
    deep_arrays += "[";
  }
  expect_rejected(craft(deep_objects), {"too deeply"});
  expect_rejected(craft(deep_arrays), {"too deeply"});
}

TEST(SafetensorsMalformed, EntryNotAnObject) {
  expect_rejected(craft(R"({"x":[1,2]})"), {"tensor 'x'", "must be an object", "got array"});
}

TEST(SafetensorsMalformed, UnknownField) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[0,0],"extra":1}})"),
                  {"tensor 'x'", "unknown field 'extra'"});
}

TEST(SafetensorsMalformed, MissingField) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[0]}})"), {"tensor 'x'", "no \"data_offsets\""});
  expect_rejected(craft(R"({"x":{"shape":[0],"data_offsets":[0,0]}})"), {"no \"dtype\""});
  expect_rejected(craft(R"({"x":{"dtype":"F32","data_offsets":[0,0]}})"), {"no \"shape\""});
}

TEST(SafetensorsMalformed, DTypeNotAString) {
  expect_rejected(craft(R"({"x":{"dtype":4,"shape":[0],"data_offsets":[0,0]}})"), {"dtype must be a string"});
}

TEST(SafetensorsMalformed, UnknownDType) {
  expect_rejected(craft(R"({"x":{"dtype":"F33","shape":[0],"data_offsets":[0,0]}})"),
                  {"tensor 'x'", "unknown dtype 'F33'", "F32, F64, F16, BF16, I32, I64, U8, BOOL"});
}

TEST(SafetensorsMalformed, DTypesAnvilLacksNameTheKeyAndDType) {
  for (const char* dt : {"I8", "I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2"}) {
    SCOPED_TRACE(dt);
    expect_rejected(craft(std::string(R"({"weight":{"dtype":")") + dt + R"(","shape":[0],"data_offsets":[0,0]}})"),
                    {"tensor 'weight'", std::string_view(dt), "does not support"});
  }
}

TEST(SafetensorsMalformed, ShapeNotAnArrayOfNonNegativeIntegers) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":3,"data_offsets":[0,12]}})"), {"shape must be an array"});
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})"),
                  {"shape[0] must be a non-negative integer", "got -1"});
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})"),
                  {"shape[0] must be a non-negative integer"});
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})"), {"got string"});
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,0]}})"),
                  {"shape[0] must be a non-negative integer"});
}

TEST(SafetensorsMalformed, TooManyDimensions) {
  expect_rejected(craft(R"({"x":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})"),
                  {"too many dimensions", "at most 8", "got 9"});
}

TEST(SafetensorsMalformed, ShapeProductOverflows) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
                  {"tensor 'x'", "overflows"});
  // Overflowing dims are rejected even beside a zero dim.
  expect_rejected(craft(R"({"x":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})"),
                  {"overflows"});
  expect_rejected(craft(R"({"x":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})"), {"overflows"});
}

TEST(SafetensorsMalformed, OffsetsNotTwoNonNegativeIntegers) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[0]}})"), {"[begin, end]", "array of 1"});
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":"0"}})"), {"[begin, end]", "string"});
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[-4,0]}})"),
                  {"data_offsets[0] must be a non-negative integer"});
}

TEST(SafetensorsMalformed, BeginAfterEnd) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[24,0]}})", k24), {"begin <= end"});
}

TEST(SafetensorsMalformed, SizeDoesNotMatchShapeAndDType) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", Bytes(20)),
                  {"tensor 'x'", "expected a span of 24 bytes", "[2, 3]", "got 20"});
  expect_rejected(craft(R"({"x":{"dtype":"F64","shape":[2,3],"data_offsets":[0,24]}})", k24),
                  {"expected a span of 48 bytes", "got 24"});
}

TEST(SafetensorsMalformed, OffsetsOutsideTheBuffer) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", Bytes(16)),
                  {"tensor 'x'", "past the end of the data buffer", "expected end <= 16", "got 24"});
  expect_rejected(
      craft(R"({"x":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}})"),
      {"past the end"});
}

TEST(SafetensorsMalformed, NotStartingAtZero) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", Bytes(8)),
                  {"gap before tensor 'x'", "start at byte 0", "got 4"});
}

TEST(SafetensorsMalformed, GapBetweenTensors) {
  expect_rejected(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                        Bytes(12)),
                  {"gap before tensor 'b'", "where 'a' ends", "got 8"});
}

TEST(SafetensorsMalformed, OverlappingTensors) {
  expect_rejected(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        Bytes(12)),
                  {"'b' overlaps tensor 'a'", "start at 8", "got 4"});
  expect_rejected(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                        Bytes(8)),
                  {"overlaps"});
}

TEST(SafetensorsMalformed, OffsetsOutOfOrderAreFineWhenContiguous) {
  // Order in the JSON does not matter; the layout does.
  const auto loaded = load_safetensors(craft(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},)"
                                             R"("b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                                             Bytes{7, 9}));
  EXPECT_EQ(loaded.at("a").to_vector<std::uint8_t>(), std::vector<std::uint8_t>{9});
  EXPECT_EQ(loaded.at("b").to_vector<std::uint8_t>(), std::vector<std::uint8_t>{7});
}

TEST(SafetensorsMalformed, TrailingBytesAfterTheLastTensor) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", Bytes(25)),
                  {"trailing bytes", "expected 24", "got 25"});
  expect_rejected(craft("{}", Bytes(1)), {"trailing bytes", "expected 0", "got 1"});
}

TEST(SafetensorsMalformed, MetadataNotAnObjectOfStrings) {
  expect_rejected(craft(R"({"__metadata__":["a"]})"), {"\"__metadata__\" must be an object", "got array"});
  expect_rejected(craft(R"({"__metadata__":{"epoch":3}})"), {"value of 'epoch' must be a string", "got number"});
}

TEST(SafetensorsMalformed, BoolBytesOtherThanZeroAndOne) {
  expect_rejected(craft(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", Bytes{1, 0, 2}),
                  {"tensor 'm'", "byte 2 at element 2", "expected 0 or 1"});
}

TEST(SafetensorsMalformed, MessagesNameTheFile) {
  TempDir dir;
  const std::string path = dir.file("named.safetensors");
  anvil::testing::write_bytes(path, craft("[]"));
  expect_error<IOError>([&] { load_safetensors(path); }, {"load_safetensors: '", "named.safetensors'"});
  expect_error<IOError>([&] { read_safetensors_header(path); }, {"named.safetensors"});
}

}  // namespace
