// Note [Backend modules]
// The CUDA and OpenCL backends are shared modules (libanvil_backend_cuda.so,
// libanvil_backend_opencl.so) that the registry loads with dlopen the first
// time a program asks about their device type, as ggml loads its backends.
// libanvil itself links no GPU runtime: it starts on a machine without the
// CUDA toolkit or an OpenCL loader, and a CPU-only program maps none of them
// (cuBLAS alone is some hundreds of megabytes). A module that is absent, or
// whose runtime libraries do not load, is a reason in
// device_unavailable_reason()/try_gpu_reason() (with dlerror's text), never
// a failure to start.

// Where the registry looks for a module, in order:
//   1. the directories of ANVIL_BACKEND_PATH (colon-separated), and only
//      those when it is set;
//   2. the directory libanvil.so was loaded from (the build tree, or the
//      install's lib directory: modules are built and installed beside it);
//   3. the library directory of the configured install prefix;
//   4. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
//
// Each module exports two functions with C linkage: anvil_backend_<name>_abi,
// the fingerprint of this header and core/backend.h it was compiled against
// (ANVIL_BACKEND_ABI, from CMakeLists.txt), and anvil_backend_<name>_init,
// which returns its Backend (owned by the module, alive until exit; modules
// are never unloaded). The registry calls init only when the fingerprint is
// its own: a stale module (built before the interface changed) is a reason,
// not a call through a vtable of another layout.
#pragma once

#include <string>

#include "core/backend.h"

#define ANVIL_BACKEND_MODULE_EXPORT __attribute__((visibility("default")))

namespace anvil::detail {

// The signatures of a module's entry functions.
using BackendModuleInit = Backend* (*)();
using BackendModuleAbi = const char* (*)();

// Whether this build of anvil has a backend for `type` (for CUDA and OpenCL:
// made its module), whether or not it loaded here.
bool backend_built(DeviceType type) noexcept;
// Why backend_for(type) is null ("" when it is not): not compiled in, the
// module not found (with where the registry looked), or dlerror's text.
std::string backend_missing_reason(DeviceType type);

}  // namespace anvil::detail
