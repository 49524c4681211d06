// The backend table (DESIGN §2): one entry per DeviceType, null where a
// backend is not compiled in. Adding a backend is one line here.
#include <array>

#include "anvil/error.h"
#include "core/backend.h"

namespace anvil::detail {

Backend* make_cpu_backend();
#ifdef ANVIL_HAVE_OPENCL
Backend* make_opencl_backend();
#endif
#ifdef ANVIL_HAVE_CUDA
Backend* make_cuda_backend();
#endif

namespace {
std::array<Backend*, kNumDeviceTypes> make_table() noexcept {
  std::array<Backend*, kNumDeviceTypes> t{};
  t[static_cast<int>(DeviceType::CPU)] = make_cpu_backend();
#ifdef ANVIL_HAVE_CUDA
  t[static_cast<int>(DeviceType::CUDA)] = make_cuda_backend();
#endif
#ifdef ANVIL_HAVE_OPENCL
  t[static_cast<int>(DeviceType::OpenCL)] = make_opencl_backend();
#endif
  return t;
}
}  // namespace

Backend* backend_for(DeviceType type) noexcept {
  static const std::array<Backend*, kNumDeviceTypes> table = make_table();
  return table[static_cast<int>(type)];
}

Backend& backend_checked(Device d, const char* op) {
  Backend* b = backend_for(d.type());
  ANVIL_CHECK(b != nullptr, NotCompiled, op, ": ", to_string(d.type()),
              " is not compiled into this build of anvil; expected a device of a built-in backend, got ", d,
              "; use try_gpu() to fall back to the CPU");
  const int n = b->device_count();
  if (d.index() >= n) {
    const std::string why = n == 0 ? b->unavailable_reason() : "";
    throw DeviceError(cat(op, ": device ", d, " does not exist; expected an index below ", n, ", got ", d.index(),
                          why.empty() ? "" : " (" + why + ")", "; use try_gpu() to fall back to the CPU"));
  }
  return *b;
}

}  // namespace anvil::detail
