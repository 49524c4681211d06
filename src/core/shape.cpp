#include "anvil/shape.h"

#include <ostream>

#include "anvil/error.h"

namespace anvil {

Shape::Shape(std::span<const std::int64_t> dims) {
  ANVIL_CHECK(dims.size() <= static_cast<std::size_t>(kMaxDims), ShapeError,
              "shape: too many dimensions; expected at most ", kMaxDims, ", got ", dims.size());
  ndim_ = static_cast<int>(dims.size());
  for (int i = 0; i < ndim_; ++i) dims_[i] = dims[i];
}

Shape Shape::filled(int ndim, std::int64_t value) {
  Shape s;
  s.resize(ndim, value);
  return s;
}

void Shape::push_back(std::int64_t v) {
  ANVIL_CHECK(ndim_ < kMaxDims, ShapeError, "shape: too many dimensions; expected at most ", kMaxDims, ", got ",
              ndim_ + 1);
  dims_[ndim_++] = v;
}

void Shape::insert(int pos, std::int64_t v) {
  ANVIL_CHECK(ndim_ < kMaxDims, ShapeError, "shape: too many dimensions; expected at most ", kMaxDims, ", got ",
              ndim_ + 1);
  for (int i = ndim_; i > pos; --i) dims_[i] = dims_[i - 1];
  dims_[pos] = v;
  ++ndim_;
}

void Shape::erase(int pos) noexcept {
  for (int i = pos; i + 1 < ndim_; ++i) dims_[i] = dims_[i + 1];
  --ndim_;
}

void Shape::resize(int ndim, std::int64_t fill) {
  ANVIL_CHECK(ndim >= 0 && ndim <= kMaxDims, ShapeError, "shape: too many dimensions; expected at most ", kMaxDims,
              ", got ", ndim);
  for (int i = ndim_; i < ndim; ++i) dims_[i] = fill;
  ndim_ = ndim;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* op) {
  std::int64_t r = 0;
  ANVIL_CHECK(!__builtin_mul_overflow(a, b, &r), ShapeError, op,
              ": size overflows 64 bits; expected a product of sizes below 2^63, got ", a, " * ", b);
  return r;
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n = checked_mul(n, dims_[i], "shape");
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) noexcept {
  if (a.ndim_ != b.ndim_) return false;
  for (int i = 0; i < a.ndim_; ++i)
    if (a.dims_[i] != b.dims_[i]) return false;
  return true;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.str(); }

Dims::Dims(std::span<const std::int64_t> dims) {
  ANVIL_CHECK(dims.size() <= static_cast<std::size_t>(kMaxDims), ShapeError, "dims: too many dims; expected at most ",
              kMaxDims, " (a tensor has no more), got ", dims.size());
  size_ = static_cast<int>(dims.size());
  for (int i = 0; i < size_; ++i) dims_[i] = dims[i];
}

bool operator==(const Dims& a, const Dims& b) noexcept {
  if (a.size_ != b.size_) return false;
  for (int i = 0; i < a.size_; ++i)
    if (a.dims_[i] != b.dims_[i]) return false;
  return true;
}

std::ostream& operator<<(std::ostream& os, const Dims& d) {
  os << "[";
  for (int i = 0; i < d.size(); ++i) os << (i ? ", " : "") << d[i];
  return os << "]";
}

Strides contiguous_strides(const Shape& shape) {
  Strides st = Shape::filled(shape.size(), 1);
  std::int64_t acc = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= shape[i] > 0 ? shape[i] : 1;
  }
  return st;
}

}  // namespace anvil
