// bf16 GEMM through oneDNN (Note [bf16 GEMM through oneDNN] in
// cpu_gemm_dnnl.cpp).
#pragma once

#include "core/backend.h"

namespace anvil::cpu_backend {

// Computes `g` (a bf16 product) with oneDNN and returns true, or returns
// false, doing nothing, where that path does not apply: another dtype, an
// empty product, a CPU without bf16 instructions, or a layout oneDNN has no
// implementation for.
bool dnnl_bf16_gemm(const detail::GemmArgs& g);

}  // namespace anvil::cpu_backend
