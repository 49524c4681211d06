// LocalGroup: the collectives in one process over a list of devices, built
// from Tensor::to (device-to-device copies where the backend has them,
// through the host otherwise, all in the ledger) and ops on the devices.
// Allreduce reduces into a copy on the first device, then copies the result
// out to every device: 2(n-1) copies of the tensor, which for the two or
// four devices of one machine is what a ring would move too. The ops are
// enqueued on the devices' queues in the calling thread, so the returned Work
// is complete: later work on each device is queued behind the result.
#include <set>

#include "anvil/ops.h"
#include "core/backend.h"
#include "core/ledger_counters.h"
#include "distributed/collective.h"

namespace anvil::dist {

using anvil::detail::cat;
using detail::check_dtype;
using detail::check_tensor;

LocalGroup::LocalGroup(std::vector<Device> devices) : devices_(std::move(devices)) {
  ANVIL_CHECK(!devices_.empty(), ValueError,
              "LocalGroup: no devices; expected at least one device, got an empty list; e.g. "
              "LocalGroup(anvil::try_all_gpus())");
  std::set<std::pair<int, int>> seen;
  for (const Device& d : devices_) {
    ANVIL_CHECK(seen.insert({static_cast<int>(d.type()), d.index()}).second, ValueError,
                "LocalGroup: a device is listed twice; expected distinct devices, got ", d.str(), " again");
    anvil::detail::backend_checked(d, "LocalGroup");  // the device exists
  }
}

namespace {

// One tensor per device, each on its device, all of one dtype and shape.
void check_per_device(const char* op, const std::vector<Tensor>& ts, const std::vector<Device>& devices,
                      const char* what) {
  ANVIL_CHECK(ts.size() == devices.size(), ValueError, op, ": wrong number of ", what,
              " tensors; expected one per device of the group (", devices.size(), "), got ", ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const std::string arg = cat(what, "[", i, "]");
    check_tensor(op, ts[i], arg.c_str());
    ANVIL_CHECK(ts[i].device() == devices[i], DeviceMismatch, op, ": ", arg, " must be on the group's device ", i,
                "; expected ", devices[i].str(), ", got ", ts[i].device().str(), "; move it with .to(",
                devices[i].str(), ")");
    ANVIL_CHECK(ts[i].dtype() == ts[0].dtype(), DTypeError, op, ": ", arg, " has the wrong dtype; expected ",
                to_string(ts[0].dtype()), " (as ", what, "[0]), got ", to_string(ts[i].dtype()));
    ANVIL_CHECK(ts[i].shape() == ts[0].shape(), ShapeError, op, ": ", arg, " has the wrong shape; expected ",
                ts[0].shape().str(), " (as ", what, "[0]), got ", ts[i].shape().str());
  }
}

// acc = acc op x, on acc's device.
void reduce_into(Tensor& acc, const Tensor& x, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      acc.add_(x);
      break;
    case ReduceOp::Prod:
      acc.mul_(x);
      break;
    case ReduceOp::Max:
      acc = maximum(acc, x);
      break;
    case ReduceOp::Min:
      acc = minimum(acc, x);
      break;
  }
}

// The op over `parts` (each on its own device), on `where`.
Tensor reduce_all(const std::vector<Tensor>& parts, Device where, ReduceOp op) {
  Tensor acc = parts[0].copy_to(where);
  for (std::size_t j = 1; j < parts.size(); ++j) reduce_into(acc, parts[j].to(where), op);
  if (op == ReduceOp::Avg) {
    const auto n = static_cast<std::int64_t>(parts.size());
    if (is_floating(acc.dtype())) {
      acc.div_(Scalar(static_cast<double>(n)));
    } else {  // integers truncate towards zero, as the MPI engine does
      Tensor h = acc.cpu().contiguous().clone();
      detail::divide_host(h.raw_data_ptr(), static_cast<std::size_t>(h.numel()), h.dtype(), n);
      acc = h.to(where);
    }
  }
  return acc;
}

void record(const std::vector<Device>& devices, std::size_t bytes) {
  for (const Device& d : devices) anvil::detail::record_collective(d, bytes);
}

}  // namespace

Work LocalGroup::allreduce(std::vector<Tensor>& per_device, ReduceOp op) {
  check_per_device("allreduce", per_device, devices_, "per_device");
  check_dtype("allreduce", per_device[0].dtype(), true, op);
  const Tensor result = reduce_all(per_device, devices_[0], op);
  for (std::size_t i = 0; i < per_device.size(); ++i) per_device[i].copy_(result.to(devices_[i]));
  record(devices_, per_device[0].nbytes());
  return detail::done_work();
}

Work LocalGroup::broadcast(std::vector<Tensor>& per_device, int root) {
  check_per_device("broadcast", per_device, devices_, "per_device");
  check_dtype("broadcast", per_device[0].dtype(), false, ReduceOp::Sum);
  detail::check_root("broadcast", root, size());
  const Tensor src = per_device[static_cast<std::size_t>(root)];
  for (std::size_t i = 0; i < per_device.size(); ++i)
    if (static_cast<int>(i) != root) per_device[i].copy_(src.to(devices_[i]));
  record(devices_, src.nbytes());
  return detail::done_work();
}

Work LocalGroup::allgather(std::vector<std::vector<Tensor>>& out, const std::vector<Tensor>& per_device) {
  check_per_device("allgather", per_device, devices_, "per_device");
  check_dtype("allgather", per_device[0].dtype(), false, ReduceOp::Sum);
  ANVIL_CHECK(out.size() == devices_.size(), ValueError,
              "allgather: wrong number of out lists; expected one per "
              "device of the group (",
              devices_.size(), "), got ", out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::string what = cat("out[", i, "]");
    detail::check_like("allgather", out[i], what.c_str(), per_device[0].dtype(), per_device[0].shape(), devices_[i],
                       devices_.size());
  }
  for (std::size_t i = 0; i < out.size(); ++i)
    for (std::size_t j = 0; j < per_device.size(); ++j)
      if (!out[i][j].is_same(per_device[j])) out[i][j].copy_(per_device[j].to(devices_[i]));
  record(devices_, per_device[0].nbytes() * devices_.size());
  return detail::done_work();
}

Work LocalGroup::reduce_scatter(std::vector<Tensor>& out, const std::vector<std::vector<Tensor>>& in, ReduceOp op) {
  check_per_device("reduce_scatter", out, devices_, "out");
  check_dtype("reduce_scatter", out[0].dtype(), true, op);
  ANVIL_CHECK(in.size() == devices_.size(), ValueError,
              "reduce_scatter: wrong number of in lists; expected one per "
              "device of the group (",
              devices_.size(), "), got ", in.size());
  for (std::size_t j = 0; j < in.size(); ++j) {
    const std::string what = cat("in[", j, "]");
    detail::check_like("reduce_scatter", in[j], what.c_str(), out[0].dtype(), out[0].shape(), devices_[j],
                       devices_.size());
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::vector<Tensor> parts;
    for (std::size_t j = 0; j < in.size(); ++j) parts.push_back(in[j][i]);
    out[i].copy_(reduce_all(parts, devices_[i], op));
  }
  record(devices_, out[0].nbytes() * devices_.size());
  return detail::done_work();
}

}  // namespace anvil::dist
