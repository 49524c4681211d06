// The 16-bit floats on the host: src/kernels/half.h (the one definition the
// devices compile too) built as C++, and two storage types for the CPU
// kernels and the frontend's host code.
//
//   detail::Half h(1.5f);  float f = h;          // f16, rounded to nearest even
//   detail::BFloat16 b = detail::BFloat16::from_bits(0x3fc0);  float(b) == 1.5f
//
// They hold the bit pattern and convert to and from float only: arithmetic
// happens in float (a Half in an expression is a float), and a double or an
// integer becomes float first, as in PyTorch's c10::Half.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace anvil::detail {

namespace half_bits {
#define ANVIL_FN inline __attribute__((always_inline))
#define ANVIL_AS_U32(f) std::bit_cast<std::uint32_t>(static_cast<float>(f))
#define ANVIL_AS_F32(u) std::bit_cast<float>(static_cast<std::uint32_t>(u))
typedef std::uint16_t anvil_u16;
typedef std::uint32_t anvil_u32;
typedef float anvil_f32;
#include "kernels/half.h"
#undef ANVIL_FN
#undef ANVIL_AS_U32
#undef ANVIL_AS_F32
}  // namespace half_bits

template <typename Tag>
struct Float16Storage {
  std::uint16_t bits;

  Float16Storage() = default;
  template <typename T>
  requires std::is_arithmetic_v<T>
  explicit Float16Storage(T v) noexcept : bits(Tag::from_f32(static_cast<float>(v))) {}
  static Float16Storage from_bits(std::uint16_t b) noexcept {
    Float16Storage s;
    s.bits = b;
    return s;
  }
  operator float() const noexcept { return Tag::to_f32(bits); }
};

struct F16Tag {
  static float to_f32(std::uint16_t b) noexcept { return half_bits::anvil_f16_to_f32(b); }
  static std::uint16_t from_f32(float f) noexcept { return half_bits::anvil_f32_to_f16(f); }
};
struct BF16Tag {
  static float to_f32(std::uint16_t b) noexcept { return half_bits::anvil_bf16_to_f32(b); }
  static std::uint16_t from_f32(float f) noexcept { return half_bits::anvil_f32_to_bf16(f); }
};

using Half = Float16Storage<F16Tag>;
using BFloat16 = Float16Storage<BF16Tag>;
static_assert(sizeof(Half) == 2 && std::is_trivially_copyable_v<Half>);
static_assert(sizeof(BFloat16) == 2 && std::is_trivially_copyable_v<BFloat16>);

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Whole runs of 16-bit values to and from float: the CPU's elementwise loops
// and 16-bit GEMM convert through these, a block at a time. Bit for bit the
// scalar conversions above (tests/test_core_half.cpp checks every 16-bit
// pattern and the f32 rounding cases against them), only faster: F16C for
// f16 and AVX2 for f32 -> bf16 where the CPU has them (a runtime check),
// else loops the compiler vectorises as it can. `n` may be 0; src and dst
// must not overlap.
//
//   float buf[256];  widen_to_f32(halves, buf, 256);  narrow_from_f32(buf, halves, 256);
void widen_to_f32(const Half* src, float* dst, std::int64_t n) noexcept;
void widen_to_f32(const BFloat16* src, float* dst, std::int64_t n) noexcept;
void narrow_from_f32(const float* src, Half* dst, std::int64_t n) noexcept;
void narrow_from_f32(const float* src, BFloat16* dst, std::int64_t n) noexcept;

// Which bulk conversions this CPU runs, e.g. "f16: f16c, bf16: avx2" or
// "portable". For reports and tests.
const char* half_conversion_path() noexcept;

// The portable loops alone (the scalar conversion per element), so a test
// can hold the fast paths to them on a CPU that has those.
void widen_to_f32_portable(const Half* src, float* dst, std::int64_t n) noexcept;
void widen_to_f32_portable(const BFloat16* src, float* dst, std::int64_t n) noexcept;
void narrow_from_f32_portable(const float* src, Half* dst, std::int64_t n) noexcept;
void narrow_from_f32_portable(const float* src, BFloat16* dst, std::int64_t n) noexcept;

}  // namespace anvil::detail
