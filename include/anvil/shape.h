// anvil/shape.h — sizes and strides of up to kMaxDims dimensions.
//
//   anvil::Shape s{2, 3};   s.numel() == 6;   std::cout << s;  // [2, 3]
//
// A Shape stores its dims inline (no heap), which keeps creating a tensor
// cheap. Arithmetic on sizes is overflow-checked (ShapeError).
#pragma once

#include <array>
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

// Row-major strides of `shape`, in elements.
Strides contiguous_strides(const Shape& shape);

// `a * b` for sizes, throwing ShapeError (naming `op`) on overflow.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* op);

}  // namespace anvil
