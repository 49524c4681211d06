// The kernels of src/kernels built for one device, in two levels: a program
// per (source file, compile options), built once, and a kernel per request,
// found by the request's key (Note [Kernel cache keys], kernel_specs.h).
// The OpenCL and CUDA runtimes differ only in how a program is built and a
// kernel taken from it, which they supply as a Compiler:
//
//   struct Compiler {
//     using Program = ...;  using Kernel = ...;  // handles, released below
//     std::string options(const KernelSpec&);   // the program's build options (its cache key)
//     Program compile(const KernelSpec&, const std::string& options);  // throws CompileError
//     Kernel kernel(Program, const std::string& name);
//     void release_kernel(Kernel) noexcept;  void release_program(Program) noexcept;
//   };
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/common/kernel_specs.h"

namespace anvil::device_common {

template <class Compiler>
class ProgramCache {
 public:
  using Program = typename Compiler::Program;
  using Kernel = typename Compiler::Kernel;

  explicit ProgramCache(Compiler compiler) : compiler_(std::move(compiler)) {}
  ~ProgramCache() {
    for (auto& [key, k] : kernels_) compiler_.release_kernel(k);
    for (auto& [key, p] : programs_) compiler_.release_program(p);
  }
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  // Not thread-safe: the caller holds its device's lock. `request` is one of
  // the kernel requests of kernel_specs.h.
  template <typename Request>
  Kernel kernel(const Request& request) {
    const std::uint64_t key = request.key();
    auto it = kernels_.find(key);
    if (it != kernels_.end()) [[likely]]
      return it->second;
    return build(key, request.spec());
  }

  std::size_t program_count() const noexcept { return programs_.size(); }
  // The symbols of every kernel built so far (for the CUDA parity test).
  const std::vector<std::string>& kernel_names() const noexcept { return names_; }

 private:
  Kernel build(std::uint64_t key, const KernelSpec& spec) {
    const std::string options = compiler_.options(spec);
    const std::string program_key = spec.file + '|' + options;
    auto it = programs_.find(program_key);
    if (it == programs_.end()) it = programs_.emplace(program_key, compiler_.compile(spec, options)).first;
    const Kernel k = compiler_.kernel(it->second, spec.name);
    kernels_.emplace(key, k);
    names_.push_back(spec.name);
    return k;
  }

  Compiler compiler_;
  std::unordered_map<std::string, Program> programs_;
  std::unordered_map<std::uint64_t, Kernel> kernels_;
  std::vector<std::string> names_;
};

}  // namespace anvil::device_common
