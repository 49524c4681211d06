// anvil/shape.h — sizes and strides of up to kMaxDims dimensions.
//
//   anvil::Shape s{2, 3};   s.numel() == 6;   std::cout << s;  // [2, 3]
//
// A Shape stores its dims inline (no heap), which keeps creating a tensor
// cheap. Arithmetic on sizes is overflow-checked (ShapeError).
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

namespace anvil {

inline constexpr int kMaxDims = 8;

class Shape {
 public:
  Shape() noexcept = default;
  Shape(std::initializer_list<std::int64_t> dims) : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}
  Shape(const std::vector<std::int64_t>& dims) : Shape(std::span<const std::int64_t>(dims)) {}
  explicit Shape(std::span<const std::int64_t> dims);
  static Shape filled(int ndim, std::int64_t value);

  int size() const noexcept { return ndim_; }
  bool empty() const noexcept { return ndim_ == 0; }
  std::int64_t operator[](int i) const noexcept { return dims_[i]; }
  std::int64_t& operator[](int i) noexcept { return dims_[i]; }
  const std::int64_t* begin() const noexcept { return dims_.data(); }
  const std::int64_t* end() const noexcept { return dims_.data() + ndim_; }
  std::int64_t* begin() noexcept { return dims_.data(); }
  std::int64_t* end() noexcept { return dims_.data() + ndim_; }
  const std::int64_t* data() const noexcept { return dims_.data(); }
  std::int64_t back() const noexcept { return dims_[ndim_ - 1]; }

  void push_back(std::int64_t v);  // ShapeError past kMaxDims
  void insert(int pos, std::int64_t v);
  void erase(int pos) noexcept;
  void resize(int ndim, std::int64_t fill = 0);

  // Product of the dims, overflow-checked; 1 for a 0-dim shape.
  std::int64_t numel() const;
  std::vector<std::int64_t> vec() const { return {begin(), end()}; }
  std::string str() const;  // "[2, 3]"

  friend bool operator==(const Shape& a, const Shape& b) noexcept;

 private:
  std::array<std::int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};
std::ostream& operator<<(std::ostream& os, const Shape& s);

using Strides = Shape;

// The dims an op works over (a reduction's, permute's, squeeze's): one
// integer or a list, as LibTorch's IntArrayRef, so that `x.sum(1)` and
// `x.sum({0, 1})` both read as in PyTorch. Dims may be negative (counting
// from the end); the op checks them against its input. Stored inline, at
// most kMaxDims of them (ShapeError past that).
class Dims {
 public:
  Dims() noexcept = default;
  template <std::integral T>
  requires(!std::same_as<T, bool>) Dims(T dim)
  noexcept  // NOLINT: one dim converts implicitly
      : dims_{static_cast<std::int64_t>(dim)}, size_(1) {}
  Dims(std::initializer_list<std::int64_t> dims) : Dims(std::span<const std::int64_t>(dims.begin(), dims.size())) {}
  Dims(const std::vector<std::int64_t>& dims) : Dims(std::span<const std::int64_t>(dims)) {}
  Dims(const Shape& dims) : Dims(std::span<const std::int64_t>(dims.begin(), static_cast<std::size_t>(dims.size()))) {}
  explicit Dims(std::span<const std::int64_t> dims);

  int size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::int64_t operator[](int i) const noexcept { return dims_[i]; }
  const std::int64_t* begin() const noexcept { return dims_.data(); }
  const std::int64_t* end() const noexcept { return dims_.data() + size_; }
  std::vector<std::int64_t> vec() const { return {begin(), end()}; }

  friend bool operator==(const Dims& a, const Dims& b) noexcept;

 private:
  std::array<std::int64_t, kMaxDims> dims_{};
  int size_ = 0;
};
std::ostream& operator<<(std::ostream& os, const Dims& d);  // [0, -1]

// Row-major strides of `shape`, in elements.
Strides contiguous_strides(const Shape& shape);

// `a * b` for sizes, throwing ShapeError (naming `op`) on overflow.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* op);

}  // namespace anvil
