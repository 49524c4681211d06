// anvil/dlpack.h — tensors shared with other libraries without a copy,
// through DLPack (https://dmlc.github.io/dlpack/latest/), as
// torch::utils::to_dlpack / from_dlpack do:
//
//   DLManagedTensor* m = anvil::to_dlpack(x);   // x's memory; x's storage lives until m->deleter(m)
//   consumer_adopts(m);                          // the consumer calls m->deleter(m) when done
//
//   anvil::Tensor y = anvil::from_dlpack(m);    // y views m's memory; anvil calls m->deleter(m)
//                                                // once, when y's storage (every view of it) dies
//
// CPU and CUDA memory only (kDLCPU, kDLCUDA): an OpenCL buffer is a handle,
// not an address a consumer could read. Both functions are thread-safe.
#pragma once

#include <cstdint>

#include "anvil/tensor.h"

// The DLPack 1.0 structures as the standard's dlpack/dlpack.h gives them (and
// under its include guard, so either header may come first).
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

extern "C" {

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef enum : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
} DLDataTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: compact row-major
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

}  // extern "C"

#endif  // DLPACK_DLPACK_H_

namespace anvil {

// `t`'s memory as a DLManagedTensor, with t's shape, strides (in elements)
// and dtype; it holds t's storage until the consumer calls its deleter,
// exactly once. A CUDA tensor's queued work is waited for first (the
// consumer reads on a stream of its own). NotSupported for a device DLPack
// cannot share (OpenCL); ValueError for an undefined tensor.
DLManagedTensor* to_dlpack(const Tensor& t);

// A tensor viewing `managed`'s memory, which anvil then owns: it calls
// managed->deleter (when set) exactly once, when the last view of that
// memory dies, from whichever thread drops it. On error nothing is taken:
// the caller still owns `managed`. NotSupported for a device anvil does not
// share memory with, negative strides or lanes != 1; DTypeError for an
// element type anvil lacks; ValueError for a null pointer.
Tensor from_dlpack(DLManagedTensor* managed);

}  // namespace anvil
