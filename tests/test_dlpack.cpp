// DLPack in the C++ API (anvil/dlpack.h): a tensor out and back without a
// copy on the devices DLPack can share (cpu, cuda), typed errors elsewhere,
// and each deleter called exactly once.
#include <gtest/gtest.h>

#include <vector>

#include "anvil/dlpack.h"
#include "device_test.h"

namespace {

using namespace anvil;

bool shares_through_dlpack(Device d) { return d.is_cpu() || d.type() == DeviceType::CUDA; }

class DLPack : public anvil::testing::DeviceTest {};

TEST_P(DLPack, RoundTripSharesMemory) {
  const Device d = device();
  const Tensor x = arange(0, 12, 1, d, f32).reshape({3, 4});
  if (!shares_through_dlpack(d)) {
    EXPECT_THROW(to_dlpack(x), NotSupported);
    return;
  }
  // A view with an offset and strides: the second and third columns of rows 1-2, transposed.
  const Tensor v = x.narrow(0, 1, 2).narrow(1, 1, 2).t();
  DLManagedTensor* m = to_dlpack(v);
  const DLTensor& dl = m->dl_tensor;
  EXPECT_EQ(dl.device.device_type, d.is_cpu() ? kDLCPU : kDLCUDA);
  EXPECT_EQ(dl.device.device_id, d.index());
  EXPECT_EQ(dl.ndim, 2);
  EXPECT_EQ(std::vector<std::int64_t>(dl.shape, dl.shape + 2), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(std::vector<std::int64_t>(dl.strides, dl.strides + 2), (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(dl.dtype.code, kDLFloat);
  EXPECT_EQ(dl.dtype.bits, 32);
  EXPECT_EQ(dl.dtype.lanes, 1);
  const Tensor y = from_dlpack(m);  // y owns m now
  EXPECT_EQ(y.device(), d);
  EXPECT_EQ(y.shape(), Shape({2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 9, 6, 10}));
  Tensor(x).fill_(7.0);  // the same memory
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{7, 7, 7, 7}));
}

TEST_P(DLPack, EveryDTypeRoundTrips) {
  const Device d = device();
  if (!shares_through_dlpack(d))
    GTEST_SKIP() << d << " shares no memory through DLPack (RoundTripSharesMemory checks the error)";
  for (DType t : {f32, f64, f16, bf16, i32, i64, u8, boolean}) {
    Tensor x = arange(0, 5, 1, d).to(t);
    const Tensor y = from_dlpack(to_dlpack(x));
    EXPECT_EQ(y.dtype(), t) << t;
    EXPECT_EQ(y.to_vector<double>(), x.to_vector<double>()) << t;
    x.fill_(1);  // the same memory
    EXPECT_EQ(y.to_vector<double>(), std::vector<double>(5, 1.0)) << t;
  }
}

ANVIL_INSTANTIATE_DEVICE_TEST(DLPack);

// A producer's buffer whose deleter counts its calls.
struct Producer {
  std::vector<float> data{1, 2, 3, 4, 5, 6};
  std::vector<std::int64_t> shape{2, 3};
  std::vector<std::int64_t> strides{3, 1};
  int deleted = 0;
  DLManagedTensor managed{};

  Producer() {
    DLTensor& dl = managed.dl_tensor;
    dl.data = data.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = 2;
    dl.dtype = {kDLFloat, 32, 1};
    dl.shape = shape.data();
    dl.strides = strides.data();
    dl.byte_offset = 0;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { ++static_cast<Producer*>(self->manager_ctx)->deleted; };
  }
};

TEST(DLPackOwnership, DeleterRunsOnceWhenTheLastViewDies) {
  Producer p;
  Tensor y = from_dlpack(&p.managed);
  Tensor view = y.t();
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  p.data[0] = 9;  // no copy was made
  EXPECT_EQ(y.to_vector<float>()[0], 9.0f);
  y = Tensor();
  EXPECT_EQ(p.deleted, 0);  // the transposed view still holds the memory
  view = Tensor();
  EXPECT_EQ(p.deleted, 1);
}

TEST(DLPackOwnership, ByteOffsetAndNullStrides) {
  Producer p;
  p.managed.dl_tensor.strides = nullptr;  // compact row-major
  p.managed.dl_tensor.byte_offset = 3 * sizeof(float);
  p.shape = {3};
  p.managed.dl_tensor.ndim = 1;
  {
    const Tensor y = from_dlpack(&p.managed);
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4, 5, 6}));
  }
  EXPECT_EQ(p.deleted, 1);
}

TEST(DLPackOwnership, ExportKeepsTheStorageUntilTheDeleter) {
  Tensor x = full({4}, 2.5, cpu());
  DLManagedTensor* m = to_dlpack(x);
  std::weak_ptr<detail::TensorImpl> impl = x.impl();
  x = Tensor();
  const float* data = static_cast<const float*>(m->dl_tensor.data);
  EXPECT_EQ(data[3], 2.5f);  // still alive: the managed tensor holds it
  EXPECT_FALSE(impl.expired());
  m->deleter(m);
  EXPECT_TRUE(impl.expired());
}

TEST(DLPackErrors, TypedAndNothingTaken) {
  {
    Producer p;
    p.managed.dl_tensor.device = {kDLOpenCL, 0};
    EXPECT_THROW(from_dlpack(&p.managed), NotSupported);
    EXPECT_EQ(p.deleted, 0);
  }
  {
    Producer p;
    p.managed.dl_tensor.dtype = {kDLComplex, 64, 1};
    try {
      from_dlpack(&p.managed);
      ADD_FAILURE() << "complex64 became a tensor";
    } catch (const DTypeError& e) {
      EXPECT_NE(std::string(e.what()).find("from_dlpack"), std::string::npos) << e.what();
    }
    EXPECT_EQ(p.deleted, 0);
  }
  {
    Producer p;
    p.managed.dl_tensor.dtype = {kDLFloat, 32, 4};  // a vector type
    EXPECT_THROW(from_dlpack(&p.managed), DTypeError);
    EXPECT_EQ(p.deleted, 0);
  }
  {
    Producer p;
    p.strides = {-3, 1};
    EXPECT_THROW(from_dlpack(&p.managed), NotSupported);
    EXPECT_EQ(p.deleted, 0);
  }
  EXPECT_THROW(from_dlpack(nullptr), ValueError);
  EXPECT_THROW(to_dlpack(Tensor()), ValueError);
}

}  // namespace
