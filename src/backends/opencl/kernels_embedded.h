// The texts of src/kernels/*.kern, *.h, embedded at build time by
// embed_kernels.cmake into kernels_embedded.cpp (in the build tree).
#pragma once

#include <cstddef>

namespace anvil::opencl {

struct EmbeddedSource {
  const char* name;  // file name in src/kernels, e.g. "binary.kern"
  const char* text;
};
extern const EmbeddedSource kEmbeddedKernelSources[];
extern const std::size_t kNumEmbeddedKernelSources;

}  // namespace anvil::opencl
