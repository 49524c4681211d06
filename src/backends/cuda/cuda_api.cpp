#include "backends/cuda/cuda_api.h"

#include "anvil/error.h"

namespace anvil::cuda {

std::string error_text(cudaError_t e) {
  return detail::cat(cudaGetErrorName(e), " (", static_cast<int>(e), "): ", cudaGetErrorString(e));
}

void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line, const std::string& device) {
  cudaGetLastError();  // clear a non-sticky error so the library stays usable
  throw BackendError(
      detail::cat(current_op(), ": ", expr, " failed with ", error_text(e), " on ", device, " at ", file, ":", line));
}

}  // namespace anvil::cuda
