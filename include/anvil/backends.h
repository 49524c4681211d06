// anvil/backends.h — the switches of the vendor libraries behind the CUDA
// backend, with PyTorch's meaning and defaults (torch.backends.cudnn.*,
// torch.backends.cuda.matmul.allow_tf32, torch.set_float32_matmul_precision;
// the table is in docs/mixed-precision.md).
//
//   std::cout << anvil::backends::cudnn::status() << "\n";  // "cuDNN 9.19.0 (/…/libcudnn.so.9)"
//   anvil::backends::cudnn::set_benchmark(true);            // time the algorithms once per shape
//   anvil::backends::cudnn::set_allow_tf32(false);          // strict f32 convolutions
//   anvil::set_float32_matmul_precision("high");            // TF32 in f32 matmul
//
// Every switch is process-wide, read when an op is enqueued (changing one
// affects the ops enqueued after it), and safe to call from any thread.
// None of them changes anything on the CPU or OpenCL.
#pragma once

#include <string>
#include <string_view>

namespace anvil::backends::cudnn {

// Whether cuDNN 9 loaded beside the CUDA backend (libcudnn.so.9, or the
// file ANVIL_CUDNN_LIBRARY names): torch.backends.cudnn.is_available(). It
// does not say whether it is enabled. False in a build without CUDA.
bool is_available();
// cudnnGetVersion() (91900 for 9.19.0); 0 when cuDNN did not load.
int version();
// One line for people: "cuDNN 9.19.0 (/usr/lib/…/libcudnn.so.9)", or why it
// is not used ("off: ANVIL_CUDNN=0", "libcudnn.so.9 could not be loaded: …",
// "not compiled in: …").
std::string status();

// torch.backends.cudnn.enabled: convolution, batch norm and the recurrent
// layers run through cuDNN where it loaded. Default true; ANVIL_CUDNN=0 at
// start-up makes it false (and never loads the library). False runs the
// generic paths (im2col + cuBLAS, the shared kernels).
void set_enabled(bool on);
bool enabled() noexcept;

// torch.backends.cudnn.allow_tf32: f32 convolutions may use TF32 tensor
// cores (10-bit mantissa inputs, f32 accumulation). Default true, as in
// PyTorch; ANVIL_CUDNN_ALLOW_TF32=0 at start-up makes it false.
void set_allow_tf32(bool on);
bool allow_tf32() noexcept;

// torch.backends.cudnn.benchmark: the first convolution of each geometry
// times every algorithm cuDNN offers and keeps the fastest (cudnnFind*),
// instead of taking cuDNN's heuristic choice. Default false;
// ANVIL_CUDNN_BENCHMARK=1 at start-up makes it true.
void set_benchmark(bool on);
bool benchmark() noexcept;

}  // namespace anvil::backends::cudnn

namespace anvil::backends::cuda::matmul {

// torch.backends.cuda.matmul.allow_tf32: f32 matmul on CUDA may use TF32
// tensor cores. Default false, as in PyTorch since 1.12. The same setting as
// anvil::set_float32_matmul_precision: true is "high", false "highest".
void set_allow_tf32(bool on);
bool allow_tf32() noexcept;

}  // namespace anvil::backends::cuda::matmul

namespace anvil {

// torch.set_float32_matmul_precision: "highest" (default: f32 matmul in
// f32), "high" (TF32 allowed), "medium" (on CUDA the same as "high", as in
// PyTorch, whose cuBLAS path has no bf16 variant). Anything else throws
// ValueError. ANVIL_FLOAT32_MATMUL_PRECISION sets it at start-up.
void set_float32_matmul_precision(std::string_view precision);
std::string float32_matmul_precision();

}  // namespace anvil
