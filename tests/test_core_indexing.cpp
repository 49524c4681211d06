// Indexing and joining on every device: index_select, gather, index_add,
// index_copy, flip, cat, stack, split, chunk; out-of-range indices are IndexErrors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "device_test.h"
#include "reference.h"

namespace {

using namespace anvil;
using ref::Domain;
using ref::Layout;

class Indexing : public anvil::testing::DeviceTest {};

const Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Stepped};

TEST_P(Indexing, IndexSelect) {
  const Device d = device();
  std::uint64_t seed = 1;
  const std::vector<std::int64_t> idx_values = {2, 0, 2, 4, 1};
  for (DType dt : {f32, f64, i32, i64})
    for (Layout layout : kLayouts)
      for (int dim : {0, 1, -1, 2}) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + ref::name(layout) + " dim=" + std::to_string(dim));
        ref::guarded([&] {
          const auto x = ref::make_input({5, 6, 7}, layout, dt, d, Domain{-9, 9, true}, seed++);
          for (DType it : {i64, i32}) {
            const Tensor idx = ref::to_tensor(ref::Array({5}, {2, 0, 2, 4, 1}), it, d);
            const Tensor out = index_select(x.t, dim, idx);
            EXPECT_EQ(out.dtype(), dt);
            EXPECT_EQ(out.device(), d);
            EXPECT_FALSE(out.shares_storage(x.t));
            EXPECT_TRUE(ref::exact(out, ref::index_select(x.r, dim, idx_values)));
          }
          // An empty index gives an empty dim.
          const Tensor none = zeros({0}, d, i64);
          EXPECT_TRUE(ref::exact(index_select(x.t, dim, none), ref::index_select(x.r, dim, {})));
        });
      }
  // A non-contiguous index tensor.
  const Tensor wide = tensor(std::vector<std::int64_t>{3, 9, 0, 9, 1, 9}, d);
  const auto x = ref::make_input({4, 3}, Layout::Contiguous, f32, d, Domain{-1, 1}, 99);
  EXPECT_TRUE(ref::exact(index_select(x.t, 0, wide.slice(0, 0, 6, 2)), ref::index_select(x.r, 0, {3, 0, 1})));
}

TEST_P(Indexing, IndexSelectErrors) {
  const Device d = device();
  auto x = ones({4, 3}, d);
  EXPECT_THROW(index_select(x, 0, tensor(std::vector<std::int64_t>{0, 4}, d)).to_vector<float>(), IndexError);
  EXPECT_THROW(index_select(x, 2, tensor(std::vector<std::int64_t>{0}, d)), IndexError);
  EXPECT_THROW(index_select(x, 0, ones({2}, d)), DTypeError);           // float index
  EXPECT_THROW(index_select(x, 0, zeros({2, 1}, d, i64)), ShapeError);  // 2-D index
  try {
    (void)index_select(x, 0, tensor(std::vector<std::int64_t>{7}, d)).to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const IndexError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("index_select"), std::string::npos) << m;
    EXPECT_NE(m.find("7"), std::string::npos) << m;
  }
  // Usable afterwards.
  EXPECT_TRUE(ref::exact(index_select(x, 0, tensor(std::vector<std::int64_t>{3}, d)), ref::Array::filled({1, 3}, 1)));
}

TEST_P(Indexing, Gather) {
  const Device d = device();
  std::uint64_t seed = 10;
  for (DType dt : {f32, f64, i64})
    for (Layout layout : kLayouts)
      for (int dim : {0, 1, 2, -1}) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + ref::name(layout) + " dim=" + std::to_string(dim));
        ref::guarded([&] {
          const auto x = ref::make_input({4, 5, 6}, layout, dt, d, Domain{-9, 9, true}, seed++);
          const int wd = dim < 0 ? dim + 3 : dim;
          // Index of the same shape, and one smaller in every dim (torch allows both).
          for (const ref::Dims& ishape : {ref::Dims{4, 5, 6}, ref::Dims{3, 2, 4}, ref::Dims{4, 5, 1}}) {
            SCOPED_TRACE(ref::dims_str(ishape));
            const ref::Array idx = ref::random(
                ishape, Domain{0, static_cast<double>(x.r.shape[static_cast<std::size_t>(wd)] - 1), true}, seed++);
            for (Layout il : {Layout::Contiguous, Layout::Transposed}) {
              Tensor it;
              if (il == Layout::Contiguous) {
                it = ref::to_tensor(idx, i64, d);
              } else {
                it = ref::to_tensor(ref::transpose(idx, -1, -2), i64, d).transpose(-1, -2);
              }
              const Tensor out = gather(x.t, dim, it);
              EXPECT_EQ(out.dtype(), dt);
              EXPECT_EQ(out.shape(), Shape(ishape));
              EXPECT_TRUE(ref::exact(out, ref::gather(x.r, dim, idx)));
            }
          }
        });
      }
}

TEST_P(Indexing, GatherErrors) {
  const Device d = device();
  auto x = ones({3, 4}, d);
  EXPECT_THROW(gather(x, 1, tensor(std::vector<std::int64_t>{0, 4, 1, 2}, Shape{2, 2}, d)).to_vector<float>(),
               IndexError);
  EXPECT_THROW(gather(x, 2, zeros({3, 4}, d, i64)), IndexError);
  EXPECT_THROW(gather(x, 0, zeros({3}, d, i64)), ShapeError);     // rank differs
  EXPECT_THROW(gather(x, 0, zeros({3, 5}, d, i64)), ShapeError);  // larger than x off the gather dim
  EXPECT_THROW(gather(x, 0, zeros({3, 4}, d, f32)), DTypeError);
  try {
    (void)gather(x, 1, tensor(std::vector<std::int64_t>{9}, Shape{1, 1}, d)).to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("gather"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ref::exact(gather(x, 1, zeros({3, 1}, d, i64)), ref::Array::filled({3, 1}, 1)));
}

TEST_P(Indexing, IndexAdd) {
  const Device d = device();
  std::uint64_t seed = 200;
  // Duplicates (2 twice) must add up; integer values keep the sums exact.
  const std::vector<std::int64_t> idx_values = {2, 0, 2, 4, 1, 2};
  for (DType dt : {f32, f64, i32, i64})
    for (Layout layout : kLayouts)
      for (int dim : {0, 1, -1}) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + ref::name(layout) + " dim=" + std::to_string(dim));
        ref::guarded([&] {
          const int wd = dim < 0 ? dim + 3 : dim;
          ref::Dims xs{5, 6, 7}, ss = xs;
          ss[static_cast<std::size_t>(wd)] = 6;
          const auto x = ref::make_input(xs, layout, dt, d, Domain{-9, 9, true}, seed++);
          const auto src = ref::make_input(ss, layout, dt, d, Domain{-9, 9, true}, seed++);
          for (DType it : {i64, i32}) {
            const Tensor idx = ref::to_tensor(ref::Array({6}, {2, 0, 2, 4, 1, 2}), it, d);
            const Tensor out = index_add(x.t, dim, idx, src.t);
            EXPECT_EQ(out.dtype(), dt);
            EXPECT_EQ(out.device(), d);
            EXPECT_FALSE(out.shares_storage(x.t));
            EXPECT_TRUE(ref::exact(out, ref::index_add(x.r, dim, idx_values, src.r)));
            if (is_floating(dt)) {
              EXPECT_TRUE(
                  ref::exact(x.t.index_add(dim, idx, src.t, 2), ref::index_add(x.r, dim, idx_values, src.r, 2)));
            }
          }
          // In place, into a copy; x is untouched by the out-of-place forms.
          Tensor y = x.t.clone();
          y.index_add_(dim, ref::to_tensor(ref::Array({6}, {2, 0, 2, 4, 1, 2}), i64, d), src.t);
          EXPECT_TRUE(ref::exact(y, ref::index_add(x.r, dim, idx_values, src.r)));
          EXPECT_TRUE(ref::exact(x.t, x.r));
          // An empty index adds nothing.
          ref::Dims es = xs;
          es[static_cast<std::size_t>(wd)] = 0;
          EXPECT_TRUE(ref::exact(index_add(x.t, dim, zeros({0}, d, i64), zeros(Shape(es), d, dt)), x.r));
        });
      }
}

TEST_P(Indexing, IndexAddIsDeterministic) {
  // Many duplicates of floats that do not add exactly: the same bits every
  // run, and the CPU's bits on every device (one order of the adds).
  const Device d = device();
  const std::int64_t n = 3000;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = (i * 7) % 3;
  manual_seed(5);
  const Tensor src_cpu = randn({n, 4});
  const Tensor idx_cpu = tensor(idx);
  const Tensor want = index_add(zeros({3, 4}), 0, idx_cpu, src_cpu);
  const Tensor a = index_add(zeros({3, 4}, d), 0, idx_cpu.to(d), src_cpu.to(d));
  const Tensor b = index_add(zeros({3, 4}, d), 0, idx_cpu.to(d), src_cpu.to(d));
  EXPECT_TRUE(equal(a.cpu(), b.cpu()));
  EXPECT_TRUE(equal(a.cpu(), want));
}

TEST_P(Indexing, IndexAddErrors) {
  const Device d = device();
  const Tensor x = ones({4, 3}, d);
  const Tensor i2 = tensor(std::vector<std::int64_t>{0, 3}, d);
  EXPECT_THROW(index_add(x, 0, tensor(std::vector<std::int64_t>{0, 4}, d), ones({2, 3}, d)).to_vector<float>(),
               IndexError);
  EXPECT_THROW(index_add(x, 0, tensor(std::vector<std::int64_t>{-1, 0}, d), ones({2, 3}, d)).to_vector<float>(),
               IndexError);
  EXPECT_THROW(index_add(x, 2, i2, ones({2, 3}, d)), IndexError);
  EXPECT_THROW(index_add(x, 0, ones({2}, d), ones({2, 3}, d)), DTypeError);           // float index
  EXPECT_THROW(index_add(x, 0, zeros({2, 1}, d, i64), ones({2, 3}, d)), ShapeError);  // 2-D index
  EXPECT_THROW(index_add(x, 0, i2, ones({2, 3}, d, f64)), DTypeError);                // source dtype
  try {
    (void)index_add(x, 0, i2, ones({3, 3}, d));
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("index_add"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[3, 3]"), std::string::npos) << m;
  }
  try {
    (void)index_add(x, 1, tensor(std::vector<std::int64_t>{7}, d), ones({4, 1}, d)).to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("index_add"), std::string::npos) << e.what();
  }
  if (d != cpu()) {
    EXPECT_THROW(index_add(x, 0, i2, ones({2, 3}, cpu())), DeviceMismatch);
  }
  EXPECT_TRUE(
      ref::exact(index_add(x, 0, i2, ones({2, 3}, d)), ref::Array({4, 3}, {2, 2, 2, 1, 1, 1, 1, 1, 1, 2, 2, 2})));
}

TEST_P(Indexing, ScatterAdd) {
  const Device d = device();
  std::uint64_t seed = 300;
  for (DType dt : {f32, f64, i64})
    for (Layout layout : kLayouts)
      for (int dim : {0, 1, 2, -1}) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + ref::name(layout) + " dim=" + std::to_string(dim));
        ref::guarded([&] {
          const int wd = dim < 0 ? dim + 3 : dim;
          const auto x = ref::make_input({4, 5, 6}, layout, dt, d, Domain{-9, 9, true}, seed++);
          const auto src = ref::make_input({5, 6, 7}, layout, dt, d, Domain{-9, 9, true}, seed++);
          // Index as large as x, smaller, and longer than x along dim (torch allows each).
          ref::Dims longer{4, 5, 6};
          longer[static_cast<std::size_t>(wd)] = src.r.shape[static_cast<std::size_t>(wd)];
          for (const ref::Dims& ishape : {ref::Dims{4, 5, 6}, ref::Dims{3, 2, 4}, longer}) {
            SCOPED_TRACE(ref::dims_str(ishape));
            const ref::Array idx = ref::random(
                ishape, Domain{0, static_cast<double>(x.r.shape[static_cast<std::size_t>(wd)] - 1), true}, seed++);
            const Tensor it = ref::to_tensor(ref::transpose(idx, -1, -2), i64, d).transpose(-1, -2);
            const Tensor out = scatter_add(x.t, dim, it, src.t);
            EXPECT_EQ(out.dtype(), dt);
            EXPECT_EQ(out.shape(), x.t.shape());
            const ref::Array want = ref::scatter_add(x.r, dim, idx, src.r);
            EXPECT_TRUE(ref::exact(out, want));
            Tensor y = x.t.clone();
            y.scatter_add_(dim, it, src.t);
            EXPECT_TRUE(ref::exact(y, want));
          }
        });
      }
}

TEST_P(Indexing, ScatterAddErrors) {
  const Device d = device();
  const Tensor x = ones({3, 4}, d);
  EXPECT_THROW(scatter_add(x, 1, tensor(std::vector<std::int64_t>{0, 4, 1, 2}, Shape{2, 2}, d), ones({2, 2}, d))
                   .to_vector<float>(),
               IndexError);
  EXPECT_THROW(scatter_add(x, 2, zeros({3, 4}, d, i64), ones({3, 4}, d)), IndexError);
  EXPECT_THROW(scatter_add(x, 0, zeros({3}, d, i64), ones({3, 4}, d)), ShapeError);          // rank differs
  EXPECT_THROW(scatter_add(x, 0, zeros({3, 5}, d, i64), ones({3, 5}, d)), ShapeError);       // larger than x
  EXPECT_THROW(scatter_add(x, 0, zeros({3, 4}, d, i64), ones({2, 4}, d)), ShapeError);       // larger than src
  EXPECT_THROW(scatter_add(x, 0, zeros({3, 4}, d, f32), ones({3, 4}, d)), DTypeError);       // float index
  EXPECT_THROW(scatter_add(x, 0, zeros({3, 4}, d, i64), ones({3, 4}, d, f64)), DTypeError);  // src dtype
  try {
    (void)scatter_add(x, 1, tensor(std::vector<std::int64_t>{9}, Shape{1, 1}, d), ones({1, 1}, d)).to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("scatter_add"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ref::exact(scatter_add(x, 1, zeros({3, 1}, d, i64), ones({3, 1}, d)),
                         ref::Array({3, 4}, {2, 1, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1})));
}

// torch.index_select and torch.gather reject negative indices ("index out of
// range in self"); they do not count from the end like select() does.
TEST_P(Indexing, NegativeIndicesAreOutOfRange) {
  const Device d = device();
  auto x = ones({3, 4}, d);
  EXPECT_THROW(index_select(x, 1, tensor(std::vector<std::int64_t>{-1}, d)).to_vector<float>(), IndexError);
  EXPECT_THROW(index_select(x, 0, tensor(std::vector<std::int64_t>{0, -3}, d)).to_vector<float>(), IndexError);
  EXPECT_THROW(gather(x, 0, tensor(std::vector<std::int64_t>{-1, 0}, Shape{1, 2}, d)).to_vector<float>(), IndexError);
  EXPECT_THROW(gather(x, 1, tensor(std::vector<std::int64_t>{0, -4}, Shape{1, 2}, d)).to_vector<float>(), IndexError);
}

TEST_P(Indexing, Cat) {
  const Device d = device();
  std::uint64_t seed = 20;
  for (DType dt : {f32, i64, boolean})
    for (int dim : {0, 1, 2, -1, -3}) {
      SCOPED_TRACE(std::string(to_string(dt)) + " dim=" + std::to_string(dim));
      ref::guarded([&] {
        const int wd = dim < 0 ? dim + 3 : dim;
        std::vector<Tensor> ts;
        std::vector<ref::Array> rs;
        const std::int64_t sizes[] = {2, 0, 3, 1};
        for (std::size_t i = 0; i < 4; ++i) {
          ref::Dims shape = {2, 3, 4};
          shape[static_cast<std::size_t>(wd)] = sizes[i];
          const auto in = ref::make_input(shape, kLayouts[i % 3], dt, d, Domain{-5, 5, true}, seed++);
          ts.push_back(in.t);
          rs.push_back(in.r);
        }
        const Tensor out = cat(ts, dim);
        EXPECT_EQ(out.dtype(), dt);
        EXPECT_EQ(out.device(), d);
        EXPECT_TRUE(ref::exact(out, ref::cat(rs, dim)));
        EXPECT_TRUE(ref::exact(cat({ts[2]}, dim), rs[2]));
      });
    }
  // Default dim 0; 1-D.
  auto a = arange(3, d), b = arange(2, d);
  EXPECT_TRUE(ref::exact(cat({a, b}), ref::Array({5}, {0, 1, 2, 0, 1})));
  // Mixed dtypes promote, as torch.cat.
  auto c = cat({ones({2}, d, i32), full({1}, 0.5, d)});
  EXPECT_EQ(c.dtype(), f32);
  EXPECT_TRUE(ref::exact(c, ref::Array({3}, {1, 1, 0.5})));
  // Errors.
  EXPECT_THROW(cat({ones({2, 3}, d), ones({2, 4}, d)}, 0), ShapeError);
  EXPECT_THROW(cat({ones({2, 3}, d), ones({2, 3, 1}, d)}, 0), ShapeError);
  EXPECT_THROW(cat({}, 0), Error);
  EXPECT_THROW(cat({ones({2}, d)}, 1), IndexError);
}

TEST_P(Indexing, Stack) {
  const Device d = device();
  std::uint64_t seed = 30;
  for (int dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    std::vector<Tensor> ts;
    std::vector<ref::Array> rs;
    for (int i = 0; i < 3; ++i) {
      const auto in = ref::make_input({3, 4}, kLayouts[i], f32, d, Domain{-1, 1}, seed++);
      ts.push_back(in.t);
      rs.push_back(in.r);
    }
    const Tensor out = stack(ts, dim);
    EXPECT_EQ(out.dim(), 3);
    EXPECT_TRUE(ref::exact(out, ref::stack(rs, dim)));
  }
  EXPECT_EQ(stack({ones({}, d), zeros({}, d)}).shape(), (Shape{2}));
  EXPECT_THROW(stack({ones({2}, d), ones({3}, d)}), ShapeError);
  EXPECT_THROW(stack({ones({2}, d)}, 2), IndexError);
}

TEST_P(Indexing, SplitAndChunk) {
  const Device d = device();
  const auto x = ref::make_input({5, 6}, Layout::Contiguous, f32, d, Domain{-1, 1}, 40);
  auto parts = split(x.t, 2, 0);
  ASSERT_EQ(parts.size(), 3u);  // 2, 2, 1
  const std::int64_t starts[] = {0, 2, 4}, lens[] = {2, 2, 1};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(parts[i].shares_storage(x.t));
    EXPECT_TRUE(ref::exact(parts[i], ref::slice(x.r, 0, starts[i], starts[i] + lens[i])));
  }
  auto cols = split(x.t, 4, -1);
  ASSERT_EQ(cols.size(), 2u);  // 4, 2
  EXPECT_TRUE(ref::exact(cols[0], ref::slice(x.r, 1, 0, 4)));
  EXPECT_TRUE(ref::exact(cols[1], ref::slice(x.r, 1, 4, 6)));
  EXPECT_EQ(split(x.t, 10, 0).size(), 1u);
  EXPECT_THROW(split(x.t, 0, 0), Error);
  // torch.split with a list: pieces of those sizes (a 0 is an empty view).
  auto sized = x.t.split(std::vector<std::int64_t>{1, 0, 3, 2}, 1);
  ASSERT_EQ(sized.size(), 4u);
  EXPECT_TRUE(ref::exact(sized[0], ref::slice(x.r, 1, 0, 1)));
  EXPECT_EQ(sized[1].shape(), (Shape{5, 0}));
  EXPECT_TRUE(ref::exact(sized[2], ref::slice(x.r, 1, 1, 4)));
  EXPECT_TRUE(ref::exact(sized[3], ref::slice(x.r, 1, 4, 6)));
  EXPECT_TRUE(sized[3].shares_storage(x.t));
  EXPECT_THROW(split(x.t, std::vector<std::int64_t>{2, 2}, 0), ValueError);  // adds up to 4, not 5
  EXPECT_THROW(split(x.t, std::vector<std::int64_t>{6, -1}, 0), ValueError);

  // torch.chunk: chunks of ceil(n / chunks); may return fewer chunks.
  auto c3 = chunk(x.t, 3, 0);  // 5 rows → 2, 2, 1
  ASSERT_EQ(c3.size(), 3u);
  EXPECT_EQ(c3[2].size(0), 1);
  auto c4 = chunk(x.t, 4, 1);  // 6 cols → ceil(6/4) = 2 → 3 chunks of 2
  ASSERT_EQ(c4.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(c4[i].shares_storage(x.t));
    EXPECT_TRUE(
        ref::exact(c4[i], ref::slice(x.r, 1, static_cast<std::int64_t>(2 * i), static_cast<std::int64_t>(2 * i + 2))));
  }
  auto c1 = chunk(x.t, 1, 0);
  ASSERT_EQ(c1.size(), 1u);
  EXPECT_TRUE(ref::exact(c1[0], x.r));
  EXPECT_THROW(chunk(x.t, 0, 0), Error);
  // Splitting a non-contiguous tensor.
  auto tr = split(x.t.t(), 4, 0);
  ASSERT_EQ(tr.size(), 2u);
  EXPECT_TRUE(ref::exact(tr[1], ref::slice(ref::transpose(x.r, 0, 1), 0, 4, 6)));
  // cat undoes split.
  EXPECT_TRUE(ref::exact(cat(split(x.t, 2, 1), 1), x.r));
}

// torch.index_copy with NumPy's x[idx] = v for repeated indices: the last
// write wins. Reference: the rows written in index order.
ref::Array index_copy_ref(const ref::Array& a, int dim, const std::vector<std::int64_t>& index, const ref::Array& src) {
  const auto d = static_cast<std::size_t>(dim);
  ref::Array out = a;
  const ref::Dims st = ref::row_major_strides(a.shape);
  std::vector<std::int64_t> last_writer(static_cast<std::size_t>(a.shape[d]), -1);
  for (std::size_t k = 0; k < index.size(); ++k)
    last_writer[static_cast<std::size_t>(index[k])] = static_cast<std::int64_t>(k);
  std::size_t k = 0;
  ref::for_each_index(src.shape, [&](const ref::Dims& idx) {
    ref::Dims dst = idx;
    dst[d] = index[static_cast<std::size_t>(idx[d])];
    if (last_writer[static_cast<std::size_t>(dst[d])] == idx[d])
      out.v[static_cast<std::size_t>(ref::linear(dst, st))] = src.v[k];
    ++k;
  });
  return out;
}

TEST_P(Indexing, IndexCopy) {
  const Device d = device();
  std::uint64_t seed = 300;
  // 2 three times: the last of them (source row 5) wins.
  const std::vector<std::int64_t> idx_values = {2, 0, 2, 4, 1, 2};
  for (DType dt : {f32, f64, i32, i64, f16})
    for (Layout layout : kLayouts)
      for (int dim : {0, 1, -1}) {
        SCOPED_TRACE(std::string(to_string(dt)) + " " + ref::name(layout) + " dim=" + std::to_string(dim));
        ref::guarded([&] {
          const int wd = dim < 0 ? dim + 3 : dim;
          ref::Dims xs{5, 6, 7}, ss = xs;
          ss[static_cast<std::size_t>(wd)] = 6;
          const auto x = ref::make_input(xs, layout, dt, d, Domain{-9, 9, true}, seed++);
          const auto src = ref::make_input(ss, layout, dt, d, Domain{-9, 9, true}, seed++);
          const ref::Array want = index_copy_ref(x.r, wd, idx_values, src.r);
          for (DType it : {i64, i32}) {
            const Tensor idx = ref::to_tensor(ref::Array({6}, {2, 0, 2, 4, 1, 2}), it, d);
            const Tensor out = index_copy(x.t, dim, idx, src.t);
            EXPECT_EQ(out.dtype(), dt);
            EXPECT_EQ(out.device(), d);
            EXPECT_FALSE(out.shares_storage(x.t));
            EXPECT_TRUE(ref::exact(out, want));
          }
          // In place, into a non-contiguous view of a copy; x is untouched.
          Tensor y = x.t.clone();
          Tensor yt = y.transpose(0, 2);
          yt.index_copy_(2 - wd, ref::to_tensor(ref::Array({6}, {2, 0, 2, 4, 1, 2}), i64, d), src.t.transpose(0, 2));
          EXPECT_TRUE(ref::exact(y, want));
          EXPECT_TRUE(ref::exact(x.t, x.r));
          ref::Dims es = xs;
          es[static_cast<std::size_t>(wd)] = 0;
          EXPECT_TRUE(ref::exact(index_copy(x.t, dim, zeros({0}, d, i64), zeros(Shape(es), d, dt)), x.r));
        });
      }
}

TEST_P(Indexing, IndexCopyLastWriteWins) {
  // Values that differ at every repeat: the last one, on every device and
  // every run; NaN and infinities land as they are (a copy, not x + (v - x)).
  const Device d = device();
  const std::int64_t n = 3000;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = (i * 7) % 3;
  manual_seed(6);
  const Tensor src = randn({n, 4}, d);
  const Tensor got = index_copy(full({3, 4}, 1e30, d), 0, tensor(idx, d), src);
  // The last writers of rows 0, 1, 2: the last i with i * 7 % 3 == row.
  const Tensor want = index_select(src, 0, tensor(std::vector<std::int64_t>{2997, 2998, 2999}, d));
  EXPECT_TRUE(equal(got.cpu(), want.cpu()));
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor special = tensor(std::vector<float>{inf, 5.0f, -0.0f}, d);
  const std::vector<float> y =
      index_copy(full({2}, 1e30, d), 0, tensor(std::vector<std::int64_t>{1, 0, 0}, d), special).to_vector<float>();
  EXPECT_TRUE(y[0] == 0.0f && std::signbit(y[0])) << y[0];
  EXPECT_EQ(y[1], inf);
}

TEST_P(Indexing, IndexCopyErrors) {
  const Device d = device();
  const Tensor x = ones({4, 3}, d);
  const Tensor i2 = tensor(std::vector<std::int64_t>{0, 3}, d);
  EXPECT_THROW(index_copy(x, 0, tensor(std::vector<std::int64_t>{0, 4}, d), ones({2, 3}, d)).to_vector<float>(),
               IndexError);
  EXPECT_THROW(index_copy(x, 0, ones({2}, d), ones({2, 3}, d)), DTypeError);  // float index
  EXPECT_THROW(index_copy(x, 0, i2, ones({2, 3}, d, f64)), DTypeError);       // source dtype
  try {
    (void)index_copy(x, 0, i2, ones({3, 3}, d));
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("index_copy"), std::string::npos) << m;
    EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  }
  try {
    (void)index_copy(x, 1, tensor(std::vector<std::int64_t>{7}, d), ones({4, 1}, d)).to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("index_copy"), std::string::npos) << e.what();
  }
  if (d != cpu()) {
    EXPECT_THROW(index_copy(x, 0, i2, ones({2, 3}, cpu())), DeviceMismatch);
  }
}

TEST_P(Indexing, Flip) {
  const Device d = device();
  const auto x = ref::make_input({3, 4, 5}, Layout::Transposed, f32, d, Domain{-9, 9, true}, 400);
  // numpy.flip of the reference, one dim at a time.
  const auto flip_ref = [](const ref::Array& a, int dim) {
    std::vector<std::int64_t> rev;
    for (std::int64_t i = a.shape[static_cast<std::size_t>(dim)] - 1; i >= 0; --i) rev.push_back(i);
    return ref::index_select(a, dim, rev);
  };
  EXPECT_TRUE(ref::exact(flip(x.t, Dims(1)), flip_ref(x.r, 1)));
  EXPECT_TRUE(ref::exact(x.t.flip(Dims({0, -1})), flip_ref(flip_ref(x.r, 0), 2)));
  EXPECT_TRUE(ref::exact(flip(x.t, Dims()), flip_ref(flip_ref(flip_ref(x.r, 0), 1), 2)));
  EXPECT_FALSE(flip(x.t, Dims(1)).shares_storage(x.t));
  EXPECT_EQ(flip(zeros({0, 2}, d), Dims(0)).shape(), (Shape{0, 2}));
  EXPECT_THROW(flip(x.t, Dims({1, 1})), ValueError);
  EXPECT_THROW(flip(x.t, Dims(3)), Error);
}

ANVIL_INSTANTIATE_DEVICE_TEST(Indexing);

}  // namespace
