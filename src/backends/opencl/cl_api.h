// The OpenCL C API as anvil uses it, and ANVIL_CL_CHECK.
//
// We target the OpenCL 1.2 API: it is what every driver (PoCL, NVIDIA, AMD,
// Intel) implements, and what CLBlast needs.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>

#include "backends/common/op_scope.h"

namespace anvil::opencl {

// "CL_OUT_OF_RESOURCES", or "CL_ERROR(-9999)" for a code we do not know.
std::string status_name(cl_int status);

// Throws BackendError: "<op>: <expr> failed with <STATUS> (<code>) on <device> at <file>:<line>".
// `op` is the primitive running on this thread (see OpScope), or "opencl".
[[noreturn]] void throw_cl_error(cl_int status, const char* expr, const char* file, int line,
                                 const std::string& device);

// The primitive the current thread is running, for error messages.
using device_common::OpScope;
inline const char* current_op() noexcept { return device_common::current_op_or("opencl"); }

}  // namespace anvil::opencl

// Every native call goes through this (STYLE "Errors"). `device` is what the
// message names ("opencl:0"); calls returning an object report through their
// errcode argument: ANVIL_CL_CHECK(dev, (buf = clCreateBuffer(..., &err), err)).
#define ANVIL_CL_CHECK(device, expr)                                                          \
  do {                                                                                        \
    const cl_int anvil_cl_status_ = (expr);                                                   \
    if (anvil_cl_status_ != CL_SUCCESS) [[unlikely]]                                          \
      ::anvil::opencl::throw_cl_error(anvil_cl_status_, #expr, __FILE__, __LINE__, (device)); \
  } while (0)
