// f32 and bf16 GEMM through oneDNN (Note [GEMM through oneDNN] in
// cpu_gemm_dnnl.cpp).
#pragma once

#include "core/backend.h"
#include "core/caching_allocator.h"

namespace anvil::cpu_backend {

// Computes `g` with oneDNN and returns true, or returns false, doing
// nothing, where that path does not apply: f32 on a CPU without AVX-512
// (except a batch of products each too small to thread), bf16 on one without
// bf16 instructions, another dtype, an empty product, or a layout oneDNN has
// no implementation for. Its scratchpad comes from `allocator`.
bool dnnl_gemm(const detail::GemmArgs& g, detail::CachingAllocator& allocator);

}  // namespace anvil::cpu_backend
