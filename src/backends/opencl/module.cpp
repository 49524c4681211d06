// The module's entry point: the registry (core/registry.cpp) dlopens
// libanvil_backend_opencl.so and calls this. See Note [Backend modules].
#include "core/backend_module.h"

namespace anvil::detail {
Backend* make_opencl_backend();
}  // namespace anvil::detail

extern "C" ANVIL_BACKEND_MODULE_EXPORT const char* anvil_backend_opencl_abi() { return ANVIL_BACKEND_ABI; }

extern "C" ANVIL_BACKEND_MODULE_EXPORT anvil::detail::Backend* anvil_backend_opencl_init() {
  return anvil::detail::make_opencl_backend();
}
