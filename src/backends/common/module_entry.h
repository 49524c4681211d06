// The two entry functions every backend module exports (Note [Backend
// modules], core/backend_module.h), written once: each module's module.cpp
// says ANVIL_BACKEND_MODULE_ENTRY(<name>) and defines
// anvil::detail::make_<name>_backend() elsewhere. Only module.cpp is
// compiled with ANVIL_BACKEND_ABI (cmake/Layout.cmake), so only it
// recompiles when the interface changes.
#pragma once

#include "core/backend_module.h"

#define ANVIL_BACKEND_MODULE_ENTRY(name)                                                                        \
  namespace anvil::detail {                                                                                     \
  Backend* make_##name##_backend();                                                                             \
  }                                                                                                             \
  extern "C" ANVIL_BACKEND_MODULE_EXPORT const char* anvil_backend_##name##_abi() { return ANVIL_BACKEND_ABI; } \
  extern "C" ANVIL_BACKEND_MODULE_EXPORT ::anvil::detail::Backend* anvil_backend_##name##_init() {              \
    return ::anvil::detail::make_##name##_backend();                                                            \
  }
