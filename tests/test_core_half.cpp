// f16 and bf16 (DESIGN §4.2): conversions to and from f32 on every device,
// bit for bit, against NumPy's float16 for f16 (every one of the 65,536
// patterns) and the round-to-nearest-even truncation of f32 for bf16; a table
// of the hard cases of rounding; the CPU's bulk conversions (F16C or the
// portable loops) against the scalar ones; and the bytes a 16-bit tensor takes.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;
using anvil::testing::DeviceTest;

std::vector<std::uint16_t> all_patterns() {
  std::vector<std::uint16_t> v(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<std::uint16_t>(i);
  return v;
}

template <typename T>
std::vector<T> bits_of(const Tensor& t) {
  const Tensor h = t.cpu().contiguous();
  EXPECT_EQ(element_size(h.dtype()), sizeof(T));
  std::vector<T> out(static_cast<std::size_t>(h.numel()));
  if (!out.empty()) std::memcpy(out.data(), h.raw_data_ptr(), out.size() * sizeof(T));
  return out;
}

Tensor f32_from_bits(const std::vector<std::uint32_t>& bits, Device d) {
  return from_host(bits.data(), {static_cast<std::int64_t>(bits.size())}, f32, d);
}

struct NumpyF16 {
  std::vector<std::uint32_t> to_f32;  // f32 bits of float16(h)
  std::vector<std::uint16_t> back;    // float16(float32(float16(h))) bits
};

// NumPy's answers, computed once per process by tests/python/half_reference.py.
const NumpyF16& numpy_f16() {
  static const NumpyF16 ref = [] {
    NumpyF16 r;
    const std::string cmd =
        std::string("/usr/bin/python3 '") + ANVIL_SOURCE_DIR + "/tests/python/half_reference.py' 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    unsigned a = 0, b = 0;
    while (std::fscanf(p, "%x %x", &a, &b) == 2) {
      r.to_f32.push_back(a);
      r.back.push_back(static_cast<std::uint16_t>(b));
    }
    pclose(p);
    return r;
  }();
  return ref;
}

class Half : public DeviceTest {};

TEST_P(Half, EveryF16PatternMatchesNumpy) {
  const NumpyF16& ref = numpy_f16();
  ASSERT_EQ(ref.to_f32.size(), 65536u) << "tests/python/half_reference.py did not run: it needs /usr/bin/python3 "
                                          "with NumPy";
  const std::vector<std::uint16_t> pats = all_patterns();
  const Tensor h = from_host(pats.data(), {65536}, f16, device());
  const Tensor f = h.to(f32);
  const std::vector<std::uint32_t> got = bits_of<std::uint32_t>(f);
  const std::vector<std::uint16_t> back = bits_of<std::uint16_t>(f.to(f16));
  int bad = 0;
  for (std::size_t i = 0; i < 65536 && bad < 10; ++i) {
    if (got[i] != ref.to_f32[i]) {
      ADD_FAILURE() << std::hex << "f16 0x" << i << " -> f32 0x" << got[i] << ", numpy 0x" << ref.to_f32[i];
      ++bad;
    }
    if (back[i] != ref.back[i]) {
      ADD_FAILURE() << std::hex << "f16 0x" << i << " -> f32 -> f16 0x" << back[i] << ", numpy 0x" << ref.back[i];
      ++bad;
    }
  }
}

TEST_P(Half, EveryBF16PatternIsTheTopHalfOfAnF32) {
  const std::vector<std::uint16_t> pats = all_patterns();
  const Tensor b = from_host(pats.data(), {65536}, bf16, device());
  const Tensor f = b.to(f32);
  const std::vector<std::uint32_t> got = bits_of<std::uint32_t>(f);
  const std::vector<std::uint16_t> back = bits_of<std::uint16_t>(f.to(bf16));
  int bad = 0;
  for (std::uint32_t i = 0; i < 65536 && bad < 10; ++i) {
    if (got[i] != (i << 16)) {
      ADD_FAILURE() << std::hex << "bf16 0x" << i << " -> f32 0x" << got[i];
      ++bad;
    }
    // Exact values come back; so does every NaN, payload and sign included.
    if (back[i] != i) {
      ADD_FAILURE() << std::hex << "bf16 0x" << i << " -> f32 -> bf16 0x" << back[i];
      ++bad;
    }
  }
}

// f32 -> 16 bits where rounding is hard. f16 column: NumPy 1.24
// (x.astype(np.float16)); bf16 column: torch 1.13 for the finite values and
// the NaN rule of src/kernels/half.h (sign and top payload kept, never inf).
struct HardCase {
  std::uint32_t f32;
  std::uint16_t f16, bf16;
  const char* what;
};
constexpr HardCase kHardCases[] = {
    {0x3f800000, 0x3c00, 0x3f80, "1"},
    {0x477fe000, 0x7bff, 0x4780, "65504, the largest f16"},
    {0x477fefff, 0x7bff, 0x4780, "just below 65520"},
    {0x477ff000, 0x7c00, 0x4780, "65520: the tie above 65504 goes to inf (even)"},
    {0x477ff001, 0x7c00, 0x4780, "just above 65520"},
    {0x47800000, 0x7c00, 0x4780, "65536"},
    {0x7f7fffff, 0x7c00, 0x7f80, "f32 max: inf in both"},
    {0x7f7f7fff, 0x7c00, 0x7f7f, "just below bf16's rounding boundary"},
    {0x7f7f8000, 0x7c00, 0x7f80, "bf16's boundary: a tie that goes to inf"},
    {0x33800000, 0x0001, 0x3380, "2^-24, the smallest f16 subnormal"},
    {0x33000000, 0x0000, 0x3300, "2^-25, half of it: a tie to even 0"},
    {0x33000001, 0x0001, 0x3300, "just above 2^-25"},
    {0x32ffffff, 0x0000, 0x3300, "just below 2^-25"},
    {0x33c00000, 0x0002, 0x33c0, "1.5 * 2^-24: a tie to even 2"},
    {0x38800000, 0x0400, 0x3880, "2^-14, the smallest f16 normal"},
    {0x387fc000, 0x03ff, 0x3880, "the largest f16 subnormal"},
    {0x387fe000, 0x0400, 0x3880, "a tie between the largest subnormal and the smallest normal"},
    {0x3f801000, 0x3c00, 0x3f80, "1 + 2^-11: a tie to even 1"},
    {0x3f803000, 0x3c02, 0x3f80, "1 + 3 * 2^-11: a tie to even up"},
    {0x3f801001, 0x3c01, 0x3f80, "just above a tie"},
    {0x3f808000, 0x3c04, 0x3f80, "1 + 2^-8: bf16 tie to even 1"},
    {0x3f818000, 0x3c0c, 0x3f82, "1 + 3 * 2^-8: bf16 tie to even up"},
    {0x3f808001, 0x3c04, 0x3f81, "just above a bf16 tie"},
    {0x00000001, 0x0000, 0x0000, "the smallest f32 subnormal"},
    {0x00018000, 0x0000, 0x0002, "an f32 subnormal on a bf16 tie (odd: up)"},
    {0xb3000001, 0x8001, 0xb300, "negative, just above half the smallest subnormal"},
    {0x80000000, 0x8000, 0x8000, "-0"},
    {0x7f800000, 0x7c00, 0x7f80, "inf"},
    {0xff800000, 0xfc00, 0xff80, "-inf"},
    {0x7fc00000, 0x7e00, 0x7fc0, "the quiet NaN"},
    {0xffc00001, 0xfe00, 0xffc0, "a negative quiet NaN with a low payload"},
    {0x7f800001, 0x7c01, 0x7f81, "a signalling NaN whose kept payload is 0: stays NaN"},
    {0x7fa00000, 0x7d00, 0x7fa0, "a signalling NaN with a high payload"},
    {0x7fffe000, 0x7fff, 0x7fff, "a NaN with every kept payload bit"},
};

TEST_P(Half, HardCasesOfRounding) {
  std::vector<std::uint32_t> in;
  for (const HardCase& c : kHardCases) in.push_back(c.f32);
  const Tensor x = f32_from_bits(in, device());
  const std::vector<std::uint16_t> h = bits_of<std::uint16_t>(x.to(f16));
  const std::vector<std::uint16_t> b = bits_of<std::uint16_t>(x.to(bf16));
  for (std::size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(kHardCases[i].what);
    EXPECT_EQ(h[i], kHardCases[i].f16) << std::hex << "f32 0x" << in[i] << " -> f16 0x" << h[i];
    EXPECT_EQ(b[i], kHardCases[i].bf16) << std::hex << "f32 0x" << in[i] << " -> bf16 0x" << b[i];
  }
}

// Every other dtype converts to and from the 16-bit floats on every device
// as it does through f32 (c10::Half's rule), a strided view included.
TEST_P(Half, CastsToAndFromEveryDtype) {
  const Tensor src = tensor({-3.0, -0.5, 0.0, 1.0, 2.5, 255.0, 1000.25, 70000.0}, device());
  for (DType h : {f16, bf16}) {
    for (DType t : {boolean, u8, i32, i64, f32, f64, f16, bf16}) {
      if (t == f64 && !device().is_cpu() && !properties(device()).fp64) continue;
      SCOPED_TRACE(std::string(to_string(t)) + " <-> " + std::string(to_string(h)));
      const Tensor x = t == u8 ? src.abs().to(t) : src.to(t);
      const std::vector<double> xv = x.to_vector<double>();
      const Tensor y = x.to(h);
      EXPECT_EQ(y.dtype(), h);
      const std::vector<double> yv = y.to_vector<double>();
      for (std::size_t i = 0; i < xv.size(); ++i)
        EXPECT_EQ(yv[i], ref::cast_to(h, xv[i])) << "element " << i << " (" << xv[i] << ")";
      const std::vector<double> zv = y.to(t).to_vector<double>();
      for (std::size_t i = 0; i < xv.size(); ++i) {
        if (t == u8 || t == i32 || t == i64 || t == boolean) {
          if (std::isinf(yv[i])) continue;  // 70000 is inf in f16: no integer holds it
          EXPECT_EQ(zv[i], ref::cast_to(t, yv[i])) << "element " << i;
        } else {
          EXPECT_EQ(zv[i], ref::cast_to(t, yv[i])) << "element " << i;
        }
      }
    }
    const Tensor strided = src.to(f32).slice(0, 1, 8, 3).to(h);
    // 70000: past f16's 65504 (inf); bf16 keeps 8 bits (70144)
    EXPECT_EQ(strided.to_vector<float>(), (std::vector<float>{-0.5f, 2.5f, h == f16 ? INFINITY : 70144.0f}));
  }
}

TEST_P(Half, TakesHalfTheBytesOfF32) {
  const Device d = device();
  synchronize(d);
  const std::uint64_t before = memory_stats(d).allocated;
  {
    const Tensor a = zeros({1024, 1024}, d, f32);
    synchronize(d);
    const std::uint64_t f32_bytes = memory_stats(d).allocated - before;
    const Tensor b = zeros({1024, 1024}, d, f16);
    const Tensor c = zeros({1024, 1024}, d, bf16);
    synchronize(d);
    const std::uint64_t half_bytes = memory_stats(d).allocated - before - f32_bytes;
    EXPECT_EQ(b.nbytes(), a.nbytes() / 2);
    EXPECT_EQ(f32_bytes, 4u * 1024 * 1024);
    EXPECT_EQ(half_bytes, 2u * (2u * 1024 * 1024));
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(Half);

// The CPU's bulk conversions (core/half.h) give the scalar conversions' bits,
// whichever path this CPU takes and through the portable loops too: every
// 16-bit pattern, and f32 values around every 16-bit pattern (the low bits
// where f16 and bf16 round: below, on and above each tie). Runs start at odd
// offsets and have odd lengths, so the vector loops meet their tails, and
// NaNs sit in blocks with finite values.
std::vector<float> f32_rounding_cases() {
  constexpr std::uint32_t kLow[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000,
                                    0x5000, 0x7fff, 0x8000, 0x8001, 0xefff, 0xf000, 0xf001, 0xffff};
  std::vector<float> v;
  for (std::uint32_t high = 0; high < 65536; ++high)
    for (std::uint32_t low : kLow) v.push_back(std::bit_cast<float>(high << 16 | low));
  return v;
}

template <typename H>
void expect_bulk_matches_scalar(const char* what, void (*widen)(const H*, float*, std::int64_t),
                                void (*narrow)(const float*, H*, std::int64_t)) {
  SCOPED_TRACE(what);
  const std::vector<std::uint16_t> pats = all_patterns();
  std::vector<H> halves(pats.size());
  for (std::size_t i = 0; i < pats.size(); ++i) halves[i] = H::from_bits(pats[i]);
  for (std::size_t offset : {0u, 3u}) {
    const std::size_t n = halves.size() - offset - 2;
    std::vector<float> wide(n, -1.0f);
    widen(halves.data() + offset, wide.data(), static_cast<std::int64_t>(n));
    int bad = 0;
    for (std::size_t i = 0; i < n && bad < 10; ++i) {
      const float want = static_cast<float>(halves[offset + i]);
      if (std::bit_cast<std::uint32_t>(wide[i]) != std::bit_cast<std::uint32_t>(want)) {
        ADD_FAILURE() << std::hex << "widen 0x" << pats[offset + i] << ": 0x" << std::bit_cast<std::uint32_t>(wide[i])
                      << ", scalar 0x" << std::bit_cast<std::uint32_t>(want);
        ++bad;
      }
    }
  }
  const std::vector<float> floats = f32_rounding_cases();
  for (std::size_t offset : {0u, 5u}) {
    const std::size_t n = floats.size() - offset - 3;
    std::vector<H> narrowed(n, H::from_bits(0xdead));
    narrow(floats.data() + offset, narrowed.data(), static_cast<std::int64_t>(n));
    int bad = 0;
    for (std::size_t i = 0; i < n && bad < 10; ++i) {
      const std::uint16_t want = H(floats[offset + i]).bits;
      if (narrowed[i].bits != want) {
        ADD_FAILURE() << std::hex << "narrow f32 0x" << std::bit_cast<std::uint32_t>(floats[offset + i]) << ": 0x"
                      << narrowed[i].bits << ", scalar 0x" << want;
        ++bad;
      }
    }
  }
}

TEST(HalfBulkConversion, F16MatchesTheScalarConversion) {
  std::printf("bulk 16-bit conversions on this CPU: %s\n", detail::half_conversion_path());
  expect_bulk_matches_scalar<detail::Half>("f16, this CPU's path", &detail::widen_to_f32, &detail::narrow_from_f32);
  expect_bulk_matches_scalar<detail::Half>("f16, portable", &detail::widen_to_f32_portable,
                                           &detail::narrow_from_f32_portable);
}

TEST(HalfBulkConversion, BF16MatchesTheScalarConversion) {
  expect_bulk_matches_scalar<detail::BFloat16>("bf16, this CPU's path", &detail::widen_to_f32,
                                               &detail::narrow_from_f32);
  expect_bulk_matches_scalar<detail::BFloat16>("bf16, portable", &detail::widen_to_f32_portable,
                                               &detail::narrow_from_f32_portable);
}

// A run shorter than one vector, and an empty one, touch nothing past n.
TEST(HalfBulkConversion, ShortAndEmptyRuns) {
  const float src[3] = {1.5f, -2.0f, 65504.0f};
  detail::Half dst[5];
  for (auto& h : dst) h = detail::Half::from_bits(0x7777);
  detail::narrow_from_f32(src, dst, 0);
  EXPECT_EQ(dst[0].bits, 0x7777);
  detail::narrow_from_f32(src, dst, 3);
  EXPECT_EQ(dst[0].bits, 0x3e00);
  EXPECT_EQ(dst[1].bits, 0xc000);
  EXPECT_EQ(dst[2].bits, 0x7bff);
  EXPECT_EQ(dst[3].bits, 0x7777);
  float back[4] = {7, 7, 7, 7};
  detail::widen_to_f32(dst, back, 3);
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[2], 65504.0f);
  EXPECT_EQ(back[3], 7.0f);
}

// The CPU's elementwise loops convert a block at a time: a 16-bit add and
// exp over a run longer than a block, with a tail and a broadcast operand,
// round each element once, as the scalar conversion of the f32 result does.
TEST(HalfBulkConversion, ElementwiseRowsRoundOnceThroughF32) {
  for (DType h : {f16, bf16}) {
    SCOPED_TRACE(to_string(h));
    const std::int64_t n = 3 * 512 + 37;
    const Tensor a32 = randn({n}, cpu()) * 3.0, b32 = randn({n}, cpu());
    const Tensor a = a32.to(h), b = b32.to(h);
    const std::vector<float> av = a.to(f32).to_vector<float>(), bv = b.to(f32).to_vector<float>();
    const std::vector<float> sum = (a + b).to(f32).to_vector<float>();
    const std::vector<float> e = (a.exp() * b).to(f32).to_vector<float>();
    const std::vector<float> exp_f32 = a.to(f32).exp().to_vector<float>();
    const std::vector<float> scaled = (a * b.select(0, 5)).to(f32).to_vector<float>();
    auto round = [&](float v) { return full({1}, v, cpu(), f32).to(h).to(f32).item<float>(); };
    for (std::int64_t i = 0; i < n; i += 97) {
      EXPECT_EQ(sum[i], round(av[i] + bv[i])) << "add, element " << i;
      EXPECT_EQ(e[i], round(round(exp_f32[i]) * bv[i])) << "exp * b, element " << i;
      EXPECT_EQ(scaled[i], round(av[i] * bv[5])) << "broadcast mul, element " << i;
    }
  }
}

// A memory-bound 16-bit op on contiguous rows converts in registers, eight
// at a time, and a group with a NaN in or out takes the scalar conversions
// (Note [16-bit rows convert in the loop]). Over every 16-bit pattern (each
// NaN payload, subnormals, infinities), at an odd length and an unaligned
// start, each result must be the same bits as the op computed in f32 and
// rounded once. `b` holds no NaN: which of two NaNs an f32 add returns is the
// compiler's choice of operand order, here and in the reference alike.
TEST(HalfBulkConversion, FusedRowsGiveEveryPatternTheF32Answer) {
  for (DType h : {f16, bf16}) {
    SCOPED_TRACE(to_string(h));
    const auto is_nan = [h](std::uint16_t v) { return h == f16 ? (v & 0x7fff) > 0x7c00 : (v & 0x7fff) > 0x7f80; };
    // Three values before the patterns: the views below drop the first, so
    // rows start one element past an alignment and end in a tail of 2.
    std::vector<std::uint16_t> a_bits{0x3c00, 0x1234, 0x4000};
    std::vector<std::uint16_t> b_bits{0x3c00, 0x3c00, 0x3c00};
    for (std::uint32_t i = 0; i < 65536; ++i) {
      a_bits.push_back(static_cast<std::uint16_t>(i));
      const auto mixed = static_cast<std::uint16_t>(i * 40503u + 7u);
      b_bits.push_back(is_nan(mixed) ? 0xc000 : mixed);  // 0xc000 is -2 in f16 and in bf16
    }
    const auto n = static_cast<std::int64_t>(a_bits.size());
    const Tensor a = from_host(a_bits.data(), {n}, h, cpu()).slice(0, 1, n);
    const Tensor b = from_host(b_bits.data(), {n}, h, cpu()).slice(0, 1, n);
    const Tensor a32 = a.to(f32), b32 = b.to(f32);
    const auto expect_bits = [&](const Tensor& got, const Tensor& want, const char* what) {
      const std::vector<std::uint16_t> g = bits_of<std::uint16_t>(got), w = bits_of<std::uint16_t>(want.to(h));
      ASSERT_EQ(g.size(), w.size()) << what;
      int reported = 0;
      for (std::size_t i = 0; i < g.size() && reported < 5; ++i)
        if (g[i] != w[i]) {
          ++reported;
          ADD_FAILURE() << what << ", a 0x" << std::hex << a_bits[i + 1] << ", b 0x" << b_bits[i + 1] << ": 0x" << g[i]
                        << ", f32 rounded once 0x" << w[i];
        }
    };
    expect_bits(a + b, a32 + b32, "a + b");
    expect_bits(a * b, a32 * b32, "a * b");
    expect_bits(a / b, a32 / b32, "a / b");
    expect_bits(maximum(a, b), maximum(a32, b32), "maximum(a, b)");
    expect_bits(a * 1.5, a32 * 1.5, "a * 1.5");
    expect_bits(2.0 - a, 2.0 - a32, "2 - a");
    expect_bits(-a, -a32, "-a");
    expect_bits(a.sqrt(), a32.sqrt(), "sqrt(a)");
    expect_bits(a.abs(), a32.abs(), "abs(a)");
    Tensor in_place = a.clone();
    in_place.add_(b);
    expect_bits(in_place, a32 + b32, "a.add_(b)");
    // a copy within the type keeps every pattern, signalling NaNs included
    EXPECT_EQ(bits_of<std::uint16_t>(a.clone()), bits_of<std::uint16_t>(a));
  }
}

}  // namespace
