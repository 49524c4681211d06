// The OpenCL backend (DESIGN §2): the shared device backend
// (backends/common/device_backend.h) over the OpenCL runtime of runtime.h,
// on any OpenCL 1.2 device. See Note [Asynchronous OpenCL execution].
#include "backends/opencl/launch.h"
#include "backends/opencl/runtime.h"

namespace anvil {
template class device_common::DeviceBackend<opencl::Runtime>;
}  // namespace anvil

namespace anvil::detail {
// Returned by the module's entry point (module.cpp), which the registry calls.
Backend* make_opencl_backend() { return &opencl::backend(); }
}  // namespace anvil::detail
