#include <cstdlib>
#include <filesystem>

#include "anvil/data.h"
#include "anvil/error.h"
#include "anvil/ops.h"
#include "data/idx.h"
#include "io/file_util.h"

namespace anvil {

namespace {

constexpr std::string_view kOp = "FashionMNIST";

template <typename... Args>
[[noreturn]] void fail(const std::string& path, const Args&... args) {
  throw IOError(detail::cat(kOp, ": ", detail::quote(path), ": ", args...));
}

detail::IdxArray read_part(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw IOError(detail::cat(kOp, ": cannot find ", detail::quote(path),
                              "; expected Fashion-MNIST's four .gz files there; install them with "
                              "`apt-get install dataset-fashion-mnist` or pass their folder as `root` "
                              "(or set ANVIL_FASHION_MNIST_DIR)"));
  return detail::read_idx_array(path, kOp);
}

}  // namespace

std::string FashionMNIST::default_root() {
  const char* env = std::getenv("ANVIL_FASHION_MNIST_DIR");
  if (env != nullptr && *env != '\0') return env;
  return "/usr/share/datasets/fashion-mnist";
}

FashionMNIST::FashionMNIST(Split split, const std::string& root, bool flatten) : split_(split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = (std::filesystem::path(root) / (prefix + "-images-idx3-ubyte.gz")).string();
  const std::string labels_path = (std::filesystem::path(root) / (prefix + "-labels-idx1-ubyte.gz")).string();

  const detail::IdxArray images = read_part(images_path);
  if (images.type_code != 0x08 || images.dims.size() != 3 || images.dims[1] != kImageSize ||
      images.dims[2] != kImageSize)
    fail(images_path, "not Fashion-MNIST images; expected unsigned bytes of shape [N, 28, 28], got ", images.dtype,
         " of shape ", Shape(images.dims));
  const detail::IdxArray labels = read_part(labels_path);
  if (labels.type_code != 0x08 || labels.dims.size() != 1)
    fail(labels_path, "not Fashion-MNIST labels; expected unsigned bytes of shape [N], got ", labels.dtype,
         " of shape ", Shape(labels.dims));
  const std::int64_t n = images.dims[0];
  if (labels.dims[0] != n)
    fail(labels_path, "label count does not match the images in ", detail::quote(images_path), "; expected ", n,
         ", got ", labels.dims[0]);

  // Pixels to [0, 1] and labels to i64 on the host, in one pass each.
  images_ =
      flatten ? empty({n, kImageSize * kImageSize}, cpu(), f32) : empty({n, 1, kImageSize, kImageSize}, cpu(), f32);
  labels_ = empty({n}, cpu(), i64);
  float* dst = images_.data_ptr<float>();
  for (std::size_t i = 0; i < images.bytes.size(); ++i) dst[i] = static_cast<float>(images.bytes[i]) / 255.0f;
  std::int64_t* lab = labels_.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t label = labels.bytes[static_cast<std::size_t>(i)];
    if (label >= kNumClasses)
      fail(labels_path, "label ", i, " is out of range; expected a class in [0, ", kNumClasses, "), got ",
           static_cast<int>(label));
    lab[i] = label;
  }
}

}  // namespace anvil
