// Printing in PyTorch's format (DESIGN §4.11). A device tensor is copied to
// the host once (one device→host copy in the ledger), then formatted there.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/observer.h"
#include "ops/host_dispatch.h"
#include "ops/op_common.h"

namespace anvil {

namespace detail {
Tensor host_contiguous(const Tensor& t);
}

namespace {

std::mutex g_print_mutex;
PrintOptions g_print_options;

// How every element of one tensor is formatted: PyTorch's _Formatter.
struct Formatter {
  enum class Mode { Int, Fixed, Sci, Integer, Bool } mode = Mode::Fixed;
  int precision = 4;
  std::size_t width = 1;

  std::string raw(double v) const {
    char buf[64];
    switch (mode) {
      case Mode::Bool:
        return v != 0 ? "True" : "False";
      case Mode::Integer:
        std::snprintf(buf, sizeof buf, "%.0f", v);
        return buf;
      default:
        break;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    switch (mode) {
      case Mode::Int:
        std::snprintf(buf, sizeof buf, "%.0f.", v);
        break;
      case Mode::Fixed:
        std::snprintf(buf, sizeof buf, "%.*f", precision, v);
        break;
      default:
        std::snprintf(buf, sizeof buf, "%.*e", precision, v);
        break;
    }
    return buf;
  }
  std::string operator()(double v) const {
    std::string s = raw(v);
    return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
  }
};

Formatter make_formatter(DType t, const std::vector<double>& shown, int precision) {
  Formatter f;
  f.precision = precision;
  if (t == DType::Bool)
    f.mode = Formatter::Mode::Bool;
  else if (!is_floating(t))
    f.mode = Formatter::Mode::Integer;
  else {
    bool int_mode = true;
    double nz_max = 0, nz_min = INFINITY;
    bool any = false;
    for (double v : shown) {
      if (!std::isfinite(v)) continue;
      if (std::ceil(v) != v) int_mode = false;
      const double a = std::abs(v);
      if (a != 0) {
        nz_max = std::max(nz_max, a);
        nz_min = std::min(nz_min, a);
        any = true;
      }
    }
    const bool wide = any && (nz_max / nz_min > 1000.0 || nz_max > 1.0e8);
    if (int_mode)
      f.mode = any && (nz_max / nz_min > 1000.0 || nz_max > 1.0e8) ? Formatter::Mode::Sci : Formatter::Mode::Int;
    else
      f.mode = any && (wide || nz_min < 1.0e-4) ? Formatter::Mode::Sci : Formatter::Mode::Fixed;
  }
  // PyTorch measures the width over the nonzero finite values only.
  for (double v : shown)
    if (!is_floating(t) || (std::isfinite(v) && v != 0)) f.width = std::max(f.width, f.raw(v).size());
  return f;
}

struct Printer {
  const std::vector<double>& data;
  const Shape& shape;
  const Strides strides;  // contiguous
  bool summarize;
  int edge;
  int linewidth;
  const Formatter& fmt;

  // Indices shown along a dim of size n.
  std::vector<std::int64_t> shown(std::int64_t n) const {
    std::vector<std::int64_t> idx;
    if (summarize && n > 2 * edge) {
      for (std::int64_t i = 0; i < edge; ++i) idx.push_back(i);
      idx.push_back(-1);  // the ellipsis
      for (std::int64_t i = n - edge; i < n; ++i) idx.push_back(i);
    } else {
      for (std::int64_t i = 0; i < n; ++i) idx.push_back(i);
    }
    return idx;
  }

  void print(std::ostream& os, int dim, std::int64_t base, int indent) const {
    const int nd = shape.size();
    if (dim == nd - 1) {
      // One row, wrapped to the line width.
      const std::size_t per_line =
          std::max<std::size_t>(1, static_cast<std::size_t>(std::max(1, linewidth - indent)) / (fmt.width + 2));
      std::vector<std::string> items;
      // PyTorch pads the ellipsis of a row with one space: "1.,  ..., 1.".
      for (std::int64_t i : shown(shape[dim])) items.push_back(i < 0 ? " ..." : fmt(data[base + i * strides[dim]]));
      os << '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) os << (i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ");
        os << items[i];
      }
      os << ']';
      return;
    }
    os << '[';
    bool first = true;
    const std::string sep = "," + std::string(nd - dim - 1, '\n') + std::string(indent + 1, ' ');
    for (std::int64_t i : shown(shape[dim])) {
      if (!first) os << sep;
      first = false;
      if (i < 0)
        os << "...";
      else
        print(os, dim + 1, base + i * strides[dim], indent + 1);
    }
    os << ']';
  }
};

// Gathers the elements that will be shown (all, or the edges when
// summarising) so the formatter's width matches PyTorch's.
void collect_shown(const std::vector<double>& data, const Shape& shape, const Strides& strides, int dim,
                   std::int64_t base, bool summarize, int edge, std::vector<double>& out) {
  if (shape.size() == 0) {
    out.push_back(data[0]);
    return;
  }
  const std::int64_t n = shape[dim];
  auto visit = [&](std::int64_t i) {
    if (dim == shape.size() - 1)
      out.push_back(data[base + i * strides[dim]]);
    else
      collect_shown(data, shape, strides, dim + 1, base + i * strides[dim], summarize, edge, out);
  };
  if (summarize && n > 2 * edge) {
    for (std::int64_t i = 0; i < edge; ++i) visit(i);
    for (std::int64_t i = n - edge; i < n; ++i) visit(i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) visit(i);
  }
}

}  // namespace

void set_printoptions(const PrintOptions& options) {
  std::lock_guard lock(g_print_mutex);
  g_print_options = options;
}

PrintOptions printoptions() {
  std::lock_guard lock(g_print_mutex);
  return g_print_options;
}

std::ostream& operator<<(std::ostream& os, const PrintedTensor& printed) {
  const Tensor& t = printed.tensor;
  if (!t.defined()) return os << "tensor(undefined)";
  const detail::SiteScope site("print", printed.location, false);
  const PrintOptions opt = printoptions();
  const Tensor h = detail::host_contiguous(t);
  const Shape& shape = h.shape();
  const DType dt = h.dtype();
  std::vector<double> data(static_cast<std::size_t>(h.numel()));
  const void* p = static_cast<const char*>(h.impl_ref().storage()->data()) +
                  static_cast<std::size_t>(h.offset()) * element_size(dt);
  ANVIL_DISPATCH_HOST(dt, T, {
    const T* tp = static_cast<const T*>(p);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<double>(tp[i]);
  });

  std::ostringstream body;
  const std::string prefix = "tensor(";
  std::vector<std::string> suffixes;
  const Device d = t.device();
  if (!d.is_cpu()) suffixes.push_back("device='" + d.str() + "'");  // PyTorch's order: device, size, dtype
  if (h.numel() == 0) {
    body << "[]";
    if (shape.size() != 1) {
      std::string size = "size=(";
      for (int i = 0; i < shape.size(); ++i) size += (i ? ", " : "") + std::to_string(shape[i]);
      suffixes.push_back(size + (shape.size() == 1 ? ",)" : ")"));
    }
  } else {
    const bool summarize = h.numel() > opt.threshold;
    std::vector<double> shown;
    const Strides strides = contiguous_strides(shape);
    collect_shown(data, shape, strides, 0, 0, summarize, opt.edgeitems, shown);
    const Formatter fmt = make_formatter(dt, shown, opt.precision);
    if (shape.size() == 0) {
      body << fmt.raw(data[0]);
    } else {
      Printer printer{data, shape, strides, summarize, opt.edgeitems, opt.linewidth, fmt};
      printer.print(body, 0, 0, static_cast<int>(prefix.size()));
    }
  }
  // An empty tensor shows any non-default dtype: there are no values to infer it from.
  const bool default_dtype =
      h.numel() == 0 ? dt == DType::F32 : (dt == DType::F32 || dt == DType::I64 || dt == DType::Bool);
  if (!default_dtype) suffixes.push_back("dtype=" + std::string(to_string(dt)));
  if (const std::string fn = t.grad_fn_name(); !fn.empty())
    suffixes.push_back("grad_fn=<" + fn + ">");
  else if (t.requires_grad())
    suffixes.push_back("requires_grad=True");
  os << prefix << body.str();
  for (const std::string& s : suffixes) os << ", " << s;
  return os << ')';
}

std::string to_string(const Tensor& t, SourceLocation loc) {
  std::ostringstream os;
  os << PrintedTensor(t, loc);
  return os.str();
}

}  // namespace anvil
