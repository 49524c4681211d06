#include "backends/common/kernel_specs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "core/half.h"

namespace anvil::device_common {

using detail::BinaryOp;
using detail::FusedOp;
using detail::RandomKind;
using detail::ReduceOp;
using detail::UnaryOp;

namespace {

std::string def(const char* macro, const std::string& value) { return std::string(macro) + "=" + value; }
std::string type_def(const char* macro, DType t) { return def(macro, kernel_type(t)); }
std::string flag_def(const char* macro, bool v) { return def(macro, v ? "1" : "0"); }
// An op's function in scalar.h for the kernel's compute type, by the rule that
// names it after the op (scalar.kern's anvil_op): "anvil_op(exp)".
std::string op_fn(const char* opname) { return std::string("anvil_op(") + opname + ")"; }

std::string lowest_of(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::U8:
      return "0";
    case DType::I32:
      return "(-2147483647-1)";
    case DType::I64:
      return "ANVIL_I64_MIN";
    default:
      return "(-ANVIL_INF)";
  }
}
std::string highest_of(DType t) {
  switch (t) {
    case DType::Bool:
      return "1";
    case DType::U8:
      return "255";
    case DType::I32:
      return "2147483647";
    case DType::I64:
      return "ANVIL_I64_MAX";
    default:
      return "ANVIL_INF";
  }
}

template <typename T>
ScalarArg pack(T v) noexcept {
  ScalarArg a;
  std::memcpy(a.bytes, &v, sizeof v);
  a.size = sizeof v;
  return a;
}

template <typename T>
T saturate(double v) noexcept {
  if (std::isnan(v)) return T{0};
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// dense.kern's defines (Note [Vector loads]): EW_PER_THREAD, EW_VEC, and the
// chunk type of each operand, named by its macro ("VT_A" for TA's).
void dense_defines(std::vector<std::string>& defines, std::initializer_list<std::pair<const char*, DType>> operands) {
  int width = 16;
  for (const auto& [macro, t] : operands) width = std::min(width, dense_vector_width({t}));
  defines.push_back(def("EW_PER_THREAD", std::to_string(dense_elements_per_thread())));
  defines.push_back(def("EW_VEC", std::to_string(width)));
  for (const auto& [macro, t] : operands)
    defines.push_back(def(macro, "anvil_v" + std::to_string(width * static_cast<int>(element_size(t)))));
}

}  // namespace

int dense_vector_width(std::initializer_list<DType> types) noexcept {
  int width = 16;
  for (DType t : types) width = std::min(width, 16 / static_cast<int>(element_size(t)));
  return width;
}

std::int64_t dense_launch_limit() noexcept {
  static const std::int64_t n = [] {
    constexpr std::int64_t kLimit = std::int64_t{1} << 30;
    const char* v = std::getenv("ANVIL_EW_LAUNCH_LIMIT");
    const std::int64_t asked = v ? std::atoll(v) / 16 * 16 : 0;
    return asked >= 16 && asked <= kLimit ? asked : kLimit;
  }();
  return n;
}

std::string define_options(const KernelSpec& spec) {
  std::string out;
  for (const std::string& d : spec.defines) {
    if (!out.empty()) out += ' ';
    out += "-D" + d;
  }
  return out;
}

const char* dtype_name(DType t) noexcept {
  static constexpr std::array<const char*, kNumDTypes> kNames = {"bool", "u8",  "i32", "i64",
                                                                 "f32",  "f64", "f16", "bf16"};
  return kNames[static_cast<int>(t)];
}

const char* kernel_type(DType t) noexcept {
  switch (t) {
    case DType::Bool:
    case DType::U8:
      return "anvil_u8";  // bool is one byte holding 0 or 1
    case DType::I32:
      return "anvil_i32";
    case DType::I64:
      return "anvil_i64";
    case DType::F32:
      return "anvil_f32";
    case DType::F64:
      return "anvil_f64";
    case DType::F16:
      return "anvil_f16";
    case DType::BF16:
      return "anvil_bf16";
  }
  return "?";
}

ScalarArg scalar_arg(const Scalar& s, DType t) noexcept {
  switch (t) {
    case DType::Bool:
      return pack<std::uint8_t>(s.to<bool>() ? 1 : 0);
    case DType::U8:
      return pack<std::uint8_t>(s.to<std::uint8_t>());
    case DType::I32:
      return pack<std::int32_t>(s.to<std::int32_t>());
    case DType::I64:
      return pack<std::int64_t>(s.to<std::int64_t>());
    case DType::F32:
      return pack<float>(s.to<float>());
    case DType::F64:
      return pack<double>(s.to<double>());
    case DType::F16:
      return pack<std::uint16_t>(detail::Half(s.to<float>()).bits);
    case DType::BF16:
      return pack<std::uint16_t>(detail::BFloat16(s.to<float>()).bits);
  }
  return {};
}

ScalarArg scalar_arg(double v, DType t) noexcept {
  switch (t) {
    case DType::Bool:
      return pack<std::uint8_t>(v != 0.0 ? 1 : 0);
    case DType::U8:
      return pack<std::uint8_t>(saturate<std::uint8_t>(v));
    case DType::I32:
      return pack<std::int32_t>(saturate<std::int32_t>(v));
    case DType::I64:
      return pack<std::int64_t>(saturate<std::int64_t>(v));
    case DType::F32:
      return pack<float>(static_cast<float>(v));
    case DType::F64:
      return pack<double>(v);
    case DType::F16:
      return pack<std::uint16_t>(detail::Half(v).bits);
    case DType::BF16:
      return pack<std::uint16_t>(detail::BFloat16(v).bits);
  }
  return {};
}

// ---- specs: kernel symbols are <op>_<dtypes>_<variant> (STYLE) --------------------

KernelSpec FillKernel::spec() const {
  return {"fill.kern",
          {def("KPREFIX", dtype_name(t)), type_def("TO", t), flag_def("TO_BOOL", t == DType::Bool),
           def("TR", fp64 ? "anvil_f64" : "anvil_f32")},
          std::string(dtype_name(t)) + (arange ? "_arange" : "_fill")};
}

// The suffix of a dense (_c), vector (_cv) or strided (_s) kernel.
static const char* dense_suffix(bool strided, bool vector) { return strided ? "_s" : vector ? "_cv" : "_c"; }

KernelSpec CopyKernel::spec() const {
  const std::string prefix = std::string("copy_") + dtype_name(ti) + "_" + dtype_name(to);
  std::vector<std::string> defines = {def("KPREFIX", prefix), type_def("TI", ti), type_def("TO", to),
                                      flag_def("TO_BOOL", to == DType::Bool)};
  dense_defines(defines, {{"VT_I", ti}, {"VT_O", to}});
  return {"copy.kern", std::move(defines), prefix + dense_suffix(strided, vector)};
}

// f16 and bf16 compute in f32 on every device (half.h: no half arithmetic on PoCL).
DType widen_half(DType t) noexcept { return is_half(t) ? DType::F32 : t; }

DType UnaryKernel::compute_type() const noexcept {
  if (!detail::is_float_only(op)) return widen_half(ti);
  return widen_half(is_floating(to) ? to : is_floating(ti) ? ti : DType::F32);
}

KernelSpec UnaryKernel::spec() const {
  const char* opname = detail::name(op);
  const DType tc = compute_type();
  std::string prefix = std::string(opname) + "_" + dtype_name(ti);
  if (to != ti) prefix += std::string("_") + dtype_name(to);
  std::vector<std::string> defines = {def("KPREFIX", prefix),
                                      def("UN_FN", op == UnaryOp::Clamp ? "anvil_op_clamp" : op_fn(opname)),
                                      type_def("TI", ti),
                                      type_def("TC", tc),
                                      flag_def("TC_FLOAT", is_floating(tc)),
                                      type_def("TO", to),
                                      flag_def("TO_BOOL", to == DType::Bool)};
  dense_defines(defines, {{"VT_I", ti}, {"VT_O", to}});
  return {"unary.kern", std::move(defines), prefix + dense_suffix(strided, vector)};
}

int dense_elements_per_thread() noexcept {
  static const int n = [] {
    const char* v = std::getenv("ANVIL_EW_PER_THREAD");
    const int asked = v ? std::atoi(v) : 0;
    return asked >= 1 && asked <= 16 ? asked : 4;
  }();
  return n;
}

KernelSpec BinaryKernel::spec() const {
  const char* opname = detail::name(op);
  const DType tc = widen_half(detail::is_comparison(op) ? promote(ta, tb) : promote(promote(ta, tb), to));
  std::string prefix = opname;
  std::vector<std::string> defines;
  if (prologue.any()) {  // mul_exp_id_f32: mul(exp(a), b)
    const char* inputs[2] = {"PRE_A", "PRE_B"};
    for (int i = 0; i < 2; ++i) {
      const bool has = prologue.pre[i] != UnaryOp::Count;
      prefix += std::string("_") + (has ? detail::name(prologue.pre[i]) : "id");
      if (has) defines.push_back(def(inputs[i], op_fn(detail::name(prologue.pre[i]))));
    }
  }
  prefix += std::string("_") + dtype_name(ta);
  if (tb != ta || to != (detail::is_comparison(op) ? DType::Bool : ta))
    prefix += std::string("_") + dtype_name(tb) + "_" + dtype_name(to);
  static constexpr const char* kSuffix[] = {"_c", "_cs", "_sc", "_s"};
  static constexpr const char* kVectorSuffix[] = {"_cv", "_csv", "_scv", "_s"};
  defines.insert(defines.begin(), {def("KPREFIX", prefix), def("BIN_FN", op_fn(opname)), type_def("TA", ta),
                                   type_def("TB", tb), type_def("TC", tc), flag_def("TC_FLOAT", is_floating(tc)),
                                   type_def("TO", to), flag_def("TO_BOOL", to == DType::Bool)});
  dense_defines(defines, {{"VT_A", ta}, {"VT_B", tb}, {"VT_O", to}});
  return {"binary.kern", std::move(defines), prefix + (vector ? kVectorSuffix : kSuffix)[static_cast<int>(variant)]};
}

KernelSpec WhereKernel::spec() const {
  std::string prefix = std::string("where_") + dtype_name(to);
  if (ta != to || tb != to) prefix += std::string("_") + dtype_name(ta) + "_" + dtype_name(tb);
  std::vector<std::string> defines = {def("KPREFIX", prefix), type_def("TA", ta), type_def("TB", tb),
                                      type_def("TO", to), flag_def("TO_BOOL", to == DType::Bool)};
  dense_defines(defines, {{"VT_C", DType::Bool}, {"VT_A", ta}, {"VT_B", tb}, {"VT_O", to}});
  return {"where.kern", std::move(defines), prefix + dense_suffix(strided, vector)};
}

DType ReduceKernel::accumulator() const noexcept {
  // A million f32 terms summed in f32 by one work-item drift by 1e-5 relative.
  const detail::ReduceKind kind = detail::row(op).kind;
  const bool sum = kind == detail::ReduceKind::Sum;
  DType ta = widen_half((sum || kind == detail::ReduceKind::Prod) ? to : ti);
  if (sum && ta == DType::F32 && fp64 && wide_f32_sums) ta = DType::F64;
  return ta;
}

KernelSpec ReduceKernel::spec() const {
  const DType ta = accumulator();
  const std::string prefix = std::string(detail::name(op)) + "_" + dtype_name(ti) + "_" + dtype_name(to);
  static constexpr const char* kSuffix[] = {"_wi", "_wg", "_fin"};
  return {"reduce.kern",
          {def("KPREFIX", prefix), def("RED_OP", std::to_string(static_cast<int>(op))), type_def("TI", ti),
           type_def("TA", ta), type_def("TO", to), type_def("TS", scale_type()), flag_def("TO_BOOL", to == DType::Bool),
           def("TA_LOWEST", lowest_of(ta)), def("TA_HIGHEST", highest_of(ta))},
          prefix + kSuffix[static_cast<int>(variant)]};
}

KernelSpec IndexKernel::spec() const {
  static constexpr const char* kSuffix[] = {"_gather", "_add", "_copy"};
  const std::string prefix = std::string("index_") + dtype_name(t) + "_" + dtype_name(tindex);
  return {"index.kern",
          {def("KPREFIX", prefix), type_def("T", t), type_def("TIDX", tindex)},
          prefix + kSuffix[static_cast<int>(variant)]};
}

KernelSpec GemmKernel::spec() const {
  const std::string prefix = std::string("gemm_") + dtype_name(t);
  return {
      "gemm.kern",
      {def("KPREFIX", prefix), type_def("T", t), type_def("TA", accumulator()), flag_def("T_BOOL", t == DType::Bool)},
      prefix + "_tiled"};
}

KernelSpec RandomKernel::spec() const {
  static constexpr const char* kSuffix[] = {"_uniform", "_normal", "_randint", "_keep_mask"};
  const std::string prefix = std::string("random_") + dtype_name(t);
  std::vector<std::string> defines = {def("KPREFIX", prefix), type_def("TO", t), flag_def("TO_BOOL", t == DType::Bool)};
  if (!fp64) defines.push_back(def("ANVIL_RNG_F32", "1"));
  return {"random.kern", std::move(defines), prefix + kSuffix[static_cast<int>(kind)]};
}

KernelSpec WindowKernel::spec() const {
  const std::string prefix = std::string("window_") + dtype_name(t);
  return {"window.kern",
          {def("KPREFIX", prefix), type_def("T", t), type_def("TA", widen_half(t))},
          prefix + "_" + detail::name(op)};
}

KernelSpec OptimKernel::spec() const {
  const std::string prefix = std::string("optim_") + dtype_name(t);
  return {"optim.kern",
          {def("KPREFIX", prefix), type_def("T", t)},
          prefix + "_" + detail::name(kind) + (multi ? "_multi" : "")};
}

KernelSpec NormKernel::spec() const {
  const std::string prefix = std::string("norm_") + dtype_name(t);
  return {"norm.kern",
          {def("KPREFIX", prefix), type_def("T", t), type_def("P", params()), type_def("TA", accumulator())},
          prefix + (backward ? "_backward" : "_forward") + (partial ? "_partial" : "")};
}

KernelSpec InterpKernel::spec() const {
  const std::string prefix = std::string("interp_") + dtype_name(t);
  return {"interpolate.kern",
          {def("KPREFIX", prefix), type_def("T", t), type_def("TA", compute_type())},
          prefix + (backward ? "_backward" : "_forward")};
}

KernelSpec SoftmaxKernel::spec() const {
  const std::string prefix = std::string("softmax_") + dtype_name(t);
  return {"softmax.kern",
          {def("KPREFIX", prefix), type_def("T", t), type_def("TA", widen_half(t))},
          prefix + (backward ? "_backward" : "_forward")};
}

KernelSpec LayerNormKernel::spec() const {
  static constexpr const char* kEntries[] = {"_forward", "_backward", "_params_partial", "_params"};
  const std::string prefix = std::string("layer_norm_") + dtype_name(t);
  return {"layer_norm.kern", {def("KPREFIX", prefix), type_def("T", t)}, prefix + kEntries[static_cast<int>(entry)]};
}

KernelSpec RowKernel::spec() const {
  const std::string prefix = std::string("rows_") + dtype_name(t);
  return {
      "rows.kern",
      {def("KPREFIX", prefix), type_def("T", t), type_def("TA", accumulator()), flag_def("FLOAT_T", is_floating(t))},
      prefix + (sort ? "_argsort" : "_cumsum")};
}

std::vector<KernelSpec> all_kernel_specs(bool fp64) {
  std::vector<DType> types;
  for (int i = 0; i < kNumDTypes; ++i)
    if (fp64 || static_cast<DType>(i) != DType::F64) types.push_back(static_cast<DType>(i));
  std::vector<KernelSpec> out;
  for (DType t : types) {
    out.push_back(FillKernel{false, t, fp64}.spec());
    out.push_back(FillKernel{true, t, fp64}.spec());
    for (DType to : types)
      for (int v = 0; v < 3; ++v) out.push_back(CopyKernel{t, to, v == 2, v == 1}.spec());  // _c, _cv, _s
    for (int op = 0; op < static_cast<int>(UnaryOp::Count); ++op) {
      const auto u = static_cast<UnaryOp>(op);
      const DType to = detail::row(u).rule == detail::UnaryRule::ToBool ? DType::Bool
                       : detail::is_float_only(u) && !is_floating(t)    ? DType::F32
                                                                        : t;
      for (int v = 0; v < 3; ++v) out.push_back(UnaryKernel{u, t, to, v == 2, v == 1}.spec());
    }
    for (int op = 0; op < static_cast<int>(BinaryOp::Count); ++op) {
      const auto b = static_cast<BinaryOp>(op);
      if (detail::is_float_only(b) && !is_floating(t)) continue;  // floats only
      if (detail::is_bitwise(b) && is_floating(t)) continue;      // integers and bool
      const DType to = detail::is_comparison(b) ? DType::Bool : t;
      for (int v = 0; v < 4; ++v)
        for (bool vector : {false, true})
          if (!vector || v != static_cast<int>(BinaryVariant::Strided))
            out.push_back(BinaryKernel{b, t, t, to, static_cast<BinaryVariant>(v), {}, vector}.spec());
    }
    if (is_floating(t))  // unary into binary: a prologue on either side, and on both
      for (int v = 0; v < 4; ++v)
        for (detail::BinaryPrologue p : {detail::BinaryPrologue{{UnaryOp::Exp, UnaryOp::Count}},
                                         detail::BinaryPrologue{{UnaryOp::Count, UnaryOp::Sigmoid}},
                                         detail::BinaryPrologue{{UnaryOp::Tanh, UnaryOp::Relu}}})
          for (bool vector : {false, true})
            if (!vector || v != static_cast<int>(BinaryVariant::Strided))
              out.push_back(BinaryKernel{BinaryOp::Mul, t, t, t, static_cast<BinaryVariant>(v), p, vector}.spec());
    for (int v = 0; v < 3; ++v) out.push_back(WhereKernel{t, t, t, v == 2, v == 1}.spec());
    for (int op = 0; op < static_cast<int>(ReduceOp::Count); ++op) {
      const auto r = static_cast<ReduceOp>(op);
      const DType to = detail::is_arg_reduce(r) ? DType::I64 : t;
      for (bool wide : {false, true})
        for (int v = 0; v < 3; ++v)
          out.push_back(ReduceKernel{r, t, to, fp64, wide, static_cast<ReduceVariant>(v)}.spec());
    }
    for (int v = 0; v < 3; ++v) out.push_back(IndexKernel{t, DType::I64, static_cast<IndexVariant>(v)}.spec());
    out.push_back(GemmKernel{t}.spec());
    for (int k = 0; k < 4; ++k) out.push_back(RandomKernel{static_cast<RandomKind>(k), t, fp64}.spec());
    if (!is_half(t)) out.push_back(RowKernel{true, t, fp64}.spec());  // halves sort as f32 (ops/scan_sort.cpp)
    if (t == DType::F32 || t == DType::F64 || t == DType::I64) out.push_back(RowKernel{false, t, fp64}.spec());
    if (is_floating(t))
      for (int op = 0; op < static_cast<int>(FusedOp::Count); ++op)
        if (detail::is_window_kernel(static_cast<FusedOp>(op)))
          out.push_back(WindowKernel{static_cast<FusedOp>(op), t}.spec());
    if (is_floating(t))
      for (bool backward : {false, true}) {
        out.push_back(InterpKernel{backward, t}.spec());
        out.push_back(SoftmaxKernel{backward, t}.spec());
      }
    if (t == DType::F32 || t == DType::F64)
      for (int e = 0; e < static_cast<int>(LayerNormKernel::Entry::Count); ++e)
        out.push_back(LayerNormKernel{static_cast<LayerNormKernel::Entry>(e), t}.spec());
    if (t == DType::F32 || t == DType::F64)
      for (int k = 0; k < static_cast<int>(detail::OptimizerKind::Count); ++k)
        for (bool multi : {false, true})
          out.push_back(OptimKernel{static_cast<detail::OptimizerKind>(k), t, multi}.spec());
    if (is_floating(t))
      for (bool backward : {false, true})
        for (bool wide : {false, true})
          if (!wide || (t != DType::F64 && fp64))
            for (bool partial : {false, true}) out.push_back(NormKernel{backward, t, wide, partial}.spec());
  }
  return out;
}

}  // namespace anvil::device_common
