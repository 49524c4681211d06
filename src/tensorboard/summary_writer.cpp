// SummaryWriter: Event protobufs in TFRecord framing, appended to one file.
//
// The messages and field numbers (tensorflow/core/util/event.proto,
// core/framework/summary.proto, tensor.proto, tensor_shape.proto, as
// TensorBoard's tensorboard/compat/proto copies them):
//   Event          wall_time 1 (double), step 2 (int64), file_version 3 (string), summary 5
//   Summary        value 1 (repeated Value)
//   Summary.Value  tag 1, simple_value 2 (float), image 4, histo 5, tensor 8, metadata 9
//   Summary.Image  height 1, width 2, colorspace 3 (int32), encoded_image_string 4
//   HistogramProto min 1, max 2, num 3, sum 4, sum_squares 5 (double),
//                  bucket_limit 6, bucket 7 (packed repeated double)
//   SummaryMetadata plugin_data 1 { plugin_name 1, content 2 }
//   TensorProto    dtype 1 (DT_STRING = 7), tensor_shape 2, string_val 8 (repeated bytes)
//   TensorShapeProto dim 2 (repeated Dim { size 1 })
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "anvil/error.h"
#include "anvil/tensorboard.h"
#include "io/file_util.h"
#include "tensorboard/proto.h"

namespace anvil::tensorboard {

using detail::cat;
using detail::quote;
using detail::proto::Message;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The elements of `t` as doubles, read on the host after an explicit copy.
std::vector<double> host_doubles(const Tensor& t, std::string_view op) {
  ANVIL_CHECK(t.defined(), ValueError, op, ": expected a defined tensor, got an undefined one");
  if (t.numel() == 0) return {};
  const Tensor h = t.to(cpu(), f64).contiguous();
  const double* p = h.data_ptr<double>();
  return std::vector<double>(p, p + h.numel());
}

// HWC bytes of an image tensor (see add_image).
struct Pixels {
  std::vector<std::uint8_t> bytes;
  int height = 0, width = 0, channels = 0;
};

Pixels image_pixels(const Tensor& image, ImageFormat format) {
  ANVIL_CHECK(image.defined(), ValueError, "add_image: expected a defined tensor, got an undefined one");
  const int want = format == ImageFormat::HW ? 2 : 3;
  const char* name = format == ImageFormat::HW ? "HW" : format == ImageFormat::CHW ? "CHW" : "HWC";
  ANVIL_CHECK(image.dim() == want, ShapeError, "add_image: expected a ", want, "-d tensor (", name, "), got shape ",
              image.shape());
  const DType dt = image.dtype();
  ANVIL_CHECK(dt == u8 || is_floating(dt), DTypeError,
              "add_image: expected u8 or a floating dtype (read as [0, 1]), got ", dt);
  const Tensor hwc = format == ImageFormat::CHW  ? image.permute({1, 2, 0})
                     : format == ImageFormat::HW ? image.unsqueeze(2)
                                                 : image;
  Pixels px;
  px.height = static_cast<int>(hwc.size(0));
  px.width = static_cast<int>(hwc.size(1));
  px.channels = static_cast<int>(hwc.size(2));
  ANVIL_CHECK(px.channels == 1 || px.channels == 3 || px.channels == 4, ShapeError,
              "add_image: expected 1, 3 or 4 channels, got ", px.channels, " (shape ", image.shape(), " as ", name,
              ")");
  ANVIL_CHECK(px.height > 0 && px.width > 0, ShapeError, "add_image: expected a non-empty image, got shape ",
              image.shape());
  const auto n = static_cast<std::size_t>(hwc.numel());
  if (dt == u8) {
    const Tensor h = hwc.to(cpu()).contiguous();
    const auto* p = h.data_ptr<std::uint8_t>();
    px.bytes.assign(p, p + n);
  } else {
    const Tensor h = hwc.to(cpu(), f32).contiguous();
    const float* p = h.data_ptr<float>();
    px.bytes.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const float v = std::isnan(p[i]) ? 0.0f : std::clamp(p[i] * 255.0f, 0.0f, 255.0f);
      px.bytes[i] = static_cast<std::uint8_t>(std::lround(v));
    }
  }
  return px;
}

Message histogram_proto(const Histogram& h) {
  Message m;
  m.f64(1, h.min).f64(2, h.max).f64(3, h.num).f64(4, h.sum).f64(5, h.sum_squares);
  m.packed_f64(6, h.bucket_limit).packed_f64(7, h.bucket);
  return m;
}

}  // namespace

struct SummaryWriter::State {
  std::mutex mu;
  std::string logdir, path;
  WriterOptions options;
  int fd = -1;
  std::string buffer;  // framed events not yet written to the file
  int queued = 0;
  std::chrono::steady_clock::time_point first_queued;
  bool closed = false;

  ~State() {
    if (fd >= 0) ::close(fd);  // only when the constructor failed after opening
  }

  [[noreturn]] void fail(std::string_view what, int err) const {
    throw IOError(cat("SummaryWriter: cannot ", what, " ", quote(path), ": ", std::strerror(err)));
  }

  // Writes the buffer out; what a failed write leaves stays buffered.
  void write_out() {
    std::size_t done = 0;
    while (done < buffer.size()) {
      const ::ssize_t w = ::write(fd, buffer.data() + done, buffer.size() - done);
      if (w < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        buffer.erase(0, done);
        fail("write", err);
      }
      done += static_cast<std::size_t>(w);
    }
    buffer.clear();
    queued = 0;
  }

  void sync() {
    write_out();
    if (::fsync(fd) != 0 && errno != EINVAL) fail("fsync", errno);  // EINVAL: a pipe or special file
  }

  void append(std::string_view event, std::string_view op) {
    ANVIL_CHECK(!closed, ValueError, "SummaryWriter: ", op, " after close() of ", quote(path));
    if (queued == 0) first_queued = std::chrono::steady_clock::now();
    buffer += tfrecord(event);
    ++queued;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - first_queued).count();
    if (queued >= options.max_queue || waited >= options.flush_secs) write_out();
  }
};

namespace {

std::string summary_event(std::int64_t step, const Message& value) {
  Message summary;
  summary.message(1, value);
  Message event;
  event.f64(1, unix_seconds()).int64(2, step).message(5, summary);
  return event.str();
}

}  // namespace

SummaryWriter::SummaryWriter(const std::string& logdir, WriterOptions options) : state_(std::make_unique<State>()) {
  ANVIL_CHECK(!logdir.empty(), ValueError, "SummaryWriter: expected a log directory, got ''");
  State& s = *state_;
  s.logdir = logdir;
  s.options = std::move(options);
  std::error_code ec, ec_dir;
  std::filesystem::create_directories(logdir, ec);
  if (ec || !std::filesystem::is_directory(logdir, ec_dir))
    throw IOError(cat("SummaryWriter: cannot create the log directory ", quote(logdir), ": ",
                      ec ? ec.message() : "it exists and is not a directory"));
  // PyTorch's name; the pid and a count in this process keep two writers
  // started in the same second apart.
  static std::atomic<int> count{0};
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(unix_seconds()));
  s.path = (std::filesystem::path(logdir) / cat("events.out.tfevents.", stamp, ".", host_name(), ".", ::getpid(), ".",
                                                count.fetch_add(1), s.options.filename_suffix))
               .string();
  s.fd = ::open(s.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (s.fd < 0) s.fail("create", errno);
  Message version;
  version.f64(1, unix_seconds()).bytes(3, "brain.Event:2");
  s.buffer = tfrecord(version.str());
  s.write_out();  // a reader that opens the file at once sees a valid one
}

namespace {

void close_reporting(SummaryWriter& w) noexcept {
  try {
    w.close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "anvil: %s\n", e.what());
  }
}

}  // namespace

SummaryWriter::~SummaryWriter() {
  if (state_) close_reporting(*this);
}

SummaryWriter::SummaryWriter(SummaryWriter&&) noexcept = default;
SummaryWriter& SummaryWriter::operator=(SummaryWriter&& other) noexcept {
  if (this != &other) {
    if (state_) close_reporting(*this);
    state_ = std::move(other.state_);
  }
  return *this;
}

SummaryWriter::State& SummaryWriter::state(std::string_view op) const {
  ANVIL_CHECK(state_ != nullptr, ValueError, "SummaryWriter: ", op, " on a writer that was moved from");
  return *state_;
}

void SummaryWriter::add_scalar(const std::string& tag, double value, std::int64_t step) {
  Message v;
  v.bytes(1, tag).f32(2, static_cast<float>(value));
  const std::string event = summary_event(step, v);
  State& s = state("add_scalar");
  std::lock_guard lock(s.mu);
  s.append(event, "add_scalar");
}

void SummaryWriter::add_histogram(const std::string& tag, std::span<const double> values, std::int64_t step) {
  ANVIL_CHECK(!values.empty(), ValueError, "add_histogram: ", quote(tag), " has no values; expected at least one");
  Message v;
  v.bytes(1, tag).message(5, histogram_proto(histogram(values)));
  const std::string event = summary_event(step, v);
  State& s = state("add_histogram");
  std::lock_guard lock(s.mu);
  s.append(event, "add_histogram");
}

void SummaryWriter::add_histogram(const std::string& tag, const Tensor& values, std::int64_t step) {
  add_histogram(tag, std::span<const double>(host_doubles(values, "add_histogram")), step);
}

void SummaryWriter::add_image(const std::string& tag, const Tensor& image, std::int64_t step, ImageFormat format) {
  const Pixels px = image_pixels(image, format);
  Message img;
  img.int64(1, px.height).int64(2, px.width).int64(3, px.channels);  // colorspace: 1 grey, 3 RGB, 4 RGBA
  img.bytes(4, encode_png(px.bytes, px.height, px.width, px.channels));
  Message v;
  v.bytes(1, tag).message(4, img);
  const std::string event = summary_event(step, v);
  State& s = state("add_image");
  std::lock_guard lock(s.mu);
  s.append(event, "add_image");
}

void SummaryWriter::add_text(const std::string& tag, std::string_view text, std::int64_t step) {
  // What tensorboard.plugins.text.summary writes: plugin "text" with an
  // empty TextPluginData (version 0), and a DT_STRING tensor of shape [1].
  Message plugin;
  plugin.bytes(1, "text").bytes(2, "");
  Message metadata;
  metadata.message(1, plugin);
  Message dim;
  dim.int64(1, 1);
  Message shape;
  shape.message(2, dim);
  Message tensor;
  tensor.varint(1, 7).message(2, shape).bytes(8, text);
  Message v;
  v.bytes(1, tag).message(9, metadata).message(8, tensor);
  const std::string event = summary_event(step, v);
  State& s = state("add_text");
  std::lock_guard lock(s.mu);
  s.append(event, "add_text");
}

void SummaryWriter::flush() {
  State& s = state("flush");
  std::lock_guard lock(s.mu);
  ANVIL_CHECK(!s.closed, ValueError, "SummaryWriter: flush after close() of ", quote(s.path));
  s.sync();
}

void SummaryWriter::close() {
  State& s = state("close");
  std::lock_guard lock(s.mu);
  if (s.closed) return;
  s.closed = true;  // the file is released even when the last write fails
  try {
    s.sync();
  } catch (...) {
    ::close(s.fd);
    s.fd = -1;
    throw;
  }
  const int rc = ::close(s.fd);
  s.fd = -1;
  if (rc != 0) s.fail("close", errno);
}

const std::string& SummaryWriter::logdir() const { return state("logdir").logdir; }
const std::string& SummaryWriter::file_path() const { return state("file_path").path; }

}  // namespace anvil::tensorboard
