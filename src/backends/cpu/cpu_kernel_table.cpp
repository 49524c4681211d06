// This build's kernels as one table (Note [One kernel source, a build per
// instruction set] in isa.h), compiled with each build's flags.
#include "backends/cpu/isa.h"

#define ANVIL_CPU_STRING2(x) #x
#define ANVIL_CPU_STRING(x) ANVIL_CPU_STRING2(x)

namespace anvil::cpu_backend {
inline namespace ANVIL_CPU_ISA {

namespace {
// The build's name is its namespace's without "isa_": "avx2".
constexpr const char* kNamespace = ANVIL_CPU_STRING(ANVIL_CPU_ISA);
static_assert(kNamespace[0] == 'i' && kNamespace[3] == '_', "ANVIL_CPU_ISA is isa_<name>");

#ifdef __FMA__
constexpr bool kFma = true;
#else
constexpr bool kFma = false;
#endif

constexpr KernelTable kTable{.name = kNamespace + 4,
                             .fma = kFma,
                             .copy = copy,
                             .unary = unary,
                             .binary = binary,
                             .where = where,
                             .unary_binary = unary_binary,
                             .reduce = reduce,
                             .im2col = im2col,
                             .col2im = col2im,
                             .max_pool2d = max_pool2d,
                             .max_pool2d_backward = max_pool2d_backward,
                             .batch_norm = batch_norm,
                             .batch_norm_backward = batch_norm_backward,
                             .softmax = softmax,
                             .softmax_backward = softmax_backward,
                             .layer_norm = layer_norm,
                             .layer_norm_backward = layer_norm_backward,
                             .optimizer_step = optimizer_step,
                             .optimizer_step_list = optimizer_step_list};
}  // namespace

const KernelTable& kernel_table() noexcept { return kTable; }

}  // namespace ANVIL_CPU_ISA
}  // namespace anvil::cpu_backend

#undef ANVIL_CPU_STRING
#undef ANVIL_CPU_STRING2
