// anvil::tensorboard (include/anvil/tensorboard.h): CRC-32C and TFRecord
// framing against known vectors, the event file read back record by record
// with a small protobuf reader here, histograms, PNGs, errors, tensors on
// every device, and TensorBoard's own reader (the `tensorboard` package, in
// a venv: tests/python/run_tensorboard.sh) on a file written here.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <atomic>
#include <cfloat>
#include <cmath>
#include <csignal>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "anvil/tensorboard.h"
#include "device_test.h"
#include "io_test_support.h"

namespace {

using namespace anvil;
using anvil::testing::expect_error;
using anvil::testing::TempDir;
namespace tb = anvil::tensorboard;

template <typename T>
Tensor from_vector(const std::vector<T>& v, const Shape& shape, std::optional<DType> t = std::nullopt) {
  return tensor(v, shape, cpu(), t);
}

std::uint32_t crc_of(std::string_view s) { return tb::crc32c(s.data(), s.size()); }

std::uint64_t le(const std::string& s, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

std::uint32_t be32(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<std::uint8_t>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

// --- a protobuf reader: field number -> the values of that field -------------
struct Field {
  int wire = 0;
  std::uint64_t num = 0;  // varint, fixed64 or fixed32 bits
  std::string bytes;      // length-delimited
};
using Fields = std::multimap<int, Field>;

Fields parse(const std::string& m) {
  Fields out;
  std::size_t at = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (at >= m.size()) throw std::runtime_error("truncated varint");
      const auto b = static_cast<std::uint8_t>(m[at++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
  };
  while (at < m.size()) {
    const std::uint64_t key = varint();
    Field f;
    f.wire = static_cast<int>(key & 7);
    if (f.wire == 0) {
      f.num = varint();
    } else if (f.wire == 1 || f.wire == 5) {
      const int n = f.wire == 1 ? 8 : 4;
      if (at + static_cast<std::size_t>(n) > m.size()) throw std::runtime_error("truncated fixed field");
      f.num = le(m, at, n);
      at += static_cast<std::size_t>(n);
    } else if (f.wire == 2) {
      const std::uint64_t n = varint();
      if (at + n > m.size()) throw std::runtime_error("truncated bytes field");
      f.bytes = m.substr(at, n);
      at += n;
    } else {
      throw std::runtime_error("unexpected wire type " + std::to_string(f.wire));
    }
    out.emplace(static_cast<int>(key >> 3), f);
  }
  return out;
}

const Field& one(const Fields& fs, int field) {
  if (fs.count(field) != 1) throw std::runtime_error("expected field " + std::to_string(field) + " once");
  return fs.find(field)->second;
}
double as_f64(const Field& f) { return std::bit_cast<double>(f.num); }
float as_f32(const Field& f) { return std::bit_cast<float>(static_cast<std::uint32_t>(f.num)); }
std::vector<double> packed_f64(const Field& f) {
  std::vector<double> out;
  for (std::size_t i = 0; i + 8 <= f.bytes.size(); i += 8) out.push_back(std::bit_cast<double>(le(f.bytes, i, 8)));
  return out;
}

// The records of an event file, every length and CRC checked.
std::vector<std::string> read_records(const std::string& path) {
  const auto raw = anvil::testing::read_bytes(path);
  const std::string s(raw.begin(), raw.end());
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < s.size()) {
    if (at + 12 > s.size()) throw std::runtime_error("truncated record header");
    const std::uint64_t n = le(s, at, 8);
    EXPECT_EQ(le(s, at + 8, 4), tb::masked_crc32c(s.data() + at, 8)) << "length CRC of record " << out.size();
    if (at + 12 + n + 4 > s.size()) throw std::runtime_error("truncated record");
    const std::string data = s.substr(at + 12, n);
    EXPECT_EQ(le(s, at + 12 + n, 4), tb::masked_crc32c(data.data(), data.size())) << "data CRC of " << out.size();
    out.push_back(data);
    at += 12 + n + 4;
  }
  return out;
}

// The one Summary.Value of an event, and the event's step.
struct Value {
  std::int64_t step;
  Fields value;
};
Value summary_value(const std::string& event) {
  const Fields e = parse(event);
  const Fields summary = parse(one(e, 5).bytes);
  return {e.count(2) ? static_cast<std::int64_t>(one(e, 2).num) : 0, parse(one(summary, 1).bytes)};
}

std::string only_event_file(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().string());
  if (files.size() != 1) throw std::runtime_error("expected one event file in " + dir);
  return files[0];
}

// The pixels (rows of channels) inside a PNG anvil wrote: IDAT inflated,
// filter bytes checked to be 0 and dropped.
std::vector<std::uint8_t> png_pixels(const std::string& png, int& height, int& width, int& colour_type) {
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::string idat;
  for (std::size_t at = 8; at < png.size();) {
    const std::uint32_t n = be32(png, at);
    const std::string type = png.substr(at + 4, 4), data = png.substr(at + 8, n);
    EXPECT_EQ(be32(png, at + 8 + n),
              ::crc32(0L, reinterpret_cast<const Bytef*>(png.data() + at + 4), static_cast<uInt>(n + 4)))
        << type;
    if (type == "IHDR") {
      width = static_cast<int>(be32(data, 0));
      height = static_cast<int>(be32(data, 4));
      EXPECT_EQ(data[8], 8);
      colour_type = data[9];
    }
    if (type == "IDAT") idat += data;
    at += 12 + n;
  }
  const int channels = colour_type == 0 ? 1 : colour_type == 2 ? 3 : colour_type == 6 ? 4 : 2;
  const std::size_t row = static_cast<std::size_t>(width * channels);
  std::string raw((row + 1) * static_cast<std::size_t>(height), '\0');
  uLongf n = raw.size();
  EXPECT_EQ(::uncompress(reinterpret_cast<Bytef*>(raw.data()), &n, reinterpret_cast<const Bytef*>(idat.data()),
                         static_cast<uLong>(idat.size())),
            Z_OK);
  EXPECT_EQ(n, raw.size());
  std::vector<std::uint8_t> out;
  for (int y = 0; y < height; ++y) {
    const std::size_t at = static_cast<std::size_t>(y) * (row + 1);
    EXPECT_EQ(raw[at], 0) << "filter byte of row " << y;
    out.insert(out.end(), raw.begin() + static_cast<std::ptrdiff_t>(at + 1),
               raw.begin() + static_cast<std::ptrdiff_t>(at + 1 + row));
  }
  return out;
}

// --- checksums and framing -----------------------------------------------------

TEST(TensorBoard, Crc32cKnownVectors) {
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);
  EXPECT_EQ(crc_of(""), 0u);
  // RFC 3720 (iSCSI), B.4.
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up;
  for (int i = 0; i < 32; ++i) up.push_back(static_cast<char>(i));
  EXPECT_EQ(crc_of(up), 0x46DD794Eu);
  // Masked as TFRecord masks it (values from tensorflow's crc32c_test.cc pattern:
  // mask is a rotation plus a constant, so it changes the value and unmasks).
  EXPECT_EQ(tb::masked_crc32c("", 0), 0xA282EAD8u);
  EXPECT_EQ(tb::masked_crc32c("123456789", 9), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xA282EAD8u);
}

TEST(TensorBoard, RecordFraming) {
  const std::string rec = tb::tfrecord("hello");
  ASSERT_EQ(rec.size(), 8u + 4 + 5 + 4);
  EXPECT_EQ(le(rec, 0, 8), 5u);
  EXPECT_EQ(le(rec, 8, 4), tb::masked_crc32c(rec.data(), 8));
  EXPECT_EQ(rec.substr(12, 5), "hello");
  EXPECT_EQ(le(rec, 17, 4), tb::masked_crc32c("hello", 5));
  // An empty record still carries its length and both checksums.
  EXPECT_EQ(tb::tfrecord("").size(), 16u);
}

TEST(TensorBoard, EventFileNameFirstEventAndScalars) {
  TempDir dir;
  const std::string logdir = dir.file("runs/a");  // parents are created
  std::string path;
  {
    tb::SummaryWriter w(logdir);
    path = w.file_path();
    EXPECT_EQ(w.logdir(), logdir);
    w.add_scalar("loss/train", 0.25, 3);
    w.add_scalar("loss/train", -1.5, -2);  // negative steps are int64 varints
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::regex name("events\\.out\\.tfevents\\.[0-9]{10}\\." + std::string(host) + "\\." +
                        std::to_string(::getpid()) + "\\.[0-9]+");
  EXPECT_TRUE(std::regex_match(std::filesystem::path(path).filename().string(), name)) << path;
  EXPECT_EQ(only_event_file(logdir), path);

  const auto records = read_records(path);
  ASSERT_EQ(records.size(), 3u);
  const Fields first = parse(records[0]);
  EXPECT_EQ(one(first, 3).bytes, "brain.Event:2");
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(as_f64(one(first, 1)), now, 600);
  EXPECT_EQ(one(first, 1).wire, 1);

  const Value v = summary_value(records[1]);
  EXPECT_EQ(v.step, 3);
  EXPECT_EQ(one(v.value, 1).bytes, "loss/train");
  EXPECT_EQ(one(v.value, 2).wire, 5);
  EXPECT_EQ(as_f32(one(v.value, 2)), 0.25f);
  const Value neg = summary_value(records[2]);
  EXPECT_EQ(neg.step, -2);
  EXPECT_EQ(as_f32(one(neg.value, 2)), -1.5f);
}

TEST(TensorBoard, BufferedUntilQueueFullOrFlush) {
  TempDir dir;
  tb::SummaryWriter w(dir.file("run"), {.max_queue = 3, .flush_secs = 1e9});
  const auto size = [&] { return std::filesystem::file_size(w.file_path()); };
  const auto header = size();  // the file_version event is written at once
  EXPECT_GT(header, 0u);
  w.add_scalar("a", 1, 0);
  w.add_scalar("a", 2, 1);
  EXPECT_EQ(size(), header);
  w.add_scalar("a", 3, 2);  // the third fills the queue
  EXPECT_GT(size(), header);
  const auto three = size();
  w.add_scalar("a", 4, 3);
  EXPECT_EQ(size(), three);
  w.flush();
  EXPECT_GT(size(), three);
  EXPECT_EQ(read_records(w.file_path()).size(), 5u);
  w.close();
  w.close();  // idempotent
  expect_error<ValueError>([&] { w.add_scalar("a", 5, 4); }, {"add_scalar after close()", w.file_path()});
}

TEST(TensorBoard, AddsFromSeveralThreadsMakeWholeRecords) {
  constexpr int kThreads = 4, kAdds = 2000;
  TempDir dir;
  // Long tags and a buffer that only grows: appends that overlap without the
  // writer's lock corrupt records or the heap.
  tb::SummaryWriter w(dir.file("run"), {.max_queue = 1 << 30});
  const std::string long_tag(1000, 'x');
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads) {  // start together
      }
      for (int i = 0; i < kAdds; ++i) w.add_scalar("thread" + std::to_string(t) + long_tag, i, i);
    });
  for (std::thread& th : threads) th.join();
  w.close();
  const auto records = read_records(w.file_path());  // every length and CRC checked
  ASSERT_EQ(records.size(), 1u + kThreads * kAdds);
  std::map<std::string, int> per_tag;
  for (std::size_t i = 1; i < records.size(); ++i) ++per_tag[one(summary_value(records[i]).value, 1).bytes];
  EXPECT_EQ(per_tag.size(), static_cast<std::size_t>(kThreads));
  for (const auto& [tag, n] : per_tag) EXPECT_EQ(n, kAdds) << tag.substr(0, 7);
}

// --- histograms -------------------------------------------------------------------

TEST(TensorBoard, HistogramBucketsAndStatistics) {
  const std::vector<double> values = {-3.0, 0.0, 0.5, 0.5, 0.6, 2.0, 1e6};
  const tb::Histogram h = tb::histogram(values);
  EXPECT_EQ(h.min, -3.0);
  EXPECT_EQ(h.max, 1e6);
  EXPECT_EQ(h.num, 7);
  EXPECT_DOUBLE_EQ(h.sum, -3.0 + 0.5 + 0.5 + 0.6 + 2.0 + 1e6);
  EXPECT_DOUBLE_EQ(h.sum_squares, 9.0 + 0.25 + 0.25 + 0.36 + 4.0 + 1e12);
  ASSERT_EQ(h.bucket.size(), h.bucket_limit.size());
  // First and last buckets hold values; empty runs between are one bucket each.
  EXPECT_GT(h.bucket.front(), 0);
  EXPECT_GT(h.bucket.back(), 0);
  double total = 0;
  for (std::size_t i = 0; i < h.bucket.size(); ++i) {
    total += h.bucket[i];
    if (i > 0) {
      EXPECT_LT(h.bucket_limit[i - 1], h.bucket_limit[i]);
      EXPECT_FALSE(h.bucket[i] == 0 && h.bucket[i - 1] == 0) << "two empty buckets in a row at " << i;
    }
  }
  EXPECT_EQ(total, 7);
  // Recount: bucket i holds [limit[i-1], limit[i]).
  std::vector<double> counts(h.bucket.size(), 0);
  for (double v : values) {
    const auto i = std::upper_bound(h.bucket_limit.begin(), h.bucket_limit.end(), v) - h.bucket_limit.begin();
    ASSERT_LT(static_cast<std::size_t>(i), counts.size()) << v;
    counts[static_cast<std::size_t>(i)] += 1;
  }
  EXPECT_EQ(counts, h.bucket);
  // Limits grow by 1.1x: 0.5's bucket is (about) 10% wide, and 0.6 is past it.
  const auto at = [&](double v) { return std::upper_bound(h.bucket_limit.begin(), h.bucket_limit.end(), v); };
  EXPECT_LE(*at(0.5) / 1.1, 0.5 * (1 + 1e-12));
  EXPECT_GT(*at(0.5), 0.5);
  EXPECT_NE(at(0.5), at(0.6));
  EXPECT_LE(*(at(0.5) - 1), 0.5);
  // 0 is in [0, 1e-12).
  EXPECT_EQ(*at(0.0), 1e-12);
}

TEST(TensorBoard, HistogramEdgeCases) {
  const tb::Histogram one_value = tb::histogram(std::vector<double>{4.0});
  ASSERT_EQ(one_value.bucket.size(), 1u);
  EXPECT_EQ(one_value.bucket[0], 1);
  EXPECT_GT(one_value.bucket_limit[0], 4.0);
  EXPECT_LT(one_value.bucket_limit[0], 4.0 * 1.1 + 1e-9);
  const tb::Histogram extremes = tb::histogram(std::vector<double>{-DBL_MAX, DBL_MAX});
  EXPECT_EQ(extremes.bucket.front(), 1);
  EXPECT_EQ(extremes.bucket.back(), 1);
  EXPECT_EQ(extremes.bucket_limit.back(), DBL_MAX);
  expect_error<ValueError>([] { tb::histogram(std::vector<double>{}); }, {"histogram", "got none"});
  expect_error<ValueError>([] { tb::histogram(std::vector<double>{1.0, NAN}); }, {"finite", "element 1"});
  expect_error<ValueError>([] { tb::histogram(std::vector<double>{INFINITY}); }, {"finite", "inf"});
}

TEST(TensorBoard, HistogramEventEncodesTheProto) {
  TempDir dir;
  std::string path;
  const std::vector<double> values = {1, 2, 2, 3};
  {
    tb::SummaryWriter w(dir.file("run"));
    path = w.file_path();
    w.add_histogram("w", values, 7);
  }
  const tb::Histogram h = tb::histogram(values);
  const auto records = read_records(path);
  ASSERT_EQ(records.size(), 2u);
  const Value v = summary_value(records[1]);
  EXPECT_EQ(v.step, 7);
  EXPECT_EQ(one(v.value, 1).bytes, "w");
  const Fields p = parse(one(v.value, 5).bytes);
  EXPECT_EQ(as_f64(one(p, 1)), 1);
  EXPECT_EQ(as_f64(one(p, 2)), 3);
  EXPECT_EQ(as_f64(one(p, 3)), 4);
  EXPECT_EQ(as_f64(one(p, 4)), 8);
  EXPECT_EQ(as_f64(one(p, 5)), 18);
  EXPECT_EQ(packed_f64(one(p, 6)), h.bucket_limit);
  EXPECT_EQ(packed_f64(one(p, 7)), h.bucket);
}

// --- images -------------------------------------------------------------------------

TEST(TensorBoard, PngRoundTripsThroughZlib) {
  std::vector<std::uint8_t> px;
  for (int i = 0; i < 2 * 3 * 3; ++i) px.push_back(static_cast<std::uint8_t>(i * 13));
  const std::string png = tb::encode_png(px, 2, 3, 3);
  int h = 0, w = 0, colour = -1;
  EXPECT_EQ(png_pixels(png, h, w, colour), px);
  EXPECT_EQ(h, 2);
  EXPECT_EQ(w, 3);
  EXPECT_EQ(colour, 2);
  expect_error<ShapeError>([&] { tb::encode_png(px, 2, 3, 4); }, {"encode_png", "expected 24 bytes", "got 18"});
  expect_error<ShapeError>([&] { tb::encode_png(px, 2, 9, 5); }, {"channels", "got 5"});
}

// The PNG inside an image event, decoded, with the event's height and width.
std::vector<std::uint8_t> image_event_pixels(const std::string& event, int& height, int& width, int& colour) {
  const Value v = summary_value(event);
  const Fields img = parse(one(v.value, 4).bytes);
  int h = 0, w = 0;
  auto px = png_pixels(one(img, 4).bytes, h, w, colour);
  height = static_cast<int>(one(img, 1).num);
  width = static_cast<int>(one(img, 2).num);
  EXPECT_EQ(h, height);
  EXPECT_EQ(w, width);
  const int channels = colour == 0 ? 1 : colour == 2 ? 3 : 4;
  EXPECT_EQ(static_cast<int>(one(img, 3).num), channels);  // colorspace
  return px;
}

TEST(TensorBoard, ImageLayoutsAndScaling) {
  TempDir dir;
  std::string path;
  // CHW floats [1, 2, 2]: scaled by 255, rounded, clamped, NaN as 0.
  const Tensor grey = from_vector<float>({0.0f, 0.5f, 1.7f, NAN}, {1, 2, 2});
  // HWC u8 [1, 2, 3]: taken as is; the same pixels as CHW [3, 1, 2].
  const Tensor hwc = from_vector<std::uint8_t>({1, 2, 3, 4, 5, 6}, {1, 2, 3}, u8);
  const Tensor chw = hwc.permute({2, 0, 1});  // non-contiguous on purpose
  {
    tb::SummaryWriter w(dir.file("run"));
    path = w.file_path();
    w.add_image("grey", grey, 0);
    w.add_image("hwc", hwc, 1, tb::ImageFormat::HWC);
    w.add_image("chw", chw, 2);
    w.add_image("hw", from_vector<double>({-0.5, 0.2}, {1, 2}, f64), 3, tb::ImageFormat::HW);
  }
  const auto records = read_records(path);
  ASSERT_EQ(records.size(), 5u);
  int h = 0, w = 0, colour = 0;
  EXPECT_EQ(image_event_pixels(records[1], h, w, colour), (std::vector<std::uint8_t>{0, 128, 255, 0}));
  EXPECT_EQ(colour, 0);
  EXPECT_EQ(image_event_pixels(records[2], h, w, colour), (std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(colour, 2);
  EXPECT_EQ(image_event_pixels(records[3], h, w, colour), (std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(image_event_pixels(records[4], h, w, colour), (std::vector<std::uint8_t>{0, 51}));
  EXPECT_EQ(h, 1);
  EXPECT_EQ(w, 2);
}

TEST(TensorBoard, ImageErrors) {
  TempDir dir;
  tb::SummaryWriter w(dir.file("run"));
  expect_error<ShapeError>(
      [&] {
        w.add_image("x", zeros({1, 3, 4, 4}), 0);
      },
      {"add_image", "3-d tensor (CHW)", "[1, 3, 4, 4]"});
  expect_error<ShapeError>([&] { w.add_image("x", zeros({2, 4, 4}), 0); }, {"1, 3 or 4 channels", "got 2"});
  expect_error<ShapeError>([&] { w.add_image("x", zeros({4, 4, 5}), 0, tb::ImageFormat::HWC); }, {"got 5"});
  expect_error<ShapeError>([&] { w.add_image("x", zeros({3, 0, 4}), 0); }, {"non-empty"});
  expect_error<DTypeError>([&] { w.add_image("x", zeros({3, 4, 4}, cpu(), i32), 0); }, {"u8 or a floating", "i32"});
  expect_error<ValueError>([&] { w.add_image("x", Tensor(), 0); }, {"undefined"});
  expect_error<ValueError>([&] { w.add_histogram("x", zeros({0}), 0); }, {"'x' has no values"});
  w.close();
  EXPECT_EQ(read_records(w.file_path()).size(), 1u);  // nothing was written for the failed adds
}

// --- text -----------------------------------------------------------------------------

TEST(TensorBoard, TextIsAStringTensorForTheTextPlugin) {
  TempDir dir;
  std::string path;
  const std::string text = "**lr** 0.1 \xe2\x9c\x93";
  {
    tb::SummaryWriter w(dir.file("run"));
    path = w.file_path();
    w.add_text("notes", text, 5);
  }
  const auto records = read_records(path);
  ASSERT_EQ(records.size(), 2u);
  const Value v = summary_value(records[1]);
  EXPECT_EQ(v.step, 5);
  EXPECT_EQ(one(v.value, 1).bytes, "notes");
  const Fields plugin = parse(one(parse(one(v.value, 9).bytes), 1).bytes);
  EXPECT_EQ(one(plugin, 1).bytes, "text");
  const Fields tensor = parse(one(v.value, 8).bytes);
  EXPECT_EQ(one(tensor, 1).num, 7u);  // DT_STRING
  const Fields dim = parse(one(parse(one(tensor, 2).bytes), 2).bytes);
  EXPECT_EQ(one(dim, 1).num, 1u);
  EXPECT_EQ(one(tensor, 8).bytes, text);
}

// --- files and errors --------------------------------------------------------------

TEST(TensorBoard, LogdirThatIsAFileIsAnIOError) {
  TempDir dir;
  anvil::testing::write_bytes(dir.file("plain"), {1, 2, 3});
  expect_error<IOError>([&] { tb::SummaryWriter w(dir.file("plain")); }, {"log directory", dir.file("plain")});
  expect_error<IOError>([&] { tb::SummaryWriter w(dir.file("plain") + "/sub"); }, {"log directory", "plain/sub"});
  expect_error<ValueError>([&] { tb::SummaryWriter w(""); }, {"expected a log directory"});
}

// A write the kernel refuses (the file-size limit: EFBIG) is an IOError naming
// the file; the events stay buffered and go out once the write can succeed.
TEST(TensorBoard, FailedWriteIsAnIOErrorNamingTheFile) {
  TempDir dir;
  tb::SummaryWriter w(dir.file("run"), {.max_queue = 1000});
  for (int i = 0; i < 100; ++i) w.add_scalar("a", i, i);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = std::filesystem::file_size(w.file_path());
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    w.flush();
  } catch (const IOError& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find(w.file_path()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  w.close();
  const auto records = read_records(w.file_path());
  ASSERT_EQ(records.size(), 101u);
  EXPECT_EQ(as_f32(one(summary_value(records[100]).value, 2)), 99.0f);
}

TEST(TensorBoard, MovedWriterKeepsTheFile) {
  TempDir dir;
  tb::SummaryWriter a(dir.file("run"));
  a.add_scalar("x", 1, 0);
  tb::SummaryWriter b(std::move(a));
  b.add_scalar("x", 2, 1);
  expect_error<ValueError>([&] { a.add_scalar("x", 3, 2); }, {"moved from"});  // NOLINT(bugprone-use-after-move)
  b.close();
  EXPECT_EQ(read_records(b.file_path()).size(), 3u);
}

// --- tensors on every device ------------------------------------------------------

class TensorBoardOnDevice : public anvil::testing::DeviceTest {};

TEST_P(TensorBoardOnDevice, HistogramAndImageMatchTheCpu) {
  const Device d = device();
  const Tensor values = from_vector<float>({-1.0f, 0.25f, 0.25f, 3.0f, 7.5f, -0.001f}, {2, 3});
  const Tensor image =
      from_vector<float>({0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f, 0.55f}, {3, 2, 2});
  TempDir dir;
  std::string on_cpu, on_device;
  {
    tb::SummaryWriter w(dir.file("cpu"));
    on_cpu = w.file_path();
    w.add_histogram("h", values, 0);
    w.add_image("i", image, 0);
  }
  {
    tb::SummaryWriter w(dir.file("device"));
    on_device = w.file_path();
    w.add_histogram("h", values.to(d), 0);
    w.add_image("i", image.to(d).transpose(1, 2).contiguous().transpose(1, 2), 0);  // strided on the device
  }
  const auto a = read_records(on_cpu), b = read_records(on_device);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  // Same payload apart from wall_time: compare the Summary fields.
  for (std::size_t i = 1; i < 3; ++i) EXPECT_EQ(one(parse(a[i]), 5).bytes, one(parse(b[i]), 5).bytes) << i;
}

ANVIL_INSTANTIATE_DEVICE_TEST(TensorBoardOnDevice);

// --- TensorBoard's own reader ------------------------------------------------------

std::string json_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
std::string json_list(const std::vector<double>& vs) {
  std::string out = "[";
  for (std::size_t i = 0; i < vs.size(); ++i) out += (i ? ", " : "") + json_number(vs[i]);
  return out + "]";
}

TEST(TensorBoardReader, ReadsBackScalarsHistogramsImagesAndText) {
  TempDir dir;
  const std::string run = dir.file("runs/check");
  std::ostringstream scalars, histograms, images, texts;
  int records = 1;
  {
    tb::SummaryWriter w(run);
    scalars << "\"loss/train\": [";
    for (int step = 0; step < 5; ++step) {
      const double loss = 2.3 / (1.0 + step) + 0.01 * step;
      w.add_scalar("loss/train", loss, step);
      scalars << (step ? ", " : "") << "[" << step << ", " << json_number(loss) << "]";
      ++records;
    }
    w.add_scalar("accuracy", 0.875, 10);
    scalars << "], \"accuracy\": [[10, 0.875]]";
    ++records;

    // Histograms from tensors on every device (copied to the host explicitly).
    bool first = true;
    for (const Device d : anvil::testing::test_devices()) {
      std::vector<double> vs;
      for (int i = 0; i < 200; ++i) vs.push_back(std::sin(0.37 * i) * std::exp(0.02 * i) - 0.25);
      vs.push_back(0.0);
      const Tensor t = from_vector<double>(vs, {static_cast<std::int64_t>(vs.size())}, f64).to(d);
      const std::string tag = "weights/" + d.str();
      w.add_histogram(tag, t, 4);
      const tb::Histogram h = tb::histogram(vs);
      histograms << (first ? "" : ", ") << "\"" << tag << "\": [{\"step\": 4, \"values\": " << json_list(vs)
                 << ", \"min\": " << json_number(h.min) << ", \"max\": " << json_number(h.max)
                 << ", \"num\": " << json_number(h.num) << ", \"sum\": " << json_number(h.sum)
                 << ", \"sum_squares\": " << json_number(h.sum_squares)
                 << ", \"bucket_limit\": " << json_list(h.bucket_limit) << ", \"bucket\": " << json_list(h.bucket)
                 << "}]";
      first = false;
      ++records;

      // An RGB float image (CHW) on the device: pixel (y, x, c) = (y*4 + x*3 + c*40) / 255.
      const int H = 3, W = 4;
      std::vector<float> chw;
      std::string pixels;
      for (int c = 0; c < 3; ++c)
        for (int y = 0; y < H; ++y)
          for (int x = 0; x < W; ++x) chw.push_back(static_cast<float>(y * 4 + x * 3 + c * 40) / 255.0f);
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
          for (int c = 0; c < 3; ++c) pixels += (pixels.empty() ? "" : ", ") + std::to_string(y * 4 + x * 3 + c * 40);
      w.add_image("input/" + d.str(), from_vector<float>(chw, {3, H, W}).to(d), 2);
      images << (images.tellp() > 0 ? ", " : "") << "\"input/" << d.str() << "\": [{\"step\": 2, \"height\": " << H
             << ", \"width\": " << W << ", \"channels\": 3, \"pixels\": [" << pixels << "]}]";
      ++records;
    }
    // A grey u8 image (HW) and an RGBA one (HWC).
    w.add_image("grey", from_vector<std::uint8_t>({0, 64, 128, 255}, {2, 2}, u8), 0, tb::ImageFormat::HW);
    w.add_image("rgba", from_vector<std::uint8_t>({10, 20, 30, 40, 50, 60, 70, 80}, {1, 2, 4}, u8), 1,
                tb::ImageFormat::HWC);
    images << ", \"grey\": [{\"step\": 0, \"height\": 2, \"width\": 2, \"channels\": 1, \"pixels\": [0, 64, 128, 255]}]"
           << ", \"rgba\": [{\"step\": 1, \"height\": 1, \"width\": 2, \"channels\": 4, \"pixels\": [10, 20, 30, "
              "40, 50, 60, 70, 80]}]";
    records += 2;

    w.add_text("notes", "lenet, **lr** 0.1", 0);
    w.add_text("notes", "second \xe2\x9c\x93", 1);
    texts << "\"notes\": [{\"step\": 0, \"text\": \"lenet, **lr** 0.1\"}, {\"step\": 1, \"text\": \"second "
             "\xe2\x9c\x93\"}]";
    records += 2;
  }
  const std::string expected = dir.file("expected.json");
  {
    std::ofstream f(expected);
    f << "{\"records\": " << records << ", \"scalars\": {" << scalars.str() << "}, \"histograms\": {"
      << histograms.str() << "}, \"images\": {" << images.str() << "}, \"texts\": {" << texts.str() << "}}\n";
  }
  std::filesystem::path venv;
  if (const char* env = std::getenv("ANVIL_TENSORBOARD_VENV"); env != nullptr && *env != '\0')
    venv = env;
  else
    venv = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "tensorboard" / "python-venv";
  const std::string cmd = "bash '" + (anvil::testing::python_dir() / "run_tensorboard.sh").string() + "' '" +
                          venv.string() + "' '" + run + "' '" + expected + "' 2>&1";
  std::string output;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << cmd;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) output += buf.data();
  const int status = ::pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\n" << output;
  EXPECT_NE(output.find("tensorboard_check: ok"), std::string::npos) << output;
  std::cout << output;
}

}  // namespace
