// Compiling the shared kernels of src/kernels for CUDA with NVRTC, at run
// time, with the CUDA prelude (src/kernels/prelude_cuda.h). Needs no GPU and
// no driver: the kernel parity test (tests/test_cuda_kernels.cpp) compiles
// every kernel this way on machines without either.
#pragma once

#include <string>
#include <vector>

#include "backends/common/kernel_specs.h"

namespace anvil::cuda {

struct CompiledProgram {
  std::string image;  // CUBIN, or PTX text (with a terminating NUL) for the driver to JIT
  bool is_cubin = false;
  std::string target;  // "sm_80" or "compute_90"
  std::string log;     // NVRTC's warnings, if any
  bool from_cache = false;
};

// Compiles the program of `spec` (its file and defines) for a device of
// compute capability `major`.`minor`: CUBIN for sm_<major><minor> when this
// NVRTC knows it, otherwise PTX for the newest architecture it knows that is
// not newer than the device (the driver JITs it). `ptx` forces PTX.
// Throws CompileError with NVRTC's log.
CompiledProgram compile_program(const device_common::KernelSpec& spec, int major, int minor, bool ptx = false);

// compile_program through a disk cache, so a process's first use of a
// kernel costs a file read rather than a compile: one file per (source,
// defines, target, NVRTC version) in $ANVIL_CACHE_DIR/cuda (default
// ${XDG_CACHE_HOME:-~/.cache}/anvil/cuda), written atomically. ANVIL_CUDA_CACHE=0
// turns it off; a cache that cannot be read or written is skipped silently.
CompiledProgram compile_program_cached(const device_common::KernelSpec& spec, int major, int minor);

// The architectures this NVRTC can target ("75", "80", …), and its version.
std::vector<int> nvrtc_architectures();
std::string nvrtc_version();

// The kernels a PTX image defines (".entry <name>(<params>)"), with the
// size in bytes of each parameter.
struct PtxEntry {
  std::string name;
  std::vector<std::size_t> param_bytes;
};
std::vector<PtxEntry> ptx_entries(const std::string& ptx);

}  // namespace anvil::cuda
