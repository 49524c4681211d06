// anvil/dlpack.h: a tensor's memory out through DLPack, and a producer's in.
#include "anvil/dlpack.h"

#include <memory>
#include <optional>
#include <vector>

#include "anvil/device.h"
#include "anvil/error.h"
#include "core/tensor_impl.h"

namespace anvil {
namespace {

DLDataType dlpack_dtype(DType t) {
  auto make = [](DLDataTypeCode code, int bits) {
    return DLDataType{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits), 1};
  };
  switch (t) {
    case DType::Bool:
      return make(kDLBool, 8);
    case DType::U8:
      return make(kDLUInt, 8);
    case DType::I32:
      return make(kDLInt, 32);
    case DType::I64:
      return make(kDLInt, 64);
    case DType::F32:
      return make(kDLFloat, 32);
    case DType::F64:
      return make(kDLFloat, 64);
    case DType::F16:
      return make(kDLFloat, 16);
    case DType::BF16:
      return make(kDLBfloat, 16);
  }
  ANVIL_ASSERT(false, "to_dlpack: a dtype without a DLPack type");
}

std::optional<DType> anvil_dtype(DLDataType d) {
  switch (d.code) {
    case kDLBool:
      if (d.bits == 8) return DType::Bool;
      break;
    case kDLUInt:
      if (d.bits == 8) return DType::U8;
      break;
    case kDLInt:
      if (d.bits == 32) return DType::I32;
      if (d.bits == 64) return DType::I64;
      break;
    case kDLFloat:
      if (d.bits == 16) return DType::F16;
      if (d.bits == 32) return DType::F32;
      if (d.bits == 64) return DType::F64;
      break;
    case kDLBfloat:
      if (d.bits == 16) return DType::BF16;
      break;
    default:
      break;
  }
  return std::nullopt;
}

// What an exported DLManagedTensor holds: the tensor (so its storage) and
// the arrays its DLTensor points into.
struct Exported {
  Tensor tensor;
  std::vector<std::int64_t> shape, strides;
  DLManagedTensor managed{};
};

}  // namespace

DLManagedTensor* to_dlpack(const Tensor& t) {
  ANVIL_CHECK(t.defined(), ValueError,
              "to_dlpack: the tensor is undefined; expected a tensor created by a factory or an op, got Tensor()");
  const Device d = t.device();
  DLDevice device{};
  if (d.is_cpu()) {
    device = {kDLCPU, 0};
  } else if (d.type() == DeviceType::CUDA) {
    device = {kDLCUDA, d.index()};
    synchronize(d);  // the consumer reads on a stream of its own: let every queued op finish first
  } else {
    throw NotSupported(detail::cat(
        "to_dlpack: ", d, " memory cannot be shared through DLPack; expected a cpu or cuda tensor, got one on ", d,
        "; copy it with .cpu() first"));
  }
  auto ctx = std::make_unique<Exported>();
  ctx->tensor = t;
  ctx->shape.assign(t.shape().begin(), t.shape().end());
  ctx->strides.assign(t.strides().begin(), t.strides().end());
  const detail::TensorImpl& impl = t.impl_ref();
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = static_cast<char*>(impl.storage()->data()) + static_cast<std::size_t>(t.offset()) * element_size(t.dtype());
  dl.device = device;
  dl.ndim = t.dim();
  dl.dtype = dlpack_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Exported*>(self->manager_ctx); };
  return &ctx.release()->managed;
}

Tensor from_dlpack(DLManagedTensor* managed) {
  ANVIL_CHECK(managed != nullptr, ValueError, "from_dlpack: expected a DLManagedTensor, got a null pointer");
  const DLTensor& dl = managed->dl_tensor;
  Device device;
  if (dl.device.device_type == kDLCPU) {
    device = cpu();
  } else if (dl.device.device_type == kDLCUDA) {
    device = Device(DeviceType::CUDA, dl.device.device_id);
  } else {
    throw NotSupported(detail::cat("from_dlpack: DLPack device type ", static_cast<int>(dl.device.device_type),
                                   " is not one anvil shares memory with; expected kDLCPU (1) or kDLCUDA (2)"));
  }
  const std::optional<DType> dtype = dl.dtype.lanes == 1 ? anvil_dtype(dl.dtype) : std::nullopt;
  if (!dtype)
    throw DTypeError(detail::cat("from_dlpack: DLPack element type (code ", static_cast<int>(dl.dtype.code), ", ",
                                 static_cast<int>(dl.dtype.bits), " bits, ", dl.dtype.lanes,
                                 " lanes) has no anvil dtype; expected bool, u8, i32, i64, f16, bf16, f32 or f64"));
  ANVIL_CHECK(dl.ndim >= 0 && (dl.ndim == 0 || dl.shape != nullptr), ValueError,
              "from_dlpack: expected a shape of ndim >= 0 sizes, got ndim ", dl.ndim);
  const auto n = static_cast<std::size_t>(dl.ndim);
  std::vector<std::int64_t> shape(dl.shape, dl.shape + n);
  const Strides strides = dl.strides != nullptr ? Strides(std::vector<std::int64_t>(dl.strides, dl.strides + n))
                                                : contiguous_strides(Shape(shape));
  // The byte range the view reaches, to size the adopted storage.
  std::int64_t hi = 0, numel = 1;
  for (std::size_t i = 0; i < n; ++i) {
    numel *= shape[i];
    ANVIL_CHECK(strides[static_cast<int>(i)] >= 0 || shape[i] <= 1, NotSupported,
                "from_dlpack: negative strides (a reversed view); expected strides >= 0, got ",
                strides[static_cast<int>(i)], " in dim ", i, "; pass a copy");
    if (shape[i] > 0) hi += strides[static_cast<int>(i)] * (shape[i] - 1);
  }
  const std::size_t elem = element_size(*dtype);
  const std::size_t nbytes = numel == 0 ? 0 : static_cast<std::size_t>(hi + 1) * elem;
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  // From here `managed` is the storage's: its deleter runs when the storage dies.
  auto release = [managed] {
    if (managed->deleter != nullptr) managed->deleter(managed);
  };
  auto storage = std::make_shared<detail::Storage>(device, nbytes, data, release);
  return Tensor(std::make_shared<detail::TensorImpl>(std::move(storage), Shape(shape), strides, 0, *dtype));
}

}  // namespace anvil
