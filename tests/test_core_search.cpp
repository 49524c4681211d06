// searchsorted and unique on every device: PyTorch 1.13's answers where it
// has one, a plain host reference over random rows with ties in every dtype,
// the array API's NaN rule, empty and one-element inputs, and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "device_test.h"
#include "host_values.h"

using namespace anvil;
using anvil::testing::host_f64;

namespace {

using Values = std::vector<double>;

// An f32 tensor of `v` (every device has f32; f64 is optional).
Tensor f32s(const Values& v, const Shape& s, Device d) { return tensor(std::vector<float>(v.begin(), v.end()), s, d); }

::testing::AssertionResult same(const Values& got, const Values& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << ", expected " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))))
      return ::testing::AssertionFailure() << "at " << i << ": got " << got[i] << ", expected " << want[i];
  return ::testing::AssertionSuccess();
}

// The op's name and `part` in the message of `f`'s error of type E.
template <typename E, typename F>
::testing::AssertionResult raises(F f, const std::string& op, const std::string& part) {
  try {
    f();
  } catch (const E& e) {
    const std::string m = e.what();
    if (m.rfind(op + ":", 0) == 0 && m.find(part) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "message '" << m << "' lacks '" << op << ":' or '" << part << "'";
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "another error: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error";
}

// The insertion point by definition: how many of the row's entries come
// before v, NaN above every number (the order of sort).
std::int64_t insertion_point(const Values& row, double v, bool right) {
  std::int64_t n = 0;
  for (double s : row) {
    if (std::isnan(v))
      n += right || !std::isnan(s) ? 1 : 0;
    else
      n += right ? (s <= v ? 1 : 0) : (s < v ? 1 : 0);
  }
  return n;
}

bool has_fp64(Device d) { return properties(d).fp64; }

class Searching : public anvil::testing::DeviceTest {};

// PyTorch 1.13: torch.searchsorted(seq, v) and (..., right=True) of
//   seq = [1, 2, 2, 2, 5, 7], v = [[0, 2, 3], [7, 8, 2.5]]
// and of the batched seq = [[1, 3, 5], [2, 4, 6]], v = [[3, 6], [0, 7]].
TEST_P(Searching, SearchsortedMatchesPyTorch) {
  const Device d = device();
  for (DType t : {f32, f64, f16, bf16, i64, i32}) {
    if (t == f64 && !has_fp64(d)) continue;
    SCOPED_TRACE(::testing::Message() << t);
    const Tensor seq = f32s(Values{1, 2, 2, 2, 5, 7}, {6}, d).to(t);
    const Tensor v = f32s(Values{0, 2, 3, 7, 8, 2.5}, {2, 3}, d);  // f32: 2.5 stays 2.5 against the integers
    const Tensor left = searchsorted(seq, v);
    EXPECT_EQ(left.dtype(), i64);
    EXPECT_EQ(left.device(), d);
    EXPECT_EQ(left.shape(), Shape({2, 3}));
    EXPECT_TRUE(same(host_f64(left), {0, 1, 4, 5, 6, 4}));
    EXPECT_TRUE(same(host_f64(searchsorted(seq, v, false, true)), {0, 4, 4, 6, 6, 4}));
    EXPECT_TRUE(same(host_f64(searchsorted(seq, v, false, false, "right")), {0, 4, 4, 6, 6, 4}));
    EXPECT_TRUE(same(host_f64(searchsorted(seq, v, false, true, "right")), {0, 4, 4, 6, 6, 4}));
    EXPECT_TRUE(same(host_f64(searchsorted(seq, v, false, false, "left")), {0, 1, 4, 5, 6, 4}));
    const Tensor i32s = searchsorted(seq, v, true);
    EXPECT_EQ(i32s.dtype(), i32);
    EXPECT_TRUE(same(host_f64(i32s), {0, 1, 4, 5, 6, 4}));
    const Tensor b = f32s(Values{1, 3, 5, 2, 4, 6}, {2, 3}, d).to(t);
    const Tensor bv = f32s(Values{3, 6, 0, 7}, {2, 2}, d).to(t);
    EXPECT_TRUE(same(host_f64(searchsorted(b, bv)), {1, 3, 0, 3}));
    EXPECT_TRUE(same(host_f64(searchsorted(b, bv, false, false, "right")), {2, 3, 0, 3}));
    // A scalar value: a 0-dim result (torch.searchsorted(seq, 2) is tensor(1)).
    const Tensor one = searchsorted(seq, Scalar(2));
    EXPECT_EQ(one.dim(), 0);
    EXPECT_EQ(one.item<std::int64_t>(), 1);
    EXPECT_EQ(searchsorted(seq, Scalar(2), false, true).item<std::int64_t>(), 4);
  }
}

// sorter: PyTorch's answers for seq = [5, 1, 7, 2, 2, 2] with its stable
// argsort [1, 3, 4, 5, 0, 2] are those of the sorted sequence above.
TEST_P(Searching, SearchsortedWithSorter) {
  const Device d = device();
  const Tensor seq = f32s(Values{5, 1, 7, 2, 2, 2}, {6}, d);
  const Tensor sorter = tensor(std::vector<std::int64_t>{1, 3, 4, 5, 0, 2}, {6}, d);
  const Tensor v = f32s(Values{0, 2, 3, 7, 8, 2.5}, {2, 3}, d);
  EXPECT_TRUE(same(host_f64(searchsorted(seq, v, false, false, std::nullopt, sorter)), {0, 1, 4, 5, 6, 4}));
  EXPECT_TRUE(same(host_f64(searchsorted(seq, v, false, true, std::nullopt, sorter)), {0, 4, 4, 6, 6, 4}));
  // Batched: each row its own sorter (sort's indices).
  manual_seed(3);
  const Tensor rows = randint(0, 6, {3, 9}, d).to(f32);
  const Tensor values = randint(-1, 8, {3, 5}, d).to(f32);
  const Tensor by_sorter = searchsorted(rows, values, false, false, std::nullopt, sort(rows, 1).indices);
  EXPECT_TRUE(equal(by_sorter, searchsorted(sort(rows, 1).values, values)));
}

// Random sorted rows with many ties in every dtype, batched [2, 3, K] with
// values [2, 3, M] (and 1-D rows with 3-D values), against the definition.
TEST_P(Searching, SearchsortedAgainstReference) {
  const Device d = device();
  manual_seed(7);
  for (DType t : {f32, f64, f16, bf16, i64, i32, u8}) {
    if (t == f64 && !has_fp64(d)) continue;
    for (std::int64_t k : {1, 2, 17}) {
      SCOPED_TRACE(::testing::Message() << t << " K " << k);
      const Tensor seq = sort(randint(0, 9, {2, 3, k}, d).to(t), -1).values;
      const Tensor v = randint(0, 10, {2, 3, 5}, d).to(t);
      const Values s = host_f64(seq), vs = host_f64(v);
      for (bool right : {false, true}) {
        const Values got = host_f64(searchsorted(seq, v, false, right));
        Values want;
        for (std::size_t r = 0; r < 6; ++r) {
          const Values row(s.begin() + static_cast<std::ptrdiff_t>(r * static_cast<std::size_t>(k)),
                           s.begin() + static_cast<std::ptrdiff_t>((r + 1) * static_cast<std::size_t>(k)));
          for (std::size_t j = 0; j < 5; ++j)
            want.push_back(static_cast<double>(insertion_point(row, vs[r * 5 + j], right)));
        }
        EXPECT_TRUE(same(got, want)) << "right " << right;
      }
      // One 1-D row against values of any shape, non-contiguous included.
      const Tensor row = seq.select(0, 1).select(0, 2);
      const Tensor vt = v.transpose(0, 2);
      const Values rs = host_f64(row), vts = host_f64(vt);
      Values want;
      for (double x : vts) want.push_back(static_cast<double>(insertion_point(rs, x, true)));
      const Tensor got = searchsorted(row, vt, false, true);
      EXPECT_EQ(got.shape(), vt.shape());
      EXPECT_TRUE(same(host_f64(got), want));
    }
  }
}

// More comparisons than one block (Note [searchsorted by counting]): the
// values run in two blocks, and every answer is still the reference's.
TEST_P(Searching, SearchsortedInBlocks) {
  const Device d = device();
  const std::int64_t k = 4096, m = 5000;
  const Tensor seq = arange(k, d, i32) * 2;  // 0, 2, 4, ...
  const Tensor v = arange(m, d, i32) * 2 - 500;
  const Values got = host_f64(searchsorted(seq, v));
  ASSERT_EQ(got.size(), static_cast<std::size_t>(m));
  for (std::int64_t j = 0; j < m; ++j) {
    const std::int64_t x = 2 * j - 500;
    const std::int64_t want = std::clamp<std::int64_t>(x / 2, 0, k);
    ASSERT_EQ(got[static_cast<std::size_t>(j)], static_cast<double>(x < 0 ? 0 : want)) << "value " << x;
  }
}

// NaN sorts above every number, as in sort (the array API: inserting each
// value where searchsorted says keeps the sequence in sort's order).
TEST_P(Searching, SearchsortedNaN) {
  const Device d = device();
  const Tensor seq = f32s(Values{1, 2, NAN, NAN}, {4}, d);
  const Tensor v = f32s(Values{NAN, 2, 3, INFINITY, -INFINITY}, {5}, d);
  EXPECT_TRUE(same(host_f64(searchsorted(seq, v)), {2, 1, 2, 2, 0}));
  EXPECT_TRUE(same(host_f64(searchsorted(seq, v, false, true)), {4, 2, 2, 2, 0}));
  // Without NaN in the sequence, PyTorch's answer: a NaN value goes last.
  const Tensor plain = f32s(Values{1, 2, 3}, {3}, d);
  EXPECT_TRUE(same(host_f64(searchsorted(plain, f32s(Values{NAN}, {1}, d))), {3}));
  EXPECT_TRUE(same(host_f64(searchsorted(plain, f32s(Values{NAN}, {1}, d), false, true)), {3}));
  // Per row of a batch.
  const Tensor b = f32s(Values{1, NAN, NAN, 1, 2, 3}, {2, 3}, d);
  EXPECT_TRUE(same(host_f64(searchsorted(b, f32s(Values{NAN, NAN}, {2, 1}, d))), {1, 3}));
}

TEST_P(Searching, SearchsortedEmptyAndMixedDtypes) {
  const Device d = device();
  // PyTorch: [] -> [0] for any value; no values -> no result.
  EXPECT_TRUE(same(host_f64(searchsorted(zeros({0}, d), f32s(Values{1, NAN}, {2}, d))), {0, 0}));
  EXPECT_EQ(searchsorted(f32s(Values{1}, {1}, d), zeros({0}, d)).shape(), Shape({0}));
  EXPECT_EQ(searchsorted(zeros({0, 2}, d), zeros({0, 3}, d)).shape(), Shape({0, 3}));
  EXPECT_TRUE(same(host_f64(searchsorted(zeros({2, 0}, d), zeros({2, 3}, d))), {0, 0, 0, 0, 0, 0}));
  // One element (PyTorch: [4] against [3, 4, 5]).
  const Tensor four = tensor(std::vector<std::int64_t>{4}, {1}, d);
  const Tensor probes = tensor(std::vector<std::int64_t>{3, 4, 5}, {3}, d);
  EXPECT_TRUE(same(host_f64(searchsorted(four, probes)), {0, 0, 1}));
  EXPECT_TRUE(same(host_f64(searchsorted(four, probes, false, true)), {0, 1, 1}));
  // Integers against floats compare as floats (PyTorch promotes): 1.5 goes after 1.
  const Tensor ints = tensor(std::vector<std::int64_t>{1, 2, 3}, {3}, d);
  EXPECT_TRUE(same(host_f64(searchsorted(ints, f32s(Values{1.5, 3}, {2}, d))), {1, 2}));
  EXPECT_EQ(searchsorted(ints, Scalar(2.5)).item<std::int64_t>(), 2);
  // A values tensor that requires grad: an integer result, nothing recorded.
  const Tensor w = f32s(Values{1.5}, {1}, d).requires_grad_(true);
  EXPECT_FALSE(searchsorted(f32s(Values{1, 2}, {2}, d), w).requires_grad());
}

TEST_P(Searching, SearchsortedErrorsNameTheOp) {
  const Device d = device();
  const Tensor seq = f32s(Values{1, 2, 3}, {3}, d);
  const Tensor v = f32s(Values{2}, {1}, d);
  EXPECT_TRUE(raises<ValueError>([&] { searchsorted(seq, v, false, false, "middle"); }, "searchsorted", "'middle'"));
  EXPECT_TRUE(raises<ValueError>([&] { searchsorted(seq, v, false, true, "left"); }, "searchsorted", "opposites"));
  EXPECT_TRUE(raises<ShapeError>([&] { searchsorted(full({}, 1.0, d), v); }, "searchsorted", "got []"));
  const Tensor b = zeros({2, 3}, d);
  EXPECT_TRUE(raises<ShapeError>([&] { searchsorted(b, zeros({3, 1}, d)); }, "searchsorted", "expected [2, M]"));
  EXPECT_TRUE(raises<ShapeError>([&] { searchsorted(b, zeros({2}, d)); }, "searchsorted", "got [2]"));
  EXPECT_TRUE(raises<ShapeError>([&] { searchsorted(b, Scalar(1)); }, "searchsorted", "1-D"));
  const Tensor flags = tensor(std::vector<std::uint8_t>{0, 1}, {2}, d, DType::Bool);
  EXPECT_TRUE(raises<DTypeError>([&] { searchsorted(flags, flags); }, "searchsorted", "bool"));
  const Tensor s32 = tensor(std::vector<std::int32_t>{0, 1, 2}, {3}, d);
  EXPECT_TRUE(
      raises<DTypeError>([&] { searchsorted(seq, v, false, false, std::nullopt, s32); }, "searchsorted", "got i32"));
  const Tensor s2 = tensor(std::vector<std::int64_t>{0, 1}, {2}, d);
  EXPECT_TRUE(raises<ShapeError>([&] { searchsorted(seq, v, false, false, std::nullopt, s2); }, "searchsorted",
                                 "expected [3], got [2]"));
  EXPECT_TRUE(raises<ValueError>([&] { searchsorted(Tensor{}, v); }, "searchsorted", "undefined"));
  if (d != cpu()) {
    EXPECT_TRUE(raises<DeviceMismatch>([&] { searchsorted(seq, v.cpu()); }, "searchsorted", "cpu"));
    EXPECT_TRUE(raises<DeviceMismatch>(
        [&] {
          searchsorted(seq, v, false, false, std::nullopt, tensor(std::vector<std::int64_t>{0, 1, 2}, {3}));
        },
        "searchsorted", "cpu"));
  }
}

// --- unique ----------------------------------------------------------------------------

// The host reference: distinct values ascending with NaN last, each NaN its
// own; inverse and counts.
struct UniqueRef {
  Values values, inverse, counts;
};
UniqueRef unique_ref(const Values& x) {
  std::map<double, std::int64_t> seen;
  std::int64_t nans = 0;
  for (double v : x) std::isnan(v) ? ++nans : ++seen[v];
  UniqueRef r;
  std::map<double, std::size_t> position;
  for (const auto& [v, c] : seen) {
    position[v] = r.values.size();
    r.values.push_back(v);
    r.counts.push_back(static_cast<double>(c));
  }
  std::size_t next_nan = r.values.size();
  for (std::int64_t i = 0; i < nans; ++i) {
    r.values.push_back(NAN);
    r.counts.push_back(1);
  }
  for (double v : x) r.inverse.push_back(static_cast<double>(std::isnan(v) ? next_nan++ : position[v]));
  return r;
}

// PyTorch 1.13: torch.unique(x, return_inverse=True, return_counts=True).
TEST_P(Searching, UniqueMatchesPyTorch) {
  const Device d = device();
  for (DType t : {f32, f64, f16, bf16, i64, i32, u8}) {
    if (t == f64 && !has_fp64(d)) continue;
    SCOPED_TRACE(::testing::Message() << t);
    const Tensor x = f32s(Values{3, 1, 2, 1, 3, 3}, {2, 3}, d).to(t);
    auto [values, inverse, counts] = unique(x, true, true, true);
    EXPECT_EQ(values.dtype(), t);
    EXPECT_EQ(values.device(), d);
    EXPECT_TRUE(same(host_f64(values), {1, 2, 3}));
    EXPECT_EQ(inverse.shape(), Shape({2, 3}));
    EXPECT_EQ(inverse.dtype(), i64);
    EXPECT_TRUE(same(host_f64(inverse), {2, 0, 1, 0, 2, 2}));
    EXPECT_EQ(counts.dtype(), i64);
    EXPECT_TRUE(same(host_f64(counts), {2, 1, 3}));
    // What is not asked for is not computed.
    const UniqueResult only = unique(x);
    EXPECT_TRUE(same(host_f64(only.values), {1, 2, 3}));
    EXPECT_FALSE(only.inverse_indices.defined());
    EXPECT_FALSE(only.counts.defined());
    EXPECT_TRUE(same(host_f64(unique(x, false, false, true).counts), {2, 1, 3}));
  }
  // bool (PyTorch: [False, True], inverse [1, 0, 1], counts [1, 2]).
  auto [bv, bi, bc] = unique(tensor(std::vector<std::uint8_t>{1, 0, 1}, {3}, d, DType::Bool), true, true, true);
  EXPECT_EQ(bv.dtype(), DType::Bool);
  EXPECT_TRUE(same(host_f64(bv), {0, 1}));
  EXPECT_TRUE(same(host_f64(bi), {1, 0, 1}));
  EXPECT_TRUE(same(host_f64(bc), {1, 2}));
}

// Slices along dim, in lexicographic order (PyTorch 1.13's answers).
TEST_P(Searching, UniqueAlongDim) {
  const Device d = device();
  const Tensor rows = tensor(std::vector<std::int64_t>{1, 3, 0, 9, 1, 2, 0, 9}, {4, 2}, d);
  auto [v, i, c] = unique(rows, true, true, true, 0);
  EXPECT_EQ(v.shape(), Shape({3, 2}));
  EXPECT_TRUE(same(host_f64(v), {0, 9, 1, 2, 1, 3}));
  EXPECT_TRUE(same(host_f64(i), {2, 0, 1, 0}));
  EXPECT_TRUE(same(host_f64(c), {2, 1, 1}));
  const Tensor cols = f32s(Values{1, 3, 1, 0, 9, 0}, {2, 3}, d);
  auto [cv, ci, cc] = unique(cols, true, true, true, 1);
  EXPECT_EQ(cv.shape(), Shape({2, 2}));
  EXPECT_TRUE(same(host_f64(cv), {1, 3, 0, 9}));
  EXPECT_TRUE(same(host_f64(ci), {0, 1, 0}));
  EXPECT_TRUE(same(host_f64(cc), {2, 1}));
  const Tensor cube = f32s(Values{1, 2, 1, 2, 0, 2, 1, 2}, {2, 2, 2}, d);
  auto [tv, ti, tc] = unique(cube, true, true, true, -1);
  EXPECT_TRUE(equal(tv, cube));
  EXPECT_TRUE(same(host_f64(ti), {0, 1}));
  EXPECT_TRUE(same(host_f64(tc), {1, 1}));
  // values[inverse] rebuilds x, along the dim.
  manual_seed(5);
  const Tensor r = randint(0, 2, {9, 3}, d);
  auto [rv, ri, rc] = unique(r, true, true, true, 0);
  EXPECT_TRUE(equal(rv.index_select(0, ri), r));
  EXPECT_EQ(sum(rc).item<std::int64_t>(), 9);
}

TEST_P(Searching, UniqueAgainstReference) {
  const Device d = device();
  manual_seed(11);
  for (DType t : {f32, f64, f16, i64, i32, u8}) {
    if (t == f64 && !has_fp64(d)) continue;
    for (std::int64_t n : {1, 2, 40}) {
      SCOPED_TRACE(::testing::Message() << t << " n " << n);
      const Tensor x = randint(0, 7, {n, 2}, d).to(t).t();  // non-contiguous, with ties
      auto [v, i, c] = unique(x, true, true, true);
      const UniqueRef want = unique_ref(host_f64(x));
      EXPECT_TRUE(same(host_f64(v), want.values));
      EXPECT_TRUE(same(host_f64(i), want.inverse));
      EXPECT_TRUE(same(host_f64(c), want.counts));
      EXPECT_EQ(i.shape(), x.shape());
    }
  }
}

// Every NaN is a value of its own (the array API; PyTorch 1.13 gives counts
// [2, 0, 0] here).
TEST_P(Searching, UniqueNaN) {
  const Device d = device();
  const Tensor x = f32s(Values{NAN, 1, NAN, 1, -0.0, 0}, {6}, d);
  auto [v, i, c] = unique(x, true, true, true);
  EXPECT_TRUE(same(host_f64(v), {0, 1, NAN, NAN}));
  EXPECT_TRUE(same(host_f64(i), {2, 1, 3, 1, 0, 0}));
  EXPECT_TRUE(same(host_f64(c), {2, 2, 1, 1}));
  const UniqueRef want = unique_ref(host_f64(x));
  EXPECT_TRUE(same(host_f64(c), want.counts));
  // Rows holding a NaN differ from each other too.
  auto [rv, ri, rc] = unique(f32s(Values{NAN, 1, NAN, 1}, {2, 2}, d), true, true, true, 0);
  EXPECT_EQ(rv.shape(), Shape({2, 2}));
  EXPECT_TRUE(same(host_f64(rc), {1, 1}));
}

TEST_P(Searching, UniqueEmptyOneAndScalar) {
  const Device d = device();
  // PyTorch: unique(empty [0, 3]) -> [], inverse [0, 3], counts [].
  auto [ev, ei, ec] = unique(zeros({0, 3}, d), true, true, true);
  EXPECT_EQ(ev.shape(), Shape({0}));
  EXPECT_EQ(ei.shape(), Shape({0, 3}));
  EXPECT_EQ(ei.dtype(), i64);
  EXPECT_EQ(ec.shape(), Shape({0}));
  auto [dv, di, dc] = unique(zeros({0, 3}, d), true, true, true, 0);
  EXPECT_EQ(dv.shape(), Shape({0, 3}));
  EXPECT_EQ(di.shape(), Shape({0}));
  EXPECT_EQ(dc.shape(), Shape({0}));
  EXPECT_EQ(unique(zeros({3, 0}, d), true, true, true, 1).values.shape(), Shape({3, 0}));
  auto [ov, oi, oc] = unique(f32s(Values{4}, {1}, d), true, true, true);
  EXPECT_TRUE(same(host_f64(ov), {4}));
  EXPECT_TRUE(same(host_f64(oi), {0}));
  EXPECT_TRUE(same(host_f64(oc), {1}));
  // A 0-dim input: values [1], inverse 0-dim (PyTorch's tensor(0)).
  auto [sv, si, sc] = unique(full({}, 5.0, d), true, true, true);
  EXPECT_EQ(sv.shape(), Shape({1}));
  EXPECT_EQ(si.dim(), 0);
  EXPECT_EQ(si.item<std::int64_t>(), 0);
  EXPECT_TRUE(same(host_f64(sc), {1}));
  // No gradient (PyTorch has none for unique).
  EXPECT_FALSE(unique(f32s(Values{1, 1}, {2}, d).requires_grad_(true)).values.requires_grad());
}

TEST_P(Searching, UniqueErrorsNameTheOp) {
  const Device d = device();
  EXPECT_TRUE(raises<IndexError>([&] { unique(zeros({2, 2}, d), true, false, false, 2); }, "unique", "2"));
  EXPECT_TRUE(raises<ValueError>([&] { unique(zeros({2, 0}, d), true, false, false, 0); }, "unique", "[2, 0]"));
  EXPECT_TRUE(raises<ValueError>([&] { unique(Tensor{}); }, "unique", "undefined"));
}

ANVIL_INSTANTIATE_DEVICE_TEST(Searching);

}  // namespace
