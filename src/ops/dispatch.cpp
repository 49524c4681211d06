#include "ops/dispatch.h"

#include "anvil/error.h"

namespace anvil::detail {

void check_supported(const char* op, Primitive p, DType t, Device d) {
  const Support s = backend_checked(d, op).supports(d.index(), p, t);
  if (s.ok) [[likely]]
    return;
  throw NotSupported(cat(op, ": ", t, " is not supported on ", d, " (", s.reason, "); expected ", s.instead, ", got ",
                         t, "; use .to(", s.instead, ") or another device"));
}

namespace dispatch {

namespace {
// The backend of `d` (a device a tensor already lives on, so it exists),
// once every dtype in `dtypes` passed the check.
Backend& checked(const char* op, Primitive p, Device d, std::initializer_list<DType> dtypes) {
  Backend& b = *backend_for(d.type());
  for (DType t : dtypes) {
    if (!b.supports(d.index(), p, t).ok) [[unlikely]]
      check_supported(op, p, t, d);
  }
  return b;
}

Backend& checked(const char* op, Primitive p, Device d, const ElementwiseArgs& a) {
  Backend& b = checked(op, p, d, {a.out.dtype});
  for (int k = 0; k < a.nin; ++k) checked(op, p, d, {a.in[k].dtype});
  return b;
}
}  // namespace

void fill(const char* op, Device d, const KernelOperand& out, std::int64_t numel, const Scalar& value) {
  checked(op, Primitive::Fill, d, {out.dtype}).fill(d.index(), out, numel, value);
}

void arange(const char* op, Device d, const KernelOperand& out, std::int64_t numel, double start, double step) {
  checked(op, Primitive::Arange, d, {out.dtype}).arange(d.index(), out, numel, start, step);
}

void copy(const char* op, Device d, const ElementwiseArgs& a) { checked(op, Primitive::Copy, d, a).copy(d.index(), a); }

void unary(Device d, UnaryOp op, const UnaryParams& params, const ElementwiseArgs& a) {
  checked(name(op), Primitive::Unary, d, a).unary(d.index(), op, params, a);
}

void binary(Device d, BinaryOp op, const ElementwiseArgs& a) {
  checked(name(op), Primitive::Binary, d, a).binary(d.index(), op, a);
}

void where(Device d, const ElementwiseArgs& a) { checked("where", Primitive::Where, d, a).where(d.index(), a); }

void reduce(const char* op, Device d, ReduceOp r, const ReduceArgs& a) {
  checked(op, Primitive::Reduce, d, {a.in.dtype, a.out.dtype}).reduce(d.index(), r, a);
}

void gemm(const char* op, Device d, const GemmArgs& a) {
  checked(op, Primitive::Gemm, d, {a.dtype}).gemm(d.index(), a);
}

void index(const char* op, Device d, const IndexArgs& a) {
  checked(op, Primitive::Index, d, {a.out.dtype, a.src.dtype, a.index.dtype}).index(d.index(), a);
}

void random(const char* op, Device d, const RandomArgs& a) {
  checked(op, Primitive::Random, d, {a.out.dtype}).random(d.index(), a);
}

void scan(const char* op, Device d, const ScanArgs& a) {
  checked(op, Primitive::Scan, d, {a.dtype}).scan(d.index(), a);
}

void argsort(const char* op, Device d, const SortArgs& a) {
  checked(op, Primitive::Sort, d, {a.dtype, DType::I64}).argsort(d.index(), a);
}

}  // namespace dispatch
}  // namespace anvil::detail
