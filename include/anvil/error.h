// anvil/error.h — the error types every op throws.
//
//   try { auto z = x + y; }
//   catch (const anvil::DeviceMismatch& e) { std::cerr << e.what() << "\n"; }
//
// Messages read `<op>: <what is wrong>; expected <x>, got <y>[; <how to fix>]`.
// The library never aborts: every failure is one of these, and the library
// stays usable after it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace anvil {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

#define ANVIL_DEFINE_ERROR(Name) \
  class Name : public Error {    \
   public:                       \
    using Error::Error;          \
  };
ANVIL_DEFINE_ERROR(ShapeError)      // shapes that do not fit the op
ANVIL_DEFINE_ERROR(DTypeError)      // a dtype the op does not take
ANVIL_DEFINE_ERROR(DeviceMismatch)  // operands on different devices
ANVIL_DEFINE_ERROR(DeviceError)     // a device that does not exist or is malformed
ANVIL_DEFINE_ERROR(IndexError)      // an index or dim out of range
ANVIL_DEFINE_ERROR(ValueError)      // a bad argument value (negative step, …)
ANVIL_DEFINE_ERROR(NotSupported)    // an (op, dtype, device) triple a backend lacks
ANVIL_DEFINE_ERROR(NotCompiled)     // a backend that was not built in
ANVIL_DEFINE_ERROR(OutOfMemory)     // allocation failed after emptying the cache
ANVIL_DEFINE_ERROR(BackendError)    // a native runtime call failed
ANVIL_DEFINE_ERROR(IOError)         // reading or writing a file failed
ANVIL_DEFINE_ERROR(CompileError)    // a device kernel failed to compile
#undef ANVIL_DEFINE_ERROR

namespace detail {
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void assert_fail(const char* cond, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace anvil

// Bad user input: throws ErrorType with the message pieces concatenated.
#define ANVIL_CHECK(cond, ErrorType, ...)                 \
  do {                                                    \
    if (!(cond)) [[unlikely]]                             \
      throw ErrorType(::anvil::detail::cat(__VA_ARGS__)); \
  } while (0)

// Our own invariants: a failure is a bug in anvil, reported as anvil::Error.
#define ANVIL_ASSERT(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond)) [[unlikely]]                                                                     \
      ::anvil::detail::assert_fail(#cond, __FILE__, __LINE__, ::anvil::detail::cat(__VA_ARGS__)); \
  } while (0)
