// anvil/dtype.h — element types and PyTorch's promotion rules.
//
//   anvil::promote(anvil::i32, anvil::f32) == anvil::f32
//   anvil::Scalar s = 2.5;  s.is_floating() == true
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string_view>
#include <type_traits>

namespace anvil {

// F16 and BF16 come last so the older values (kernel keys, files) keep
// their numbers; promote() places them between the integers and f32.
enum class DType : std::uint8_t { Bool = 0, U8, I32, I64, F32, F64, F16, BF16 };
inline constexpr int kNumDTypes = 8;

inline constexpr DType boolean = DType::Bool;
inline constexpr DType u8 = DType::U8;
inline constexpr DType i32 = DType::I32;
inline constexpr DType i64 = DType::I64;
inline constexpr DType f32 = DType::F32;
inline constexpr DType f64 = DType::F64;
inline constexpr DType f16 = DType::F16;    // IEEE binary16, PyTorch's float16
inline constexpr DType bf16 = DType::BF16;  // bfloat16: the top half of an f32

std::string_view to_string(DType t) noexcept;  // "f32", "i64", "bool", …
std::ostream& operator<<(std::ostream& os, DType t);

constexpr std::size_t element_size(DType t) noexcept {
  switch (t) {
    case DType::Bool:
    case DType::U8:
      return 1;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I32:
    case DType::F32:
      return 4;
    case DType::I64:
    case DType::F64:
      return 8;
  }
  return 0;
}
// The 16-bit floats: stored in 16 bits, computed in f32 (DESIGN §4.2).
constexpr bool is_half(DType t) noexcept { return t == DType::F16 || t == DType::BF16; }
constexpr bool is_floating(DType t) noexcept { return t == DType::F32 || t == DType::F64 || is_half(t); }
constexpr bool is_integral(DType t) noexcept { return !is_floating(t) && t != DType::Bool; }

// PyTorch's promotion for two tensors: bool < u8 < i32 < i64 < {f16, bf16} < f32 < f64,
// i.e. the larger category wins and, within a category, the wider type;
// f16 with bf16 (neither holds the other) gives f32.
constexpr DType promote(DType a, DType b) noexcept {
  if (a == b) return a;
  if (is_half(a) && is_half(b)) return DType::F32;
  if (is_half(a)) return is_floating(b) ? b : a;
  if (is_half(b)) return is_floating(a) ? a : b;
  return static_cast<std::uint8_t>(a) > static_cast<std::uint8_t>(b) ? a : b;
}

// The dtype a tensor gets from a C++ type, for tensor({...}), item<T>() and
// to_vector<T>(). Every integer type of a dtype's width maps to it, whatever
// its name: long long as well as std::int64_t (long on LP64 Linux), int,
// unsigned char. Character types and widths with no dtype (short) do not.
template <typename T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::Bool;
};
template <typename T>
concept DTypeInteger =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> && !std::is_same_v<T, wchar_t> &&
    !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t> &&
    ((std::is_signed_v<T> && (sizeof(T) == 4 || sizeof(T) == 8)) || (std::is_unsigned_v<T> && sizeof(T) == 1));
template <DTypeInteger T>
struct dtype_of<T> {
  static constexpr DType value = std::is_unsigned_v<T> ? DType::U8 : sizeof(T) == 4 ? DType::I32 : DType::I64;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::F64;
};
// A C++ type that has a dtype: what item<T>(), to_vector<T>() and tensor()
// take.
template <typename T>
concept HasDType = requires {
  dtype_of<T>::value;
};
template <typename T>
inline constexpr DType dtype_v = dtype_of<T>::value;

// A number that is not a tensor: the `2` in `x + 2`. It keeps its category
// (bool, integer, floating) so promotion can follow PyTorch: an integer tensor
// plus 2 stays integral, plus 2.5 becomes the default float dtype.
class Scalar {
 public:
  enum class Kind : std::uint8_t { Bool, Int, Float };
  constexpr Scalar() noexcept : kind_(Kind::Int), i_(0) {}
  constexpr Scalar(bool v) noexcept : kind_(Kind::Bool), i_(v) {}
  template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) constexpr Scalar(T v) noexcept
      : kind_(Kind::Int), i_(static_cast<std::int64_t>(v)) {}
  template <typename T>
  requires std::is_floating_point_v<T>
  constexpr Scalar(T v) noexcept : kind_(Kind::Float), d_(static_cast<double>(v)) {}

  constexpr Kind kind() const noexcept { return kind_; }
  constexpr bool is_floating() const noexcept { return kind_ == Kind::Float; }
  constexpr bool is_bool() const noexcept { return kind_ == Kind::Bool; }
  constexpr double to_double() const noexcept { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  constexpr std::int64_t to_int() const noexcept { return kind_ == Kind::Float ? static_cast<std::int64_t>(d_) : i_; }
  template <typename T>
  constexpr T to() const noexcept {
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<T>(to_double());
    else if constexpr (std::is_same_v<T, bool>)
      return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0;
    else
      return static_cast<T>(to_int());
  }

 private:
  Kind kind_;
  union {
    std::int64_t i_;
    double d_;
  };
};
std::ostream& operator<<(std::ostream& os, const Scalar& s);

// The dtype of `tensor op scalar`: PyTorch keeps the tensor's dtype unless the
// scalar is of a higher category (float scalar with an integer tensor → f32;
// integer scalar with a bool tensor → i64).
constexpr DType promote(DType t, const Scalar& s) noexcept {
  if (s.is_floating() && !is_floating(t)) return DType::F32;
  if (s.kind() == Scalar::Kind::Int && t == DType::Bool) return DType::I64;
  return t;
}

}  // namespace anvil
