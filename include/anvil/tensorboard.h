// anvil/tensorboard.h — event files that TensorBoard reads: scalars,
// histograms, images and text, as torch.utils.tensorboard writes them.
//
//   anvil::tensorboard::SummaryWriter tb("runs/lenet");
//   tb.add_scalar("loss/train", loss.item<double>(), step);
//   tb.add_histogram("conv1.weight", net[0].weight(), epoch);   // any device
//   tb.add_image("input", x[0], step);            // CHW, floats in [0, 1] or u8
//   tb.add_text("config", "lr 0.1, batch 256", 0);
//   // then: tensorboard --logdir runs
//
// The file is `<logdir>/events.out.tfevents.<unix time>.<host>.<pid>.<n>`
// (PyTorch's name): TFRecord records (length, masked CRC32C of the length,
// data, masked CRC32C of the data), each one a serialised tensorflow Event
// protobuf, the first one file_version "brain.Event:2". Nothing here links
// protobuf: the few messages are encoded by hand (src/tensorboard/proto.h).
//
// Events are buffered and written out when `max_queue` are waiting, when the
// oldest has waited `flush_secs`, on flush() and on close(); flush() and
// close() also fsync the file. A write that fails throws IOError naming the
// file; the events not yet written stay buffered for the next try.
// Tensors on any device are copied to the host explicitly (Tensor::to(cpu())).
//
// Thread safety: one writer may be used from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/tensor.h"

namespace anvil::tensorboard {

struct WriterOptions {
  int max_queue = 10;           // events buffered before they are written out
  double flush_secs = 120;      // the longest an event stays buffered (checked on each add)
  std::string filename_suffix;  // appended to the event file's name
};

// How add_image reads its tensor's dimensions (PyTorch's dataformats).
enum class ImageFormat { CHW, HWC, HW };

class SummaryWriter {
 public:
  // Creates `logdir` (and its parents) and the event file in it, and writes
  // the file_version event. IOError when either cannot be created.
  explicit SummaryWriter(const std::string& logdir, WriterOptions options = {});
  // close(); an error there is printed to stderr (a destructor cannot throw).
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;
  SummaryWriter(SummaryWriter&&) noexcept;
  SummaryWriter& operator=(SummaryWriter&&) noexcept;

  // Summary.Value.simple_value (a float32, as TensorBoard stores scalars).
  void add_scalar(const std::string& tag, double value, std::int64_t step);
  // A HistogramProto of every element (any dtype, device and shape), in
  // TensorFlow's default buckets (see histogram()). ValueError when there
  // is no element or an element is not finite.
  void add_histogram(const std::string& tag, const Tensor& values, std::int64_t step);
  void add_histogram(const std::string& tag, std::span<const double> values, std::int64_t step);
  // A PNG of `image`: CHW or HWC with 1 (grey), 3 (RGB) or 4 (RGBA)
  // channels, or HW (grey). u8 is taken as it is; a floating dtype is read
  // as [0, 1], scaled by 255, clamped and rounded. DTypeError for other
  // dtypes, ShapeError for other shapes.
  void add_image(const std::string& tag, const Tensor& image, std::int64_t step, ImageFormat format = ImageFormat::CHW);
  // TensorBoard's text plugin: a string tensor of shape [1] whose summary
  // metadata names the plugin "text" (Markdown is rendered).
  void add_text(const std::string& tag, std::string_view text, std::int64_t step);

  // Writes out every buffered event and fsyncs the file.
  void flush();
  // flush(), then closes the file, even when that write fails (the error is
  // thrown after); later adds throw ValueError. Idempotent.
  void close();

  const std::string& logdir() const;
  const std::string& file_path() const;  // the event file

 private:
  struct State;
  State& state(std::string_view op) const;
  std::unique_ptr<State> state_;
};

// --- building blocks (what SummaryWriter writes; public for tests and tools) --

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): crc32c("123456789")
// is 0xE3069283.
std::uint32_t crc32c(const void* data, std::size_t n) noexcept;
// TFRecord's masked form: ((crc >> 15) | (crc << 17)) + 0xA282EAD8.
std::uint32_t masked_crc32c(const void* data, std::size_t n) noexcept;
// One TFRecord: u64 length (little-endian), masked CRC32C of those 8 bytes,
// the data, masked CRC32C of the data.
std::string tfrecord(std::string_view data);

// A histogram as HistogramProto holds it: bucket i counts the values in
// [bucket_limit[i-1], bucket_limit[i]) (the first bucket starts at min).
// The limits are TensorFlow's defaults (0, ±1e-12 × 1.1^k up to 1e20,
// ±DBL_MAX), as in torch.utils.tensorboard; empty buckets before the first
// and after the last value are left out and each run of empty buckets
// between them is one bucket.
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};
Histogram histogram(std::span<const double> values);

// An 8-bit PNG of `pixels` (rows top to bottom, channels interleaved;
// channels 1 grey, 2 grey+alpha, 3 RGB or 4 RGBA), zlib-compressed.
std::string encode_png(std::span<const std::uint8_t> pixels, int height, int width, int channels);

}  // namespace anvil::tensorboard
