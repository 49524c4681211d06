// The module's entry point: the registry (core/registry.cpp) dlopens
// libanvil_backend_opencl.so and calls this. See Note [Backend modules].
#include "backends/common/module_entry.h"

ANVIL_BACKEND_MODULE_ENTRY(opencl)
