#include "backends/common/kernel_sources.h"

#include <set>
#include <sstream>

#include "anvil/error.h"
#include "backends/common/layouts.h"

namespace anvil::device_common {

namespace {
void append_resolved(const std::string& name, std::set<std::string>& seen, std::string& out) {
  if (!seen.insert(name).second) return;
  const char* text = embedded_source(name);
  ANVIL_ASSERT(text != nullptr, "kernel source ", name, " is not embedded; add it to src/kernels");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::string directive = "#include \"";
    if (line.rfind(directive, 0) == 0) {
      const std::size_t end = line.find('"', directive.size());
      append_resolved(line.substr(directive.size(), end - directive.size()), seen, out);
      continue;
    }
    out += line;
    out += '\n';
  }
}
}  // namespace

const char* embedded_source(const std::string& name) noexcept {
  for (std::size_t i = 0; i < kNumEmbeddedKernelSources; ++i)
    if (name == kEmbeddedKernelSources[i].name) return kEmbeddedKernelSources[i].text;
  return nullptr;
}

std::string assemble_source(const char* prelude, const std::string& file) {
  std::set<std::string> seen;
  // The kernels' dimension limit is the host's (layout.kern requires it).
  static_assert(kLayoutDims == kMaxDims, "the kernels' argument blocks hold kMaxDims dims");
  std::string out = detail::cat("#define ANVIL_MAX_DIMS ", kLayoutDims, "\n");
  append_resolved(prelude, seen, out);
  append_resolved(file, seen, out);
  return out;
}

}  // namespace anvil::device_common
