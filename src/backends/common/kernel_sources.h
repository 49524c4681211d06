// The texts of src/kernels (*.kern, *.h), embedded at build time by
// embed_kernels.cmake into kernel_sources_embedded.cpp (in the build tree),
// and how a device backend assembles one compilable source from them.
#pragma once

#include <cstddef>
#include <string>

namespace anvil::device_common {

struct EmbeddedSource {
  const char* name;  // file name in src/kernels, e.g. "binary.kern"
  const char* text;
};
extern const EmbeddedSource kEmbeddedKernelSources[];
extern const std::size_t kNumEmbeddedKernelSources;

// The embedded text of `name`, or null.
const char* embedded_source(const std::string& name) noexcept;

// What a device compiles for `file`: the backend's prelude
// ("prelude_opencl.h", "prelude_cuda.h"), then the file, with every
// `#include "x"` line replaced by the embedded x (once each).
std::string assemble_source(const char* prelude, const std::string& file);

}  // namespace anvil::device_common
