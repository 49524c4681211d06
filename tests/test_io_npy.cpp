// .npy: round trips on every device, numpy's exact format, interop with
// numpy, and one malformed-file test per rule.
#include <gtest/gtest.h>

#include <cstring>
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

// A .npy file: magic, version, length (2 or 4 bytes), header text, data.
Bytes craft(std::string_view header, const Bytes& data = {}, int major = 1, int minor = 0,
            std::optional<std::uint32_t> length = std::nullopt) {
  Bytes out{0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), static_cast<std::uint8_t>(minor)};
  const std::uint32_t n = length.value_or(static_cast<std::uint32_t>(header.size()));
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  anvil::testing::append(out, header);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string dict(std::string_view descr, std::string_view fortran, std::string_view shape) {
  return std::string("{'descr': '") + std::string(descr) + "', 'fortran_order': " + std::string(fortran) +
         ", 'shape': " + std::string(shape) + ", }\n";
}

void expect_rejected(const Bytes& file, std::initializer_list<std::string_view> pieces) {
  expect_error<IOError>([&] { load_npy(std::span<const std::uint8_t>(file)); }, pieces);
  TempDir dir;
  const std::string path = dir.file("bad.npy");
  anvil::testing::write_bytes(path, file);
  expect_error<IOError>([&] { load_npy(path); }, pieces);
}

template <typename T>
Bytes le_bytes(std::initializer_list<T> values) {
  Bytes out(values.size() * sizeof(T));
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

// --- round trips ---------------------------------------------------------------------------------

class NpyDevices : public anvil::testing::DeviceTest {};

TEST_P(NpyDevices, RoundTripEveryDTypeOntoTheDevice) {
  TempDir dir;
  for (const auto& c : anvil::testing::npy_cases()) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file(std::string(c.name) + ".npy");
    save_npy(path, anvil::testing::pattern_tensor(c, device()));
    const Tensor t = load_npy(path, device());
    EXPECT_EQ(t.device(), device());
    EXPECT_EQ(t.dtype(), c.dtype);
    EXPECT_EQ(t.shape(), Shape(c.shape));
    EXPECT_EQ(anvil::testing::tensor_bytes(t), anvil::testing::pattern_bytes(c.dtype, Shape(c.shape).numel(), c.salt));
  }
}

TEST_P(NpyDevices, Bf16HasNoNpyDtypeAndSaysSo) {
  TempDir dir;
  const Tensor b = zeros({2}, device(), bf16);
  EXPECT_THROW(save_npy(dir.file("b.npy"), b), DTypeError);
  EXPECT_THROW((void)serialize_npy(b), DTypeError);
  EXPECT_TRUE(dir.entries().empty());
}

TEST_P(NpyDevices, FortranOrderLoadsAsTheLogicalArray) {
  // [[0, 1, 2], [3, 4, 5]] stored column by column.
  const Bytes file = craft(dict("<i4", "True", "(2, 3)"), le_bytes<std::int32_t>({0, 3, 1, 4, 2, 5}));
  const Tensor t = load_npy(std::span<const std::uint8_t>(file), device());
  EXPECT_EQ(t.device(), device());
  EXPECT_EQ(t.shape(), Shape({2, 3}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<std::int32_t>(), (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
  TempDir dir;
  anvil::testing::write_bytes(dir.file("f.npy"), file);
  EXPECT_EQ(load_npy(dir.file("f.npy"), device()).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
}

TEST_P(NpyDevices, SavesNonContiguousTensors) {
  const Tensor base = arange(0, 6, 1, device(), i64).reshape({2, 3});
  const Bytes bytes = serialize_npy(base.t());
  const Tensor back = load_npy(std::span<const std::uint8_t>(bytes));
  EXPECT_EQ(back.shape(), Shape({3, 2}));
  EXPECT_EQ(back.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 3, 1, 4, 2, 5}));
}

ANVIL_INSTANTIATE_DEVICE_TEST(NpyDevices);

// --- the format --------------------------------------------------------------------------------------

TEST(NpyFormat, HeaderIsExactlyWhatNumpyWrites) {
  const Bytes bytes = serialize_npy(zeros({2, 3}));
  // numpy 1.24: np.save(f, np.zeros((2, 3), np.float32)) → 128-byte header.
  ASSERT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  const std::string header(bytes.begin() + 10, bytes.begin() + 128);
  const std::string text = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(header.substr(0, text.size()), text);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.find_first_not_of(' ', text.size()), header.size() - 1);
  // 0-d and 1-d shapes: (), (7,)
  const Bytes scalar = serialize_npy(scalar_tensor(1.5, cpu(), f64));
  EXPECT_NE(std::string(scalar.begin(), scalar.end()).find("'shape': (), }"), std::string::npos);
  const Bytes vec = serialize_npy(zeros({7}, boolean));
  EXPECT_NE(std::string(vec.begin(), vec.end()).find("{'descr': '|b1', 'fortran_order': False, 'shape': (7,), }"),
            std::string::npos);
  EXPECT_EQ((vec.size() - 7) % 64, 0u);
}

TEST(NpyFormat, ReadsVersions2And3BigEndianAndHeaderVariants) {
  const Bytes data = le_bytes<std::int64_t>({1, -2});
  for (int major : {2, 3}) {
    const Bytes f = craft(dict("<i8", "False", "(2,)"), data, major);
    EXPECT_EQ(load_npy(std::span<const std::uint8_t>(f)).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, -2}));
    EXPECT_EQ(parse_npy_header(f, f.size()).major_version, major);
  }
  const Bytes big = craft(dict(">i4", "False", "(2,)"), Bytes{0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe});
  EXPECT_EQ(load_npy(std::span<const std::uint8_t>(big)).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{258, -2}));
  // Double quotes, other key order, no trailing comma, extra spaces: still a dict numpy would read.
  const Bytes variant = craft("{ \"shape\" : ( 2 , ) ,\"fortran_order\":False,'descr':'|u1'}   \n", Bytes{4, 5});
  EXPECT_EQ(load_npy(std::span<const std::uint8_t>(variant)).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{4, 5}));
}

TEST(NpyWrite, IsAtomicAndRejectsUndefined) {
  TempDir dir;
  const std::string path = dir.file("x.npy");
  save_npy(path, ones({100}));
  save_npy(path, zeros({2}));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.npy"});
  EXPECT_EQ(load_npy(path).shape(), Shape({2}));
  expect_error<ValueError>([&] { save_npy(path, Tensor()); }, {"save_npy", "undefined"});
  expect_error<IOError>([&] { save_npy(dir.file("no/such/x.npy"), ones({1})); }, {"save_npy", "no/such"});
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"x.npy"});
}

// --- interop with numpy ------------------------------------------------------------------------------

TEST(NpyInterop, NumpyReadsWhatAnvilWritesAndTheFilesAreIdentical) {
  TempDir dir;
  for (const auto& c : anvil::testing::npy_cases())
    save_npy(dir.file(std::string(c.name) + ".npy"), anvil::testing::pattern_tensor(c));
  std::string output;
  EXPECT_EQ(anvil::testing::run_interop("check-npy '" + dir.path().string() + "'", output), 0) << output;
}

TEST(NpyInterop, AnvilReadsWhatNumpyWrites) {
  TempDir dir;
  std::string output;
  ASSERT_EQ(anvil::testing::run_interop("write-npy '" + dir.path().string() + "'", output), 0) << output;
  for (const auto& c : anvil::testing::npy_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor t = load_npy(dir.file(std::string(c.name) + ".npy"));
    EXPECT_EQ(t.dtype(), c.dtype);
    EXPECT_EQ(t.shape(), Shape(c.shape));
    EXPECT_EQ(anvil::testing::tensor_bytes(t), anvil::testing::pattern_bytes(c.dtype, Shape(c.shape).numel(), c.salt));
  }
  const Tensor fortran = load_npy(dir.file("fortran.npy"));
  EXPECT_EQ(fortran.shape(), Shape({3, 4}));
  EXPECT_EQ(anvil::testing::tensor_bytes(fortran), anvil::testing::pattern_bytes(i32, 12, 10));
  const Tensor big = load_npy(dir.file("bigendian.npy"));
  EXPECT_EQ(anvil::testing::tensor_bytes(big), anvil::testing::pattern_bytes(f64, 5, 2));
  for (const char* v : {"version2.npy", "version3.npy"})
    EXPECT_EQ(anvil::testing::tensor_bytes(load_npy(dir.file(v))), anvil::testing::pattern_bytes(i64, 4, 11)) << v;
}

// --- malformed files: one test per rule ---------------------------------------------------------

TEST(NpyMalformed, BadMagic) {
  expect_rejected(Bytes{'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}, {"load_npy", "not a .npy file", "magic"});
  expect_rejected(Bytes{0x93, 'N', 'U'}, {"not a .npy file", "a 3-byte file"});
}

TEST(NpyMalformed, UnsupportedVersion) {
  expect_rejected(craft(dict("<f4", "False", "()"), Bytes(4), 4), {"version", "1.0, 2.0 or 3.0", "got 4.0"});
  expect_rejected(craft(dict("<f4", "False", "()"), Bytes(4), 1, 1), {"got 1.1"});
}

TEST(NpyMalformed, FileEndsInsideTheLength) {
  expect_rejected(Bytes{0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 5, 0}, {"inside the header length"});
}

TEST(NpyMalformed, HeaderLengthPastTheEnd) {
  expect_rejected(craft(dict("<f4", "False", "()"), {}, 1, 0, 60000), {"header runs past the end of the file"});
}

TEST(NpyMalformed, HeaderLengthOverTheCap) {
  expect_rejected(craft("{}", {}, 2, 0, 0x7fffffff), {"header length is too large", "at most 1048576"});
}

TEST(NpyMalformed, HeaderNotEndingInNewline) {
  std::string h = dict("<f4", "False", "()");
  h.back() = ' ';
  expect_rejected(craft(h, Bytes(4)), {"must end with", "newline"});
  expect_rejected(craft(dict("<f4", "False", "()") + "x\n", Bytes(4)), {"must end with"});
}

TEST(NpyMalformed, NotADict) {
  expect_rejected(craft("['descr']\n"), {"malformed header", "expected '{'"});
  expect_rejected(craft("{'descr': '<f4' 'shape': ()}\n"), {"expected ',' or '}'"});
  expect_rejected(craft("{'descr': '<f4"), {"unterminated string"});
  expect_rejected(craft("{'descr': '<f4\n"), {"plain ASCII"});
  expect_rejected(craft("{descr: '<f4'}\n"), {"a quoted string"});
}

TEST(NpyMalformed, MissingUnknownAndDuplicateKeys) {
  expect_rejected(craft("{'descr': '<f4', 'fortran_order': False, }\n"), {"lacks the key 'shape'"});
  expect_rejected(craft("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}\n"),
                  {"unknown key 'extra'"});
  expect_rejected(craft("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}\n"),
                  {"duplicate key 'descr'"});
}

TEST(NpyMalformed, UnsupportedDTypes) {
  for (const char* d : {"<f16", "<u2", "|i1", "<c8", "<U3", "|O", "=f4", "<f4 ", "=f2"}) {
    SCOPED_TRACE(d);
    expect_rejected(craft(dict(d, "False", "(1,)"), Bytes(8)), {"dtype '", "not supported by anvil", "'<f4'"});
  }
  expect_rejected(craft("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", Bytes(4)),
                  {"structured dtypes"});
}

TEST(NpyMalformed, FortranOrderNotABool) {
  expect_rejected(craft(dict("<f4", "0", "()"), Bytes(4)), {"True or False"});
}

TEST(NpyMalformed, ShapeNotATupleOfNonNegativeIntegers) {
  expect_rejected(craft(dict("<f4", "False", "[2]"), Bytes(8)), {"'(' starting the shape tuple"});
  expect_rejected(craft(dict("<f4", "False", "(2)"), Bytes(8)), {"is not a tuple", "(n,)"});
  expect_rejected(craft(dict("<f4", "False", "(-2,)"), Bytes(8)), {"a non-negative integer"});
  expect_rejected(craft(dict("<f4", "False", "(02,)"), Bytes(8)), {"without leading zeros"});
  expect_rejected(craft(dict("<f4", "False", "(2.0,)"), Bytes(8)), {"',' or ')'"});
  expect_rejected(craft(dict("<f4", "False", "(99999999999999999999,)")), {"too large"});
}

TEST(NpyMalformed, TooManyDimensions) {
  expect_rejected(craft(dict("|u1", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), Bytes(1)), {"too many dimensions"});
}

TEST(NpyMalformed, ShapeProductOverflows) {
  expect_rejected(craft(dict("<f8", "False", "(4294967296, 4294967296)")), {"overflows"});
}

TEST(NpyMalformed, TruncatedData) {
  expect_rejected(craft(dict("<f4", "False", "(2, 3)"), Bytes(20)),
                  {"truncated", "expected 24 bytes of data", "[2, 3]", "got 20"});
}

TEST(NpyMalformed, TrailingBytes) {
  expect_rejected(craft(dict("<f4", "False", "(2, 3)"), Bytes(28)), {"trailing bytes", "expected 24", "got 28"});
}

TEST(NpyMalformed, BoolBytesOtherThanZeroAndOne) {
  expect_rejected(craft(dict("|b1", "False", "(3,)"), Bytes{0, 1, 5}), {"byte 5 at element 2", "expected 0 or 1"});
}

TEST(NpyMalformed, NonAsciiInTheHeader) {
  expect_rejected(craft("{'descr': '<f\xc3\xa9', 'fortran_order': False, 'shape': (), }\n"), {"plain ASCII"});
}

TEST(NpyRead, MissingFileNamesIt) {
  TempDir dir;
  expect_error<IOError>([&] { load_npy(dir.file("absent.npy")); }, {"load_npy", "absent.npy", "No such file"});
}

}  // namespace
