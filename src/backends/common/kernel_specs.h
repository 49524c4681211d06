// Which kernel of src/kernels a primitive runs, for every device backend
// (DESIGN §2 "Kernels written once"): the OpenCL and CUDA backends both ask
// these requests for a kernel, so they compile the same program (same file,
// same defines) and look up the same symbol. Only the prelude differs.
//
// Note [Kernel cache keys]
// A launch finds its compiled kernel by a 64-bit key packed from small
// integers (family, op, variant, dtypes), so the hot path builds no strings.
// Only a miss calls spec(), which builds the program's defines and the
// kernel's name. Programs are shared by every kernel built from one
// (file, defines).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "anvil/dtype.h"
#include "core/backend.h"

namespace anvil::device_common {

struct KernelSpec {
  std::string file;                  // "binary.kern"
  std::vector<std::string> defines;  // "TA=anvil_f32", … (no spaces inside)
  std::string name;                  // "add_f32_c"
};
// "-DTA=anvil_f32 -DTB=…": the defines as compiler options.
std::string define_options(const KernelSpec& spec);

enum class Family : std::uint8_t {
  Fill,
  Copy,
  Unary,
  Binary,
  Where,
  Reduce,
  Index,
  Gemm,
  Random,
  Window,
  Rows,
  Optim,
  Norm,
  Interp,
  Softmax,
  LayerNorm
};
constexpr std::uint64_t kernel_key(Family f, int op, int variant, int d0 = 15, int d1 = 15, int d2 = 15,
                                   int d3 = 15) noexcept {
  return (std::uint64_t(f) << 56) | (std::uint64_t(op & 0xff) << 48) | (std::uint64_t(variant & 0xff) << 40) |
         (std::uint64_t(d0 & 0xf) << 12) | (std::uint64_t(d1 & 0xf) << 8) | (std::uint64_t(d2 & 0xf) << 4) |
         std::uint64_t(d3 & 0xf);
}

const char* dtype_name(DType t) noexcept;   // "f32": kernel symbols use it
const char* kernel_type(DType t) noexcept;  // "anvil_f32": the preludes define it
DType widen_half(DType t) noexcept;         // f16 and bf16 compute as f32, the rest as themselves

// A C++ scalar converted to a kernel's argument type.
struct ScalarArg {
  alignas(8) unsigned char bytes[8] = {};
  std::size_t size = 0;
};
ScalarArg scalar_arg(const Scalar& s, DType t) noexcept;
ScalarArg scalar_arg(double v, DType t) noexcept;  // saturating for integer types

// ---- the requests: key() on every launch, spec() on a miss ------------------------

struct FillKernel {
  bool arange;  // <t>_arange, otherwise <t>_fill
  DType t;
  bool fp64;  // arange computes in double where the device has it
  std::uint64_t key() const noexcept { return kernel_key(Family::Fill, arange, 0, static_cast<int>(t), fp64); }
  KernelSpec spec() const;
};

// Note [Elements per work-item]: each work-item of a dense elementwise kernel
// does this many elements (or vectors), one work-group's width apart, so
// loads stay coalesced and more bytes are in flight per thread: one per
// thread left `c = a + b` on 16M f32 at 75% of an H100's bandwidth. 4 unless
// ANVIL_EW_PER_THREAD (1 to 16) says otherwise, read once; the kernels get it
// as EW_PER_THREAD.
int dense_elements_per_thread() noexcept;

// Note [Vector loads]
// The dense kernels of unary, binary, copy (casts) and where each have a
// vector form (_cv): a work-item loads and stores 16 bytes of the widest
// operand at a time (4 f32, 8 f16, 16 bool; the narrower operands as many
// elements in a smaller chunk), EW_PER_THREAD vectors a group's width apart,
// then the n % EW_VEC tail one element per work-item. Scalar loads, 64-bit
// indices and one unary element per thread held `c = a + b` at 69% of an
// H200's bandwidth. The host takes it when every tensor operand starts on a
// whole vector (dense_vector_aligned), else the element kernel (_c); both
// compute each element by the same expression, so the results are the same
// bits. Indices are 32-bit: the host launches at most 2^30 elements at once.
int dense_vector_width(std::initializer_list<DType> types) noexcept;  // elements per vector: 16 bytes of the widest
std::int64_t dense_launch_limit() noexcept;  // 2^30, or ANVIL_EW_LAUNCH_LIMIT for tests (a multiple of 16)

struct CopyKernel {
  DType ti, to;
  bool strided;         // _s (layout block), otherwise _c
  bool vector = false;  // _cv (Note [Vector loads])
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Copy, 0, strided | vector << 1, static_cast<int>(ti), static_cast<int>(to));
  }
  KernelSpec spec() const;
};

struct UnaryKernel {
  detail::UnaryOp op;
  DType ti, to;
  bool strided;
  bool vector = false;                  // _cv (Note [Vector loads])
  DType compute_type() const noexcept;  // float ops on integers compute in f32
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Unary, static_cast<int>(op), strided | vector << 1, static_cast<int>(ti),
                      static_cast<int>(to));
  }
  KernelSpec spec() const;
};

// _c both inputs dense tensors, _cs b a scalar, _sc a a scalar, _s strided;
// _cv, _csv, _scv the dense ones' vector kernels.
enum class BinaryVariant : std::uint8_t { Dense, DenseScalarB, DenseScalarA, Strided };
// With a prologue, each input first goes through its unary op (Note [Unary
// into binary], core/backend.h), in bits 16..31 of the key.
struct BinaryKernel {
  detail::BinaryOp op;
  DType ta, tb, to;
  BinaryVariant variant;
  detail::BinaryPrologue prologue = {};
  bool vector = false;  // Note [Vector loads]; dense variants only
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Binary, static_cast<int>(op), static_cast<int>(variant) | vector << 2,
                      static_cast<int>(ta), static_cast<int>(tb), static_cast<int>(to)) |
           (std::uint64_t(prologue.pre[0]) << 16) | (std::uint64_t(prologue.pre[1]) << 24);
  }
  KernelSpec spec() const;
};

struct WhereKernel {
  DType ta, tb, to;
  bool strided = true;  // _s, otherwise _c
  bool vector = false;  // _cv (Note [Vector loads])
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Where, 0, strided | vector << 1, static_cast<int>(ta), static_cast<int>(tb),
                      static_cast<int>(to));
  }
  KernelSpec spec() const;
};

// _wi one work-item per output, _wg a group per (part, output), _fin the
// second pass over parts (see reduce.kern).
enum class ReduceVariant : std::uint8_t { PerItem, PerGroup, Finish };
struct ReduceKernel {
  detail::ReduceOp op;
  DType ti, to;
  bool fp64;
  // f32 sums accumulate in f64 (where the device has it): on CPU-type
  // devices, whose few work-items each add up millions of terms. GPUs add
  // few terms per thread and run f64 at 1/32..1/64 speed, so they do not.
  bool wide_f32_sums;
  ReduceVariant variant;
  DType accumulator() const noexcept;
  DType scale_type() const noexcept { return fp64 ? DType::F64 : DType::F32; }
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Reduce, static_cast<int>(op), static_cast<int>(variant), static_cast<int>(ti),
                      static_cast<int>(to), fp64, wide_f32_sums);
  }
  KernelSpec spec() const;
};

// _gather reads src along the index (index_select, gather); _add adds into
// out along it (index_add, scatter_add); _copy copies into out (index_copy).
enum class IndexVariant : std::uint8_t { Gather, Add, Copy };
struct IndexKernel {
  DType t, tindex;
  IndexVariant variant = IndexVariant::Gather;
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Index, 0, static_cast<int>(variant), static_cast<int>(t), static_cast<int>(tindex));
  }
  KernelSpec spec() const;
};

struct GemmKernel {
  DType t;
  // Integers accumulate in their own type (wrapping like the CPU); bool and
  // u8 in i64 so a product of 0/1 bytes cannot wrap before the cast.
  // f16 and bf16 in f32.
  DType accumulator() const noexcept { return t == DType::Bool || t == DType::U8 ? DType::I64 : widen_half(t); }
  std::uint64_t key() const noexcept { return kernel_key(Family::Gemm, 0, 0, static_cast<int>(t)); }
  KernelSpec spec() const;
};

struct RandomKernel {
  detail::RandomKind kind;
  DType t;
  // Without fp64 the distributions compute in float (Note [Random numbers
  // without fp64], philox.h), and so do the kernel's real arguments.
  bool fp64;
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Random, static_cast<int>(kind), 0, static_cast<int>(t), fp64);
  }
  KernelSpec spec() const;
};

struct WindowKernel {
  detail::FusedOp op;
  DType t;  // f32, f64, f16 or bf16
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Window, static_cast<int>(op), 0, static_cast<int>(t));
  }
  KernelSpec spec() const;
};

// The fused SGD and Adam steps (optim.kern), of one tensor or of many
// (<prefix>_<kind>_multi, Note [Multi-tensor optimiser steps]).
struct OptimKernel {
  detail::OptimizerKind kind;
  DType t;  // f32 or f64
  bool multi;
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Optim, static_cast<int>(kind), multi, static_cast<int>(t));
  }
  KernelSpec spec() const;
};

// Fused batch norm, forward and backward (norm.kern): a work-group per channel.
struct NormKernel {
  bool backward;  // <prefix>_backward, otherwise _forward
  DType t;        // x's: f32, f64, f16 or bf16 (whose per-channel operands are f32)
  // f32 sums accumulate in f64: asked on CPU-type devices with fp64, whose
  // few work-items each add up a large share of a channel (as
  // ReduceKernel's wide_f32_sums).
  bool wide_f32_sums;
  bool partial = false;  // the chunks' sums (<...>_partial) before the split pass
  DType params() const noexcept { return is_half(t) ? DType::F32 : t; }
  DType accumulator() const noexcept { return params() == DType::F32 && wide_f32_sums ? DType::F64 : params(); }
  std::uint64_t key() const noexcept {
    return kernel_key(Family::Norm, backward, partial, static_cast<int>(t), static_cast<int>(accumulator()));
  }
  KernelSpec spec() const;
};

// interpolate and its adjoint (interpolate.kern).
struct InterpKernel {
  bool backward;  // <prefix>_backward, otherwise _forward
  DType t;        // f32, f64, f16 or bf16
  // The taps' and the sums' type.
  DType compute_type() const noexcept { return widen_half(t); }
  std::uint64_t key() const noexcept { return kernel_key(Family::Interp, backward, 0, static_cast<int>(t)); }
  KernelSpec spec() const;
};

// softmax and log_softmax over contiguous rows, and their gradient (softmax.kern).
struct SoftmaxKernel {
  bool backward;  // <prefix>_backward, otherwise _forward
  DType t;        // f32, f64, f16 or bf16
  std::uint64_t key() const noexcept { return kernel_key(Family::Softmax, backward, 0, static_cast<int>(t)); }
  KernelSpec spec() const;
};

// layer_norm over contiguous rows and its gradients (layer_norm.kern).
struct LayerNormKernel {
  enum class Entry : std::uint8_t { Forward, Backward, ParamsPartial, Params, Count };
  Entry entry;
  DType t;  // f32 or f64
  std::uint64_t key() const noexcept {
    return kernel_key(Family::LayerNorm, static_cast<int>(entry), 0, static_cast<int>(t));
  }
  KernelSpec spec() const;
};

// cumsum and argsort over contiguous rows (rows.kern).
struct RowKernel {
  bool sort;  // <t>_argsort, otherwise <t>_cumsum
  DType t;
  bool fp64;  // f32 sums accumulate in f64 where the device has it (as the CPU's do)
  DType accumulator() const noexcept { return t == DType::F32 && fp64 ? DType::F64 : t; }
  std::uint64_t key() const noexcept { return kernel_key(Family::Rows, sort, 0, static_cast<int>(t), fp64); }
  KernelSpec spec() const;
};

// Every kernel either device backend can ask for, for each dtype the
// frontend can send (one entry per kernel; a program holds several). The
// CUDA parity test compiles them all.
std::vector<KernelSpec> all_kernel_specs(bool fp64);

}  // namespace anvil::device_common
