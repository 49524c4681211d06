// The elementwise, reduction, index and random primitives: pick a kernel
// from src/kernels by (op, dtypes, variant), fill its argument block, enqueue.
#include <algorithm>
#include <array>
#include <cstring>

#include "anvil/error.h"
#include "backends/opencl/launch.h"
#include "backends/opencl/layouts.h"
#include "backends/opencl/opencl_backend.h"

namespace anvil::opencl {

using detail::BinaryOp;
using detail::ElementwiseArgs;
using detail::KernelOperand;
using detail::ReduceOp;
using detail::UnaryOp;

namespace {

// Kernel symbols derive from these names: <op>_<dtype>[_<variant>] (STYLE).
constexpr std::array<const char*, static_cast<int>(UnaryOp::Count)> kUnaryNames = {
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "sign", "square",
    "reciprocal", "logical_not", "clamp"};
constexpr std::array<const char*, static_cast<int>(BinaryOp::Count)> kBinaryNames = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"};
constexpr std::array<const char*, static_cast<int>(ReduceOp::Count)> kReduceNames = {"sum",    "prod",  "max",
                                                                                      "min",    "argmax", "argmin"};
constexpr std::array<const char*, kNumDTypes> kDTypeNames = {"bool", "u8", "i32", "i64", "f32", "f64"};

const char* dname(DType t) { return kDTypeNames[static_cast<int>(t)]; }

std::string def(const char* macro, const std::string& value) { return std::string(" -D") + macro + "=" + value; }
std::string type_def(const char* macro, DType t) { return def(macro, cl_type(t)); }
std::string flag_def(const char* macro, bool v) { return def(macro, v ? "1" : "0"); }

// Whether every tensor operand is dense in row-major order over the
// iteration shape (scalars do not count).
bool dense(const KernelOperand& o, const ElementwiseArgs& a) {
  if (o.is_scalar) return true;
  std::int64_t expected = 1;
  for (int d = a.ndim - 1; d >= 0; --d) {
    if (a.shape[d] == 1) continue;
    if (o.strides[d] != expected) return false;
    expected *= a.shape[d];
  }
  return true;
}

bool all_dense(const ElementwiseArgs& a) {
  if (!dense(a.out, a)) return false;
  for (int i = 0; i < a.nin; ++i)
    if (!dense(a.in[i], a)) return false;
  return true;
}

EwLayout ew_layout(const ElementwiseArgs& a) {
  EwLayout L{};
  L.ndim = a.ndim;
  L.numel = a.numel;
  for (int d = 0; d < a.ndim; ++d) L.shape[d] = a.shape[d];
  const KernelOperand* ops[4] = {&a.out, &a.in[0], &a.in[1], &a.in[2]};
  for (int k = 0; k <= a.nin && k < 4; ++k) {
    if (ops[k]->is_scalar) {
      L.scalar_mask |= std::int64_t{1} << k;
      continue;
    }
    L.offset[k] = ops[k]->offset;
    for (int d = 0; d < a.ndim; ++d) L.stride[k][d] = ops[k]->strides[d];
  }
  return L;
}

// The kernel argument for a scalar operand (or a zero of `t` for a tensor).
ScalarArg operand_scalar(const KernelOperand& o) {
  return o.is_scalar ? scalar_arg(o.scalar, o.dtype) : scalar_arg(0.0, o.dtype);
}

bool float_only(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp:
    case UnaryOp::Log:
    case UnaryOp::Sqrt:
    case UnaryOp::Rsqrt:
    case UnaryOp::Sin:
    case UnaryOp::Cos:
    case UnaryOp::Tanh:
    case UnaryOp::Sigmoid:
    case UnaryOp::Reciprocal: return true;
    default: return false;
  }
}

std::string lowest_of(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::U8: return "0";
    case DType::I32: return "(-2147483647-1)";
    case DType::I64: return "ANVIL_I64_MIN";
    default: return "(-ANVIL_INF)";
  }
}
std::string highest_of(DType t) {
  switch (t) {
    case DType::Bool: return "1";
    case DType::U8: return "255";
    case DType::I32: return "2147483647";
    case DType::I64: return "ANVIL_I64_MAX";
    default: return "ANVIL_INF";
  }
}

std::size_t pow2_at_most(std::size_t n) {
  std::size_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

// ---- fill, arange, copy ---------------------------------------------------------

void OpenCLBackend::fill(int index, const KernelOperand& out, std::int64_t numel, const Scalar& value) {
  OpScope scope("fill");
  if (numel <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const DType t = out.dtype;
  cl_kernel k = s.programs.kernel(kernel_key(Family::Fill, 0, 0, dt(t)), [&] {
    return KernelSpec{"fill.kern",
                      def("KPREFIX", dname(t)) + type_def("TO", t) + flag_def("TO_BOOL", t == DType::Bool) +
                          def("TR", s.fp64() ? "double" : "float"),
                      std::string(dname(t)) + "_fill"};
  });
  Launch(s, k).buffer(out.data).arg(out.offset).arg(numel).scalar(scalar_arg(value, t)).run(numel, "fill");
}

void OpenCLBackend::arange(int index, const KernelOperand& out, std::int64_t numel, double start, double step) {
  OpScope scope("arange");
  if (numel <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const DType t = out.dtype;
  cl_kernel k = s.programs.kernel(kernel_key(Family::Fill, 1, 0, dt(t)), [&] {
    return KernelSpec{"fill.kern",
                      def("KPREFIX", dname(t)) + type_def("TO", t) + flag_def("TO_BOOL", t == DType::Bool) +
                          def("TR", s.fp64() ? "double" : "float"),
                      std::string(dname(t)) + "_arange"};
  });
  Launch l(s, k);
  l.buffer(out.data).arg(out.offset).arg(numel);
  if (s.fp64()) l.arg(start).arg(step);
  else l.arg(static_cast<float>(start)).arg(static_cast<float>(step));
  l.run(numel, "arange");
}

void OpenCLBackend::copy(int index, const ElementwiseArgs& a) {
  OpScope scope("copy");
  if (a.numel <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const KernelOperand& in = a.in[0];
  const DType ti = in.dtype, to = a.out.dtype;
  const bool is_dense = all_dense(a);
  if (is_dense && !in.is_scalar && ti == to) {
    const std::size_t es = element_size(to);
    const std::size_t src = static_cast<std::size_t>(in.offset) * es, dst = static_cast<std::size_t>(a.out.offset) * es;
    const std::size_t bytes = static_cast<std::size_t>(a.numel) * es;
    const bool overlap = in.data == a.out.data && src < dst + bytes && dst < src + bytes;
    if (!overlap) {
      if (src == dst && in.data == a.out.data) return;
      cl_event ev = nullptr;
      ANVIL_CL_CHECK(s.label(), clEnqueueCopyBuffer(s.queue, static_cast<cl_mem>(in.data),
                                                    static_cast<cl_mem>(a.out.data), src, dst, bytes, 0, nullptr, &ev));
      s.track_locked(ev, "copy");
      return;
    }
  }
  const int variant = is_dense && !in.is_scalar ? 0 : 1;
  cl_kernel k = s.programs.kernel(kernel_key(Family::Copy, 0, variant, dt(ti), dt(to)), [&] {
    const std::string prefix = std::string("copy_") + dname(ti) + "_" + dname(to);
    return KernelSpec{"copy.kern",
                      def("KPREFIX", prefix) + type_def("TI", ti) + type_def("TO", to) +
                          flag_def("TO_BOOL", to == DType::Bool),
                      prefix + (variant == 0 ? "_c" : "_s")};
  });
  if (variant == 0) {
    Launch(s, k).buffer(a.out.data).arg(a.out.offset).buffer(in.data).arg(in.offset).arg(a.numel).run(a.numel, "copy");
    return;
  }
  const EwLayout L = ew_layout(a);
  Launch(s, k).buffer(a.out.data).buffer(in.data).scalar(operand_scalar(in)).arg(L).run(a.numel, "copy");
}

// ---- unary, binary, where -------------------------------------------------------

void OpenCLBackend::unary(int index, UnaryOp op, const detail::UnaryParams& params, const ElementwiseArgs& a) {
  const char* opname = kUnaryNames[static_cast<int>(op)];
  OpScope scope(opname);
  if (a.numel <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const DType ti = a.in[0].dtype, to = a.out.dtype;
  const DType tc = float_only(op) ? (is_floating(to) ? to : is_floating(ti) ? ti : DType::F32) : ti;
  const int variant = all_dense(a) ? 0 : 1;
  cl_kernel k = s.programs.kernel(kernel_key(Family::Unary, static_cast<int>(op), variant, dt(ti), dt(to)), [&] {
    std::string prefix = std::string(opname) + "_" + dname(ti);
    if (to != ti) prefix += std::string("_") + dname(to);
    return KernelSpec{"unary.kern",
                      def("KPREFIX", prefix) + def("UN_FN", std::string("anvil_op_") + opname) + type_def("TI", ti) +
                          type_def("TC", tc) + flag_def("TC_FLOAT", is_floating(tc)) + type_def("TO", to) +
                          flag_def("TO_BOOL", to == DType::Bool),
                      prefix + (variant == 0 ? "_c" : "_s")};
  });
  const ScalarArg lo = scalar_arg(op == UnaryOp::Clamp ? params.lo : 0.0, tc);
  const ScalarArg hi = scalar_arg(op == UnaryOp::Clamp ? params.hi : 0.0, tc);
  if (variant == 0) {
    Launch(s, k)
        .buffer(a.out.data)
        .arg(a.out.offset)
        .buffer(a.in[0].data)
        .arg(a.in[0].offset)
        .scalar(lo)
        .scalar(hi)
        .arg(a.numel)
        .run(a.numel, opname);
    return;
  }
  const EwLayout L = ew_layout(a);
  Launch(s, k).buffer(a.out.data).buffer(a.in[0].data).scalar(lo).scalar(hi).arg(L).run(a.numel, opname);
}

void OpenCLBackend::binary(int index, BinaryOp op, const ElementwiseArgs& a) {
  const char* opname = kBinaryNames[static_cast<int>(op)];
  OpScope scope(opname);
  if (a.numel <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const KernelOperand &x = a.in[0], &y = a.in[1];
  const DType ta = x.dtype, tb = y.dtype, to = a.out.dtype;
  const DType tc = detail::is_comparison(op) ? promote(ta, tb) : promote(promote(ta, tb), to);
  int variant = 3;  // strided
  if (all_dense(a)) {
    if (!x.is_scalar && !y.is_scalar) variant = 0;
    else if (!x.is_scalar) variant = 1;
    else if (!y.is_scalar) variant = 2;
  }
  cl_kernel k =
      s.programs.kernel(kernel_key(Family::Binary, static_cast<int>(op), variant, dt(ta), dt(tb), dt(to)), [&] {
        std::string prefix = std::string(opname) + "_" + dname(ta);
        if (tb != ta || to != (detail::is_comparison(op) ? DType::Bool : ta))
          prefix += std::string("_") + dname(tb) + "_" + dname(to);
        static constexpr const char* kSuffix[] = {"_c", "_cs", "_sc", "_s"};
        return KernelSpec{"binary.kern",
                          def("KPREFIX", prefix) + def("BIN_FN", std::string("anvil_op_") + opname) +
                              type_def("TA", ta) + type_def("TB", tb) + type_def("TC", tc) +
                              flag_def("TC_FLOAT", is_floating(tc)) + type_def("TO", to) +
                              flag_def("TO_BOOL", to == DType::Bool),
                          prefix + kSuffix[variant]};
      });
  if (variant < 3) {
    // Contiguous: plain arguments (PoCL copies a by-value struct per launch).
    Launch(s, k)
        .buffer(a.out.data)
        .arg(a.out.offset)
        .buffer(x.data)
        .arg(x.offset)
        .buffer(y.data)
        .arg(y.offset)
        .scalar(operand_scalar(x))
        .scalar(operand_scalar(y))
        .arg(a.numel)
        .run(a.numel, opname);
    return;
  }
  const EwLayout L = ew_layout(a);
  Launch(s, k)
      .buffer(a.out.data)
      .buffer(x.data)
      .buffer(y.data)
      .scalar(operand_scalar(x))
      .scalar(operand_scalar(y))
      .arg(L)
      .run(a.numel, opname);
}

void OpenCLBackend::where(int index, const ElementwiseArgs& a) {
  OpScope scope("where");
  if (a.numel <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const KernelOperand &c = a.in[0], &x = a.in[1], &y = a.in[2];
  const DType ta = x.dtype, tb = y.dtype, to = a.out.dtype;
  cl_kernel k = s.programs.kernel(kernel_key(Family::Where, 0, 0, dt(ta), dt(tb), dt(to)), [&] {
    std::string prefix = std::string("where_") + dname(to);
    if (ta != to || tb != to) prefix += std::string("_") + dname(ta) + "_" + dname(tb);
    return KernelSpec{"where.kern",
                      def("KPREFIX", prefix) + type_def("TA", ta) + type_def("TB", tb) + type_def("TO", to) +
                          flag_def("TO_BOOL", to == DType::Bool),
                      prefix + "_s"};
  });
  const EwLayout L = ew_layout(a);
  const ScalarArg sc = c.is_scalar ? scalar_arg(c.scalar, DType::Bool) : scalar_arg(0.0, DType::Bool);
  Launch(s, k)
      .buffer(a.out.data)
      .buffer(c.data)
      .buffer(x.data)
      .buffer(y.data)
      .scalar(sc)
      .scalar(operand_scalar(x))
      .scalar(operand_scalar(y))
      .arg(L)
      .run(a.numel, "where");
}

// ---- reductions -----------------------------------------------------------------

namespace {
// Drops size-1 dims and merges neighbours that are contiguous in every
// stride array given, so most reductions index with one or two dims.
struct Dims {
  int n = 0;
  std::int64_t shape[kMaxDims];
  std::int64_t stride[2][kMaxDims];
};
Dims coalesce(const std::int64_t* shape, const std::int64_t* s0, const std::int64_t* s1, int ndim, int nstrides) {
  Dims d;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] == 1) continue;
    if (d.n > 0) {
      const int p = d.n - 1;
      bool merge = true;
      const std::int64_t* src[2] = {s0, s1};
      for (int k = 0; k < nstrides; ++k) merge = merge && d.stride[k][p] == src[k][i] * shape[i];
      if (merge) {
        d.shape[p] *= shape[i];
        for (int k = 0; k < nstrides; ++k) d.stride[k][p] = src[k][i];
        continue;
      }
    }
    d.shape[d.n] = shape[i];
    d.stride[0][d.n] = s0[i];
    d.stride[1][d.n] = nstrides > 1 ? s1[i] : 0;
    ++d.n;
  }
  return d;
}
}  // namespace

void OpenCLBackend::reduce(int index, ReduceOp op, const detail::ReduceArgs& a) {
  const char* opname = kReduceNames[static_cast<int>(op)];
  OpScope scope(opname);
  if (a.out_numel <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);

  ReduceLayout L{};
  const Dims kept = coalesce(a.shape, a.in.strides, a.out.strides, a.nkept, 2);
  const Dims red = coalesce(a.shape + a.nkept, a.in.strides + a.nkept, nullptr, a.nreduced, 1);
  L.nkept = kept.n;
  for (int d = 0; d < kept.n; ++d) {
    L.kshape[d] = kept.shape[d];
    L.kstride[d] = kept.stride[0][d];
    L.ostride[d] = kept.stride[1][d];
  }
  L.nred = red.n;
  for (int d = 0; d < red.n; ++d) {
    L.rshape[d] = red.shape[d];
    L.rstride[d] = red.stride[0][d];
  }
  L.out_numel = a.out_numel;
  L.red_numel = a.reduce_numel;
  L.in_offset = a.in.offset;
  L.out_offset = a.out.offset;
  L.has_scale = op == ReduceOp::Sum && a.scale != 1.0;

  const DType ti = a.in.dtype, to = a.out.dtype;
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  // f32 sums accumulate in double where the device has it: a million f32
  // terms summed in f32 per work-item drift by 1e-5 relative.
  DType ta = (op == ReduceOp::Sum || op == ReduceOp::Prod) ? to : ti;
  if (op == ReduceOp::Sum && ta == DType::F32 && s.fp64()) ta = DType::F64;
  const DType ts = s.fp64() ? DType::F64 : DType::F32;
  const std::string prefix = std::string(opname) + "_" + dname(ti) + "_" + dname(to);
  auto kernel = [&](int variant, const char* suffix) {
    return s.programs.kernel(kernel_key(Family::Reduce, static_cast<int>(op), variant, dt(ti), dt(to), dt(ta)), [&] {
      return KernelSpec{"reduce.kern",
                        def("KPREFIX", prefix) + def("RED_OP", std::to_string(static_cast<int>(op))) +
                            type_def("TI", ti) + type_def("TA", ta) + type_def("TO", to) + type_def("TS", ts) +
                            flag_def("TO_BOOL", to == DType::Bool) + def("TA_LOWEST", lowest_of(ta)) +
                            def("TA_HIGHEST", highest_of(ta)),
                        prefix + suffix};
    });
  };
  const ScalarArg scale = scalar_arg(a.scale, ts);
  const std::int64_t M = a.out_numel, R = a.reduce_numel;
  const std::int64_t cus = std::max(1, s.entry().props.compute_units);

  // Many outputs or short rows: one work-item per output, in enough groups
  // to spread over every compute unit.
  if (R <= 32 || M >= cus * 64) {
    cl_kernel k = kernel(0, "_wi");
    const std::size_t group =
        std::clamp<std::size_t>(static_cast<std::size_t>(M / (4 * cus)), 1, s.local_size());
    const std::size_t global = (static_cast<std::size_t>(M) + group - 1) / group * group;
    Launch(s, k).buffer(a.out.data).buffer(a.in.data).scalar(scale).arg(L).run(1, &global, &group, opname);
    return;
  }
  // Long rows: a work-group per (part, output); parts > 1 when there are too
  // few outputs to occupy the device, combined by a second pass.
  const std::size_t L0 = std::min<std::size_t>(pow2_at_most(std::min<std::size_t>(256, s.entry().max_work_group)),
                                               s.is_cpu() ? 64 : 256);
  std::int64_t parts = (4 * cus + M - 1) / M;
  parts = std::clamp<std::int64_t>(parts, 1, std::max<std::int64_t>(1, R / (static_cast<std::int64_t>(L0) * 4)));
  parts = std::min<std::int64_t>(parts, 1024);
  L.parts = parts;
  cl_kernel wg = kernel(1, "_wg");
  const std::size_t global[2] = {L0 * static_cast<std::size_t>(parts), static_cast<std::size_t>(M)};
  const std::size_t local[2] = {L0, 1};
  if (parts == 1) {
    Launch(s, wg).buffer(a.out.data).buffer(a.in.data).buffer(a.out.data).buffer(a.out.data).scalar(scale).arg(L).run(
        2, global, local, opname);
    return;
  }
  const std::size_t nparts = static_cast<std::size_t>(M * parts);
  void* part_v = s.allocator.allocate(nparts * element_size(ta));
  void* part_i = nullptr;
  try {
    part_i = s.allocator.allocate(nparts * sizeof(std::int64_t));
    Launch(s, wg).buffer(a.out.data).buffer(a.in.data).buffer(part_v).buffer(part_i).scalar(scale).arg(L).run(
        2, global, local, opname);
    cl_kernel fin = kernel(2, "_fin");
    const std::size_t L1 = std::min(L0, pow2_at_most(static_cast<std::size_t>(parts)));
    const std::size_t g2[2] = {L1, static_cast<std::size_t>(M)};
    const std::size_t l2[2] = {L1, 1};
    Launch(s, fin).buffer(a.out.data).buffer(part_v).buffer(part_i).scalar(scale).arg(L).run(2, g2, l2, opname);
  } catch (...) {
    s.allocator.deallocate(part_v, nparts * element_size(ta));
    if (part_i) s.allocator.deallocate(part_i, nparts * sizeof(std::int64_t));
    throw;
  }
  // Safe to free now: the blocks' next user is queued behind these kernels
  // (Note [Asynchronous OpenCL execution]).
  s.allocator.deallocate(part_v, nparts * element_size(ta));
  s.allocator.deallocate(part_i, nparts * sizeof(std::int64_t));
  (void)arg;
}

// ---- index, random --------------------------------------------------------------

void OpenCLBackend::index(int index, const detail::IndexArgs& a) {
  const char* opname = a.op == detail::IndexOp::IndexSelect ? "index_select" : "gather";
  OpScope scope(opname);
  if (a.numel <= 0) return;
  DeviceState& s = state(index);
  std::lock_guard lock(s.mutex);
  const DType t = a.src.dtype, ti = a.index.dtype;
  cl_kernel k = s.programs.kernel(kernel_key(Family::Index, 0, 0, dt(t), dt(ti)), [&] {
    const std::string prefix = std::string("index_") + dname(t) + "_" + dname(ti);
    return KernelSpec{"index.kern", def("KPREFIX", prefix) + type_def("T", t) + type_def("TIDX", ti),
                      prefix + "_gather"};
  });
  IndexLayout L{};
  L.ndim = a.ndim;
  L.dim = a.dim;
  L.numel = a.numel;
  L.src_dim_size = a.src_dim_size;
  L.out_offset = a.out.offset;
  L.src_offset = a.src.offset;
  L.idx_offset = a.index.offset;
  for (int d = 0; d < a.ndim; ++d) {
    L.shape[d] = a.shape[d];
    L.out_stride[d] = a.out.strides[d];
    L.src_stride[d] = a.src.strides[d];
    // index_select's index is 1-D: its one stride applies along `dim`.
    if (a.op == detail::IndexOp::IndexSelect) L.idx_stride[d] = d == a.dim ? a.index.strides[0] : 0;
    else L.idx_stride[d] = a.index.strides[d];
  }
  cl_mem err = s.index_error_buffer_locked(opname, a.src_dim_size);
  Launch(s, k).buffer(a.out.data).buffer(a.src.data).buffer(a.index.data).arg(err).arg(L).run(a.numel, opname);
}

void OpenCLBackend::random(int index, const detail::RandomArgs& a) {
  static constexpr const char* kNames[] = {"rand", "randn", "randint"};
  static constexpr const char* kSuffix[] = {"_uniform", "_normal", "_randint"};
  const int kind = static_cast<int>(a.kind);
  OpScope scope(kNames[kind]);
  if (a.numel <= 0) return;
  DeviceState& s = state(index);
  ANVIL_CHECK(s.fp64(), NotSupported, kNames[kind], ": not supported on ", s.label(),
              "; expected a device with fp64 (Philox normals are computed in double), got ",
              s.entry().props.name);
  std::lock_guard lock(s.mutex);
  const DType t = a.out.dtype;
  cl_kernel k = s.programs.kernel(kernel_key(Family::Random, kind, 0, dt(t)), [&] {
    const std::string prefix = std::string("random_") + dname(t);
    return KernelSpec{"random.kern", def("KPREFIX", prefix) + type_def("TO", t) + flag_def("TO_BOOL", t == DType::Bool),
                      prefix + kSuffix[kind]};
  });
  Launch l(s, k);
  l.buffer(a.out.data).arg(a.out.offset).arg(a.numel).arg(static_cast<cl_ulong>(a.seed)).arg(static_cast<cl_ulong>(a.offset));
  if (a.kind == detail::RandomKind::Randint)
    l.arg(static_cast<std::int64_t>(a.a)).arg(static_cast<std::int64_t>(a.b));
  else
    l.arg(a.a).arg(a.b);
  l.run(a.numel, kNames[kind]);
}

}  // namespace anvil::opencl
